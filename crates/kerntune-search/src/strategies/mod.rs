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
pub use default_search::{DefaultOptions, Prior};
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
use crate::{OptionInfo, SearchError, Strategy, ValidOptions};

/// Makes a strategy from its options as JSON.
type Builder = fn(&Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError>;

/// A strategy as the fronts list it.
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

fn parse<T: DeserializeOwned + ValidOptions>(strategy: &str, options: &Map<String, Json>) -> Result<T, SearchError> {
    let error = |message: String| SearchError::Options { strategy: strategy.to_string(), message };
    let parsed: T = serde_json::from_value(Json::Object(options.clone())).map_err(|e| error(e.to_string()))?;
    parsed.validate().map_err(error)?;
    Ok(parsed)
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

/// `default` at the problem size `size` (its variables, in the order of each prior's `size`)
/// with outcomes at other problem sizes of the same kernel to learn from (a many-shape run;
/// see [`Prior`]), and options given as JSON.
pub fn default_with_prior(
    options: &Map<String, Json>,
    prior: Vec<Prior>,
    size: &[f64],
) -> Result<Box<dyn Strategy>, SearchError> {
    Ok(Box::new(DefaultSearch::with_prior(parse("default", options)?, prior, size)))
}

/// Builds a strategy by name with options given as JSON (an empty map for the defaults).
pub fn build_strategy(name: &str, options: &Map<String, Json>) -> Result<Box<dyn Strategy>, SearchError> {
    strategy_info(name)?.build(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(strategy: &str, option: &str, value: Json) -> String {
        let options = Map::from_iter([(option.to_string(), value)]);
        match build_strategy(strategy, &options) {
            Ok(_) => panic!("{strategy} accepted {option} = {:?}", options[option]),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn options_outside_their_declared_range_are_refused_with_the_range() {
        let cases = [
            ("pso", "swarm_size", Json::from(0), "options of strategy 'pso': swarm_size must be at least 1, got 0"),
            ("firefly_algorithm", "swarm_size", Json::from(0), "swarm_size must be at least 1, got 0"),
            ("genetic_algorithm", "population_size", Json::from(0), "population_size must be at least 1, got 0"),
            ("diff_evo", "population_size", Json::from(0), "population_size must be at least 1, got 0"),
            ("default", "trees", Json::from(0), "trees must be at least 1, got 0"),
            ("default", "global_share", Json::from(2), "global_share must be in [0, 1], got 2"),
            ("default", "global_share", Json::from(-0.5), "global_share must be in [0, 1], got -0.5"),
            // A negative limit made f64::clamp panic in the middle of the search.
            ("pso", "max_velocity", Json::from(-1), "max_velocity must be at least 0, got -1"),
            ("genetic_algorithm", "mutation_rate", Json::from(1.5), "mutation_rate must be in [0, 1], got 1.5"),
        ];
        for (strategy, option, value, expected) in cases {
            let message = refusal(strategy, option, value);
            assert!(message.contains(expected), "{strategy} {option}: {message}");
        }
    }

    #[test]
    fn options_at_the_ends_of_their_range_are_accepted() {
        for (strategy, option, value) in [
            ("pso", "swarm_size", Json::from(1)),
            ("default", "global_share", Json::from(0)),
            ("default", "global_share", Json::from(1)),
        ] {
            let options = Map::from_iter([(option.to_string(), value)]);
            assert!(build_strategy(strategy, &options).is_ok(), "{strategy} {option}");
        }
    }

    #[test]
    fn the_listing_states_each_declared_range() {
        let options = DefaultOptions::describe();
        let range = |name: &str| options.iter().find(|o| o.name == name).and_then(|o| o.range.clone());
        assert_eq!(range("trees").as_deref(), Some("at least 1"));
        assert_eq!(range("global_share").as_deref(), Some("in [0, 1]"));
        assert_eq!(range("adjacent"), None);
    }
}
