//! The search settings of a run, declared once for every front: the CLI flattens them into
//! its flags (feature `clap`), a spec file's `[search]` table and the Python API's JSON job
//! deserialize into them. [`SearchOptions::resolve`] applies the defaults, which live only
//! here, and builds the strategy and the budget.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use kerntune_search::{build_strategy, SearchError, Started, Strategy};
use kerntune_space::{Setting, Space};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value as Json};

use crate::{parse_duration, Budget};

/// The strategy a run uses when nobody names one.
pub const DEFAULT_STRATEGY: &str = "default";

/// The evaluation budget of a run that names no limit at all, with a strategy that cannot
/// stop by itself (brute force excepted, which evaluates the whole space).
pub const DEFAULT_MAX_FEVALS: usize = 100;

/// Search settings as a user gives them: every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SearchOptions {
    /// Search strategy (see `kerntune strategies`). Default: the spec's, else `default`.
    #[cfg_attr(feature = "clap", arg(long, short = 's'))]
    pub strategy: Option<String>,
    /// A strategy option as NAME=VALUE (VALUE in JSON; repeatable).
    #[cfg_attr(feature = "clap", arg(long = "option", value_name = "NAME=VALUE"))]
    #[serde(with = "options_as_map", skip_serializing_if = "Vec::is_empty")]
    pub strategy_options: Vec<StrategyOption>,
    /// Stop after this many distinct configurations (failed ones count). Default: none for
    /// `default`, which stops by itself when more evaluations are unlikely to pay; the whole
    /// space for brute_force; 100 for the others. 0 means no limit.
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true, value_parser = parse_max_fevals))]
    #[serde(deserialize_with = "max_fevals_of")]
    pub max_fevals: Option<usize>,
    /// Stop after this much tuning time, e.g. 90s, 5m, 1h30m.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DURATION"))]
    pub time_limit: Option<TimeLimit>,
    /// Stop once the objective is at least this good (a finite number, negative allowed).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub target: Option<f64>,
    /// Seed of the strategy's random choices: the same seed repeats the same search
    /// [default: 0].
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
}

/// A search ready to run: the strategy built, the budget settled.
pub struct Search {
    pub strategy_name: String,
    pub strategy: Box<dyn Strategy>,
    pub budget: Budget,
    pub seed: u64,
}

impl Search {
    /// This search, measuring `first` (configurations by name, in order) before its strategy
    /// picks its own; those outside `space` are skipped, and with none left it is unchanged.
    pub fn starting_with(self, first: &[Map<String, Json>], space: &Space) -> Search {
        let ids: Vec<_> =
            first.iter().filter_map(|config| space.id_of_values(&space.values_of_json(config)?)).collect();
        if ids.is_empty() {
            return self;
        }
        Search { strategy: Box::new(Started::new(ids, self.strategy)), ..self }
    }
}

impl fmt::Debug for Search {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Search").field("strategy", &self.strategy_name).field("budget", &self.budget).finish()
    }
}

/// Settings that cannot make a search.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchOptionsError {
    #[error(transparent)]
    Strategy(#[from] SearchError),
    /// The target objective is not a finite number.
    #[error("{} must be a finite number, got {}", Setting::TARGET, .0)]
    Target(f64),
}

impl SearchOptions {
    /// These settings, with the ones left out taken from `fallback` (a spec's suggestions).
    pub fn or(self, fallback: &SearchOptions) -> SearchOptions {
        SearchOptions {
            strategy: self.strategy.or_else(|| fallback.strategy.clone()),
            strategy_options: if self.strategy_options.is_empty() {
                fallback.strategy_options.clone()
            } else {
                self.strategy_options
            },
            max_fevals: self.max_fevals.or(fallback.max_fevals),
            time_limit: self.time_limit.or(fallback.time_limit),
            target: self.target.or(fallback.target),
            seed: self.seed.or(fallback.seed),
        }
    }

    /// The strategy options as the strategies read them.
    pub fn strategy_options_map(&self) -> Map<String, Json> {
        self.strategy_options.iter().map(|o| (o.name.clone(), o.value.clone())).collect()
    }

