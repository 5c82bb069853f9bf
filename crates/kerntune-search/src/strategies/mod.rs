//! Every strategy kerntune ships, one module each, and the registry that names them.

mod basinhopping;
mod bayes_opt;
mod brute_force;
mod default_search;
mod diff_evo;
mod firefly_algorithm;
mod genetic_algorithm;
mod greedy_ils;
mod mls;
mod pso;
mod random_sample;
mod simulated_annealing;

pub use basinhopping::BasinhoppingOptions;
pub use bayes_opt::BayesOptOptions;
pub use brute_force::{BruteForce, BruteForceOptions};
pub use default_search::DefaultOptions;
pub use diff_evo::DiffEvoOptions;
pub use firefly_algorithm::FireflyAlgorithmOptions;
pub use genetic_algorithm::GeneticAlgorithmOptions;
pub use greedy_ils::GreedyIlsOptions;
pub use mls::MlsOptions;
pub use pso::PsoOptions;
pub use random_sample::{RandomSample, RandomSampleOptions};
pub use simulated_annealing::SimulatedAnnealingOptions;

use basinhopping::Basinhopping;
use bayes_opt::BayesOpt;
use default_search::DefaultSearch;
use diff_evo::DiffEvo;
use firefly_algorithm::FireflyAlgorithm;
use genetic_algorithm::GeneticAlgorithm;
use greedy_ils::GreedyIls;
use mls::Mls;
use pso::Pso;
use simulated_annealing::SimulatedAnnealing;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

use crate::support::{Stepper, Stepwise};
use crate::{OptionInfo, SearchError, Strategy};

/// Makes a strategy from its options as JSON.
type Builder = fn(&Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError>;

/// A strategy as the front ends list it.
#[derive(Debug, Clone, Copy)]
pub struct StrategyInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub options: fn() -> Vec<OptionInfo>,
    build: Builder,
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

fn stepwise<S: Stepwise + std::fmt::Debug + 'static>(strategy: S) -> Box<dyn Strategy> {
    Box::new(Stepper::new(strategy))
}

/// Every strategy, `default` first.
pub const STRATEGIES: &[StrategyInfo] = &[
    StrategyInfo {
        name: "default",
        summary: "forest-guided search: expected improvement under a random forest, over neighbours of the best and random configurations",
        options: DefaultOptions::describe,
        build: |o| Ok(Box::new(DefaultSearch::new(parse("default", o)?))),
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
    StrategyInfo {
        name: "genetic_algorithm",
        summary: "generations of tournament selection, uniform crossover and mutation, with elites",
        options: GeneticAlgorithmOptions::describe,
        build: |o| Ok(stepwise(GeneticAlgorithm::new(parse("genetic_algorithm", o)?))),
    },
    StrategyInfo {
        name: "diff_evo",
        summary: "differential evolution (current-to-best/1/bin) on unit-cube coordinates",
        options: DiffEvoOptions::describe,
        build: |o| Ok(stepwise(DiffEvo::new(parse("diff_evo", o)?))),
    },
    StrategyInfo {
        name: "pso",
        summary: "particle swarm optimisation on unit-cube coordinates",
        options: PsoOptions::describe,
        build: |o| Ok(stepwise(Pso::new(parse("pso", o)?))),
    },
    StrategyInfo {
        name: "firefly_algorithm",
        summary: "fireflies drawn towards brighter ones, on unit-cube coordinates",
        options: FireflyAlgorithmOptions::describe,
        build: |o| Ok(stepwise(FireflyAlgorithm::new(parse("firefly_algorithm", o)?))),
    },
    StrategyInfo {
        name: "simulated_annealing",
        summary: "random neighbour moves accepted by the Metropolis rule while cooling, reheating from the best",
        options: SimulatedAnnealingOptions::describe,
        build: |o| Ok(stepwise(SimulatedAnnealing::new(parse("simulated_annealing", o)?))),
    },
    StrategyInfo {
        name: "basinhopping",
        summary: "hill climbs joined by random hops, worse basins accepted by the Metropolis rule",
        options: BasinhoppingOptions::describe,
        build: |o| Ok(stepwise(Basinhopping::new(parse("basinhopping", o)?))),
    },
    StrategyInfo {
        name: "greedy_ils",
        summary: "iterated local search: hill climbs from kicks of the best optimum, random restarts",
        options: GreedyIlsOptions::describe,
        build: |o| Ok(stepwise(GreedyIls::new(parse("greedy_ils", o)?))),
    },
    StrategyInfo {
        name: "mls",
        summary: "multi-start local search: hill climbs from random configurations",
        options: MlsOptions::describe,
        build: |o| Ok(stepwise(Mls::new(parse("mls", o)?))),
    },
    StrategyInfo {
        name: "bayes_opt",
        summary: "Bayesian optimisation: expected improvement under a Gaussian process",
        options: BayesOptOptions::describe,
        build: |o| Ok(Box::new(BayesOpt::new(parse("bayes_opt", o)?))),
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
