//! kerntune's results: the [`Evaluation`] of a configuration (a [`Status`], the objective,
//! every timing sample and the [`Costs`] breakdown), the SQLite [`Store`] that records each
//! one the moment it exists, and the files other tools use: Kernel Tuner cache files and T4
//! files, read as a [`Landscape`] (which the simulation backend replays) and written by
//! [`formats`].
//!
//! ```
//! use kerntune_store::{Costs, Evaluation, Objective, Store, TuningInfo};
//!
//! let store = Store::in_memory()?;
//! let info = TuningInfo {
//!     kernel: "fingerprint".into(), kernel_name: "vector_add".into(), device: "H100".into(),
//!     problem: "[1024]".into(), params: vec![], objective: Objective::time(),
//! };
//! let tuning = store.tuning(&info)?;
//! store.record(tuning, &Default::default(), &Evaluation::ok(0.25, vec![0.25], Costs::default()))?;
//! assert_eq!(store.evaluations(tuning)?.len(), 1);
//! # Ok::<(), kerntune_store::StoreError>(())
//! ```

mod db;
mod error;
mod evaluation;
mod fingerprint;
pub mod formats;
mod landscape;

pub use db::{config_key, params_json, Artifact, Store, StoredEvaluation, TuningId, TuningInfo, TuningSummary};
pub use error::StoreError;
pub use evaluation::{Costs, Evaluation, Objective, Status};
pub use fingerprint::fingerprint;
pub use landscape::{Format, Landscape, Record};
