//! What a front asks of a run besides its kernel, declared once. [`Request`] holds every
//! setting a user gives, with every default applied here: the CLI flattens it into its
//! flags (feature `clap`), the Python extension deserializes the keyword arguments of
//! `kerntune.tune`, `kerntune.compile` and `tune_kernel` into it. [`Front`] names the few
//! conventions in which the fronts differ on purpose (Kernel Tuner's default strategy).

use std::path::PathBuf;

use kerntune_engine::{SearchOptions, DEFAULT_STRATEGY};
use kerntune_pipeline::controls::{ControlsOptions, DEFAULT_BUDGET};
use kerntune_pipeline::finalists::RetimeOptions;
use kerntune_pipeline::schedule::ScheduleOptions;
use kerntune_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

use crate::{Devices, Transfer};

/// The settings of one run as a user gives them; every field may be left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Request {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub search: SearchOptions,
    /// Results database. Default: $KERNTUNE_DB, else ~/.cache/kerntune/results.db.
    #[cfg_attr(feature = "clap", arg(long))]
    pub db: Option<PathBuf>,
    /// GPUs to tune on: `all`, or indices separated by commas (0,1). Each runs its own
    /// benchmark worker; they must be of one model. The finalists' rounds are shared among
    /// them; the schedule stage measures on the first.
    #[cfg_attr(
        feature = "clap",
        arg(long, visible_alias = "device", value_name = "all|0,1,...", default_value_t = Devices::default())
    )]
    pub devices: Devices,
    /// Measure every configuration again instead of answering from the store (new results
    /// replace the stored ones).
    #[cfg_attr(feature = "clap", arg(long))]
    pub fresh: bool,
    /// Compile workers running ahead of the GPU, at most. Default: one per core, but with
    /// --max-fevals no more than a sixth of it (never fewer than 16), so a small budget is
    /// not spent on picks made before any result is back. CUDA C tunings start with 8 and
    /// add workers up to this number while the GPUs wait for compiles.
    #[cfg_attr(feature = "clap", arg(long))]
    pub compile_workers: Option<usize>,
    /// After the search, time the best N (those within 5% of the best) again, interleaved
    /// with the best and against a copy of it (an A/A control); one replaces the best only
    /// when it is faster beyond that control's noise. 1 takes the search's best as it is.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", default_value_t = Request::default().finalists))]
    pub finalists: usize,
    /// Finalists are those whose search median is within this fraction of the best's.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FRACTION", default_value_t = Request::default().finalists_within)
    )]
    pub finalists_within: f64,
    /// Then tune the native instruction schedule (SASS) of the best configuration.
    #[cfg_attr(feature = "clap", arg(long))]
    pub schedule: bool,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub schedule_options: ScheduleOptions,
    /// Target architecture for --compile-only (the GPU's own when tuning).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Request::default().arch))]
    pub arch: String,
    /// Then let CompileIQ search ACF files for the best configuration (the CLI fills this
    /// from its `--controls` flags and the spec's ptxas).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub controls: Option<ControlsOptions>,
    /// In a many-shape run, the size this run tunes and the sizes tuned before it, of which
    /// the nearest starts its search (the fronts fill it as they loop over the sizes).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub transfer: Option<Transfer>,
    /// Configurations measured first, in order, before the strategy picks its own: a list
    /// known to be good (Inductor's own, a tutorial's). Those outside the space are skipped.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub first: Vec<Map<String, Json>>,
}

impl Default for Request {
    fn default() -> Self {
        let retime = RetimeOptions::default();
        Request {
            search: SearchOptions::default(),
            db: None,
            devices: Devices::default(),
            fresh: false,
            compile_workers: None,
            finalists: retime.finalists,
            finalists_within: retime.within,
            schedule: false,
            schedule_options: ScheduleOptions::default(),
            arch: "sm_90".into(),
            controls: None,
            transfer: None,
            first: Vec::new(),
        }
    }
}

impl Request {
    /// The results database: `db`, else the default one.
    pub fn database(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(Store::default_path)
    }

    /// How the search's best few are timed again; `None` when `finalists` is below 2 (the
    /// search's best is taken as it is). Seeded by the search's seed.
    pub fn retime(&self) -> Option<RetimeOptions> {
        (self.finalists > 1).then(|| RetimeOptions {
            finalists: self.finalists,
            within: self.finalists_within,
            seed: self.search.seed.unwrap_or_default(),
            ..RetimeOptions::default()
        })
    }

