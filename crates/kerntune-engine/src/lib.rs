//! kerntune's tuning loop.
//!
//! A [`Tuner`] drives a [`kerntune_search::Strategy`] over a [`kerntune_space::Space`],
//! evaluates what it proposes through a [`Backend`] (a GPU pipeline, or [`SimBackend`]
//! replaying a recorded landscape), answers configurations already in the
//! [`kerntune_store::Store`] at no cost, records every new evaluation the moment it
//! arrives, and stops on its [`Budget`] with a [`StopReason`]. Progress is reported as
//! [`Event`]s; the result is a [`Summary`] with the best configuration and the trace.
//! [`SearchOptions`] are the search settings every front takes, declared once.
//! [`compare_strategies`] runs strategies against each other on recorded landscapes.

mod backend;
mod budget;
pub mod compare;
pub mod objective;
mod search_options;
mod sim;
pub mod stats;
mod tuner;

pub use backend::{Backend, BackendError, Lazy};
pub use budget::{parse_duration, Budget, StopReason, AUTO_STOP_CHANCE, AUTO_STOP_FLOOR};
pub use compare::{compare_strategies, CompareError, Comparison, Contender, NamedLandscape};
pub use search_options::{
    Search, SearchOptions, SearchOptionsError, StrategyOption, TimeLimit, DEFAULT_MAX_FEVALS, DEFAULT_STRATEGY,
};
pub use sim::SimBackend;
pub use tuner::{Best, Event, Summary, TracePoint, TuneError, Tuner};
