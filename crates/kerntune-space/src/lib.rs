//! Search spaces for kerntune.
//!
//! A [`Space`] is every valid configuration of a list of [`Param`]s under restrictions
//! written in the Python subset Kernel Tuner users know (`"BLOCK_M * BLOCK_N <= 16384"`),
//! parsed into [`Expression`]s. Configurations are addressed by [`ConfigId`], stored as one
//! integer each, and can be sampled, looked up, moved to a [`Neighbourhood`] or snapped from
//! a point in the unit cube. A space whose configurations would take more than a
//! [`MemoryCap`] is refused with its [`SpaceEstimate`] before it is enumerated.
//! [`Rng`] is the seeded generator every strategy uses. A [`Setting`] names a run's setting
//! in an error the way the user's front spells it ([`Spelling`]).
//!
//! ```
//! use kerntune_space::{Param, Space, Value};
//!
//! let sizes = |name: &str| Param::new(name, [16, 32, 64].map(Value::Int).to_vec());
//! let space = Space::new(vec![sizes("BM")?, sizes("BN")?], &["BM * BN <= 1024"])?;
//! assert_eq!(space.len(), 6);
//! # Ok::<(), kerntune_space::SpaceError>(())
//! ```

mod enumerate;
mod expr;
mod memory;
mod neighbours;
mod param;
mod rng;
mod setting;
mod space;
mod spec;
mod value;

pub use expr::{EvalError, Expression, ParseError, ParseErrorKind};
pub use memory::{MemoryCap, SpaceEstimate, BYTES_PER_CONFIG, MEMORY_CAP_VARIABLE};
pub use neighbours::Neighbourhood;
pub use param::Param;
pub use rng::Rng;
pub use setting::{Setting, Spelling};
pub use space::{ConfigId, Space, SpaceError};
pub use spec::{params_from_json, Restrictions, SpaceSpec};
pub use value::Value;