    /// Builds the strategy and settles the budget: `max_fevals` 0 means no limit; without
    /// any limit a strategy that can stops by itself ([`Budget::auto_stop`]), brute force
    /// evaluates the whole space, and the others get [`DEFAULT_MAX_FEVALS`] evaluations.
    pub fn resolve(&self, default_strategy: &str) -> Result<Search, SearchOptionsError> {
        if let Some(target) = self.target.filter(|target| !target.is_finite()) {
            return Err(SearchOptionsError::Target(target));
        }
        // The front's own default when none is named: `default` for kerntune, brute force
        // for Kernel Tuner's `tune_kernel`.
        let strategy_name = self.strategy.as_deref().unwrap_or(default_strategy).to_string();
        let strategy = build_strategy(&strategy_name, &self.strategy_options_map())?;
        let unbounded = self.max_fevals.is_none() && self.time_limit.is_none() && self.target.is_none();
        let auto_stop = unbounded && strategy.stops_by_itself();
        let max_fevals = match self.max_fevals {
            Some(0) => None,
            Some(n) => Some(n),
            None if strategy_name == "brute_force" || !unbounded || auto_stop => None,
            None => Some(DEFAULT_MAX_FEVALS),
        };
        let budget = Budget { max_fevals, time_limit: self.time_limit.map(|t| t.0), target: self.target, auto_stop };
        Ok(Search { strategy_name, strategy, budget, seed: self.seed.unwrap_or(0) })
    }
}

/// A `max_fevals` as text (`--max-fevals`): a whole number, 0 or more. Negative numbers
/// reach this parser, so that `-5` is refused as a value, not taken for an unknown flag.
pub fn parse_max_fevals(text: &str) -> Result<usize, String> {
    text.trim().parse().map_err(|_| "give a whole number of evaluations, 0 or more (0: no limit)".to_string())
}

/// `max_fevals` in a spec file or from Python, refused as the CLI refuses it, naming the
/// setting (serde's own message for -1 names neither the setting nor what it accepts).
fn max_fevals_of<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    match Option::<Json>::deserialize(deserializer)? {
        None | Some(Json::Null) => Ok(None),
        Some(value) => parse_max_fevals(&value.to_string())
            .map(Some)
            .map_err(|why| serde::de::Error::custom(format!("max_fevals = {value}: {why}"))),
    }
}

/// One strategy option, `NAME=VALUE` on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyOption {
    pub name: String,
    pub value: Json,
}

impl FromStr for StrategyOption {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, value) =
            text.split_once('=').ok_or_else(|| format!("strategy option '{text}' is not NAME=VALUE"))?;
        // JSON where it parses (numbers, true, lists), a plain string otherwise.
        let value = serde_json::from_str(value).unwrap_or_else(|_| Json::String(value.to_string()));
        Ok(StrategyOption { name: name.trim().to_string(), value })
    }
}

/// Strategy options travel as one JSON object (`{"popsize": 20}`) in files and from Python.
mod options_as_map {
    use super::*;

    pub fn serialize<S: Serializer>(options: &[StrategyOption], serializer: S) -> Result<S::Ok, S::Error> {
        let map: Map<String, Json> = options.iter().map(|o| (o.name.clone(), o.value.clone())).collect();
        map.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<StrategyOption>, D::Error> {
        let map = Option::<Map<String, Json>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(map.into_iter().map(|(name, value)| StrategyOption { name, value }).collect())
    }
}

/// A time limit: `90s`, `5m`, `1h30m` in text, or a number of seconds (as Python gives it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeLimit(pub Duration);

impl FromStr for TimeLimit {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse_duration(text).map(TimeLimit)
    }
}

impl fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

impl Serialize for TimeLimit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.0.as_secs_f64())
    }
}

