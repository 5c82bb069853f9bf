//! Every strategy kerntune ships, one module each, and the registry that names them.

mod brute_force;
mod random_sample;

pub use brute_force::{BruteForce, BruteForceOptions};
pub use random_sample::{RandomSample, RandomSampleOptions};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

use crate::{OptionInfo, SearchError, Strategy};

/// A strategy as the front ends list it.
#[derive(Debug, Clone, Copy)]
pub struct StrategyInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub options: fn() -> Vec<OptionInfo>,
    build: fn(&Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError>,
}

impl StrategyInfo {
    pub fn build(&self, options: &Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError> {
        (self.build)(options)
    }
}

fn parse<T: DeserializeOwned>(strategy: &str, options: &Map<String, Json>) -> Result<T, SearchError> {
    serde_json::from_value(Json::Object(options.clone()))
        .map_err(|e| SearchError::Options { strategy: strategy.to_string(), message: e.to_string() })
}

/// Every strategy, `default` first.
pub const STRATEGIES: &[StrategyInfo] = &[
    StrategyInfo {
        name: "default",
        summary: "the best strategy overall; what you get without choosing (currently random_sample)",
        options: RandomSampleOptions::describe,
        build: |o| Ok(Box::new(RandomSample::new(parse("default", o)?))),
    },
    StrategyInfo {
        name: "brute_force",
        summary: "every configuration once, in order",
        options: BruteForceOptions::describe,
        build: |o| Ok(Box::new(BruteForce::new(parse("brute_force", o)?))),
    },
    StrategyInfo {
        name: "random_sample",
        summary: "uniform random sampling without replacement",
        options: RandomSampleOptions::describe,
        build: |o| Ok(Box::new(RandomSample::new(parse("random_sample", o)?))),
    },
];

/// Looks a strategy up by name.
pub fn strategy_info(name: &str) -> Result<&'static StrategyInfo, SearchError> {
    STRATEGIES.iter().find(|s| s.name == name).ok_or_else(|| SearchError::UnknownStrategy {
        name: name.to_string(),
        known: STRATEGIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
    })
}

/// Builds a strategy by name with options given as JSON (an empty map for the defaults).
pub fn build_strategy(name: &str, options: &Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError> {
    strategy_info(name)?.build(options)
}