    /// The schedule stage's settings when `schedule` asks for it, seeded by the search's
    /// seed unless they name their own.
    pub fn schedule(&self) -> Option<ScheduleOptions> {
        self.schedule.then(|| ScheduleOptions {
            seed: self.schedule_options.seed.or(self.search.seed),
            ..self.schedule_options.clone()
        })
    }
}

/// Which front a request comes from, where the fronts differ on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// The `kerntune` command.
    Cli,
    /// `kerntune.tune`, `kerntune.compile` and `@kerntune.autotune`.
    Python,
    /// Kernel Tuner's `tune_kernel`, run by kerntune.
    KernelTuner,
}

impl Front {
    /// The strategy when the request names none: Kernel Tuner's own default for its front.
    pub fn default_strategy(self) -> &'static str {
        match self {
            Front::KernelTuner => "brute_force",
            Front::Cli | Front::Python => DEFAULT_STRATEGY,
        }
    }

    /// Whether the search's best few are timed again: Kernel Tuner reports the best of its
    /// results list, so its front does not, and both answer the same.
    pub fn retimes(self) -> bool {
        self != Front::KernelTuner
    }

    /// What the front offers without a GPU, said when there is none.
    pub fn without_gpu(self) -> &'static str {
        match self {
            Front::Cli => {
                "`--dry-run` checks the space without one, `--compile-only` compiles every configuration (with NVRTC installed)"
            }
            Front::Python | Front::KernelTuner => {
                "kerntune.compile(...) and tune_kernel(..., compile_only=True) compile without one"
            }
        }
    }

    /// The defaults of a request from this front, as JSON, for the front to show in its own
    /// signatures: [`Request::default`]'s fields, `strategy` as [`Front::default_strategy`],
    /// and `controls_budget`.
    pub fn defaults(self) -> Json {
        let mut defaults = serde_json::to_value(Request::default()).unwrap_or_else(|_| json!({}));
        defaults["strategy"] = json!(self.default_strategy());
        defaults["controls_budget"] = json!(DEFAULT_BUDGET);
        defaults
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_left_empty_takes_the_finalists_the_retiming_declares() {
        let request: Request = serde_json::from_str("{}").expect("an empty request");
        let retime = request.retime().expect("the finalists are timed again by default");
        assert_eq!((retime.finalists, retime.within), (4, 0.05));
        assert_eq!(request.arch, "sm_90");
        assert_eq!(request.devices, Devices::List(vec![0]));
        assert!(request.schedule().is_none());
    }

    #[test]
    fn one_finalist_takes_the_searchs_best_as_it_is() {
        let request: Request = serde_json::from_str(r#"{"finalists": 1}"#).expect("a request");
        assert!(request.retime().is_none());
    }

    #[test]
    fn the_stages_after_the_search_take_its_seed_unless_the_schedule_names_its_own() {
        let request: Request = serde_json::from_str(r#"{"search": {"seed": 7}, "schedule": true}"#).expect("a request");
        assert_eq!(request.retime().map(|r| r.seed), Some(7));
        assert_eq!(request.schedule().and_then(|s| s.seed), Some(7));
        let own: Request =
            serde_json::from_str(r#"{"search": {"seed": 7}, "schedule": true, "schedule_options": {"seed": 3}}"#)
                .expect("a request");
        assert_eq!(own.schedule().and_then(|s| s.seed), Some(3));
    }

    #[test]
    fn a_setting_no_front_offers_is_refused_by_name() {
        let error = serde_json::from_str::<Request>(r#"{"finalist": 2}"#).expect_err("a misspelt setting");
        assert!(error.to_string().contains("unknown field `finalist`"), "{error}");
    }

    #[test]
    fn devices_cross_as_the_text_a_user_writes() {
        let request: Request = serde_json::from_str(r#"{"devices": "0,1"}"#).expect("a request");
        assert_eq!(request.devices, Devices::List(vec![0, 1]));
        assert_eq!(serde_json::to_value(&request).expect("serializes")["devices"], "0,1");
        assert!(serde_json::from_str::<Request>(r#"{"devices": "0,0"}"#).is_err());
    }

    #[test]
    fn each_front_shows_its_own_default_strategy_and_the_shared_defaults() {
        let python = Front::Python.defaults();
        assert_eq!(python["strategy"], "default");
        assert_eq!(python["finalists"], 4);
        assert_eq!(python["controls_budget"], DEFAULT_BUDGET);
        assert_eq!(Front::KernelTuner.defaults()["strategy"], "brute_force");
        assert!(!Front::KernelTuner.retimes() && Front::Cli.retimes());
    }
}