impl<'de> Deserialize<'de> for TimeLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bad = |what: String| serde::de::Error::custom(format!("time_limit: {what}"));
        match Json::deserialize(deserializer)? {
            Json::String(text) => text.parse().map_err(bad),
            Json::Number(n) => {
                let seconds = n.as_f64().unwrap_or(f64::NAN);
                Duration::try_from_secs_f64(seconds)
                    .map(TimeLimit)
                    .map_err(|_| bad(format!("{seconds} is not a duration")))
            }
            other => Err(bad(format!("{other} is neither seconds nor a duration such as \"90s\""))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_any_limit_default_stops_by_itself_others_get_the_default_budget_and_brute_force_the_space() {
        let plain = SearchOptions::default().resolve(DEFAULT_STRATEGY).expect("resolves");
        assert_eq!(plain.strategy_name, "default");
        assert_eq!((plain.budget.max_fevals, plain.budget.auto_stop), (None, true));
        let random = SearchOptions { strategy: Some("random_sample".into()), ..Default::default() };
        let random = random.resolve(DEFAULT_STRATEGY).expect("resolves");
        assert_eq!((random.budget.max_fevals, random.budget.auto_stop), (Some(DEFAULT_MAX_FEVALS), false));
        let bounded = SearchOptions { max_fevals: Some(30), ..Default::default() };
        assert!(!bounded.resolve(DEFAULT_STRATEGY).expect("resolves").budget.auto_stop);
        let brute = SearchOptions::default().resolve("brute_force").expect("resolves");
        assert_eq!(brute.budget.max_fevals, None);
        let timed = SearchOptions { time_limit: Some("5m".parse().expect("parses")), ..Default::default() };
        assert_eq!(timed.resolve(DEFAULT_STRATEGY).expect("resolves").budget.max_fevals, None);
        let unlimited = SearchOptions { max_fevals: Some(0), ..Default::default() };
        assert_eq!(unlimited.resolve(DEFAULT_STRATEGY).expect("resolves").budget.max_fevals, None);
    }

    #[test]
    fn a_search_starting_with_given_configurations_proposes_those_of_its_space_first() {
        use kerntune_search::{Context, History};
        use kerntune_space::{Param, Rng, Value};

        let params = vec![Param::new("x", (0..20).map(Value::Int).collect()).expect("param")];
        let space = Space::new(params, &[] as &[&str]).expect("space");
        let named = |x: i64| json_object(serde_json::json!({ "x": x }));
        let first = vec![named(13), named(99), named(4)];
        let search = SearchOptions::default().resolve("random_sample").expect("resolves");
        let mut search = search.starting_with(&first, &space);
        let (mut rng, history) = (Rng::seeded(1), History::new());
        let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
        let batch = search.strategy.ask(&mut context, 4);
        let values: Vec<_> = batch.iter().map(|&id| space.values(id)[0].clone()).collect();
        assert_eq!(values, vec![Value::Int(13), Value::Int(4)], "x = 99 is outside the space");
        let unchanged = SearchOptions::default().resolve("random_sample").expect("resolves");
        let mut unchanged = unchanged.starting_with(&[named(99)], &space);
        let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
        assert_eq!(unchanged.strategy.ask(&mut context, 3).len(), 3, "none in the space: the strategy's own picks");
    }

    fn json_object(value: Json) -> Map<String, Json> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn given_settings_win_over_the_fallbacks() {
        let spec: SearchOptions =
            serde_json::from_str(r#"{"strategy": "random_sample", "max_fevals": 40, "time_limit": "2m"}"#)
                .expect("parses");
        let flags = SearchOptions { max_fevals: Some(10), ..Default::default() }.or(&spec);
        assert_eq!(flags.strategy.as_deref(), Some("random_sample"));
        assert_eq!(flags.max_fevals, Some(10));
        assert_eq!(flags.time_limit, Some(TimeLimit(Duration::from_secs(120))));
    }

    #[test]
    fn python_hands_seconds_and_an_options_object() {
        let options: SearchOptions =
            serde_json::from_str(r#"{"time_limit": 1.5, "strategy_options": {"popsize": 20, "method": "x"}}"#)
                .expect("parses");
        assert_eq!(options.time_limit, Some(TimeLimit(Duration::from_millis(1500))));
        assert_eq!(options.strategy_options_map()["popsize"], 20);
        assert!(serde_json::from_str::<SearchOptions>(r#"{"time_limit": -1}"#).is_err());
        assert!(serde_json::from_str::<SearchOptions>(r#"{"budget": 3}"#).is_err(), "unknown keys are errors");
    }

    #[test]
    fn bad_settings_say_what_is_wrong() {
        let nan = SearchOptions { target: Some(f64::NAN), ..Default::default() };
        assert!(nan.resolve(DEFAULT_STRATEGY).unwrap_err().to_string().contains("target must be a finite number"));
        let unknown = SearchOptions { strategy: Some("nope".into()), ..Default::default() };
        assert!(unknown.resolve(DEFAULT_STRATEGY).is_err());
        assert_eq!(
            "popsize=20".parse::<StrategyOption>().expect("parses"),
            StrategyOption { name: "popsize".into(), value: Json::from(20) }
        );
        assert!("popsize".parse::<StrategyOption>().is_err());
    }

    #[test]
    fn a_negative_or_fractional_max_fevals_is_refused_naming_the_setting() {
        for bad in ["-1", "2.5", "\"ten\""] {
            let error = serde_json::from_str::<SearchOptions>(&format!(r#"{{"max_fevals": {bad}}}"#)).unwrap_err();
            assert!(error.to_string().starts_with(&format!("max_fevals = {bad}: give a whole number")), "{error}");
        }
        assert!(parse_max_fevals("-5").unwrap_err().contains("0 or more"));
        let zero: SearchOptions = serde_json::from_str(r#"{"max_fevals": 0}"#).expect("parses");
        assert_eq!(zero.max_fevals, Some(0));
        let none: SearchOptions = serde_json::from_str(r#"{"max_fevals": null}"#).expect("parses");
        let error = serde_json::from_value::<SearchOptions>(serde_json::json!({"max_fevals": -1})).unwrap_err();
        assert!(error.to_string().starts_with("max_fevals = -1: give a whole number"), "{error}");
        assert_eq!(none.max_fevals, None);
    }
}
