//! Search strategies for kerntune.
//!
//! A [`Strategy`] proposes configurations of a [`kerntune_space::Space`] (`ask`) and learns
//! from their outcomes (`tell`); the engine owns the loop, the budget and the [`History`].
//! Strategies are seeded through the [`Context`]'s generator and deterministic. Each one
//! declares its options once with [`options!`]; [`STRATEGIES`] lists them all and
//! [`build_strategy`] makes one by name.
//!
//! The strategies live in `strategies/`, one module each, `default` (forest-guided
//! best-first search) among them. What they share is in `support/` (running a planned step
//! as a batch, drawing unevaluated configurations, moves, hill climbing) and `surrogate/`
//! (a random forest and a Gaussian process fitted to the history).
//!
//! ```
//! use kerntune_search::{build_strategy, Context, History};
//! use kerntune_space::{Param, Rng, Space, Value};
//!
//! let space = Space::new(vec![Param::new("x", (0..10).map(Value::Int).collect())?], &["x % 2 == 0"])?;
//! let mut strategy = build_strategy("random_sample", &Default::default())?;
//! let (mut rng, history) = (Rng::seeded(1), History::new());
//! let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
//! assert_eq!(strategy.ask(&mut context, 3).len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod history;
mod options;
mod started;
mod strategies;
mod strategy;
mod support;
mod surrogate;
mod transfer;

pub use history::{History, Observation};
#[doc(hidden)]
pub use options::{check_range, range_text};
pub use options::{Neighbours, OptionInfo, ValidOptions};
pub use started::Started;
pub use strategies::{
    build_strategy, default_with_prior, strategy_info, BasinhoppingOptions, BayesOptOptions, BruteForce,
    BruteForceOptions, DefaultOptions, DiffEvoOptions, FireflyAlgorithmOptions, GeneticAlgorithmOptions,
    GreedyIlsOptions, MlsOptions, Prior, PsoOptions, RandomSample, RandomSampleOptions, SimulatedAnnealingOptions,
    StrategyInfo, STRATEGIES,
};
pub use strategy::{Context, Strategy};
pub use transfer::{learning_from, Outcome};

/// Errors in choosing or configuring a strategy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    #[error("unknown strategy '{name}' (available: {known})")]
    UnknownStrategy { name: String, known: String },
    #[error("options of strategy '{strategy}': {message}")]
    Options { strategy: String, message: String },
}
