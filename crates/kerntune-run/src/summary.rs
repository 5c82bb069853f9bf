//! What a tuning run found and what it cost, as every front reports it.

use std::collections::BTreeMap;

use kerntune_device::DeviceInfo;
use kerntune_engine::stats::median;
use kerntune_engine::{StopReason, Summary, TracePoint};
use kerntune_pipeline::controls::ControlsReport;
use kerntune_pipeline::finalists::RetimeReport;
use kerntune_pipeline::schedule::ScheduleReport;
use kerntune_pipeline::Startup;
use kerntune_space::{ConfigId, Space};
use kerntune_store::{Costs, Evaluation, Objective, Status};
use serde::Serialize;
use serde_json::{Map, Value as Json};

/// A tuning run's result. Its JSON is what `kerntune tune --json` prints and what the
/// Python package reads.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub kernel: String,
    pub device: DeviceInfo,
    /// The objective's name (`time`, or the user's).
    pub objective: String,
    pub higher_is_better: bool,
    pub strategy: String,
    pub seed: u64,
    pub best: Option<BestSummary>,
    /// Whether outputs were checked against a reference before any configuration counted.
    pub verified: bool,
    /// On how many input sets each configuration measured was checked: 0 when outputs are
    /// not checked, 1 for the call's (or spec's) own inputs, more where a reference kernel
    /// computes the outputs of redrawn random inputs. Each evaluation's metrics hold the
    /// sets it passed (`verified_sets`). Edge sizes count among them.
    pub verified_sets: u32,
    /// The other problem sizes (edge sizes) at which each configuration was also checked,
    /// as their labels (`n = 4095`): a configuration wrong there is `invalid_output`, its
    /// reason naming the size.
    pub verified_sizes: Vec<String>,
    /// Where the front checks the edge sizes itself on the best configurations only (the
    /// Triton front, see `vetting`): how many it checked, best first, until enough passed.
    /// Those that passed count the sizes in their `verified_sets`; the summary's do not.
    /// `None` where every configuration measured was checked at them.
    pub edge_checked: Option<usize>,
    pub evaluations: usize,
    pub failed: usize,
    pub from_store: usize,
    /// Evaluations by status.
    pub statuses: BTreeMap<&'static str, usize>,
    pub stop: StopReason,
    /// When every configuration failed, why (with a hint where one is known).
    pub failure: Option<String>,
    pub wall_s: f64,
    pub costs: Costs,
    /// Compile workers used; `None` when nothing was compiled.
    pub compile_workers: Option<usize>,
    /// How the workers came to be ready (kept from the tuning before, or started); `None`
    /// when none were needed.
    pub workers: Option<Startup>,
    /// Where the checks before the search went; `None` for a simulated run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepare: Option<crate::gpu::PrepareTimes>,
    /// Median time the benchmark worker spent on a configuration beyond the kernel's own.
    pub framework_median_ms: Option<f64>,
    /// Shares of the benchmark worker's time the GPU spent in the tuned kernels: in timed
    /// runs only, and in timed plus checked runs.
    pub gpu_busy_timed_runs: Option<f64>,
    pub gpu_busy_tuned_kernels: Option<f64>,
    pub db: String,
    /// The tuning's number in the store (`kerntune report --tuning N`).
    pub tuning: i64,
    pub trace: Vec<TracePoint>,
    pub results: Vec<ResultRow>,
    /// The search's best few timed again against each other (see `finalists`).
    pub finalists: Option<Finalists>,
    /// Why the finalists could not be timed again (a kernel that hung or crashed there):
    /// the search's best stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalists_failed: Option<String>,
    pub schedule: Option<ScheduleReport>,
    /// CompileIQ's search over ACF files for the best configuration, where asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controls: Option<ControlsReport>,
    /// The compiler the user chose (`ptxas 13.3.73 (PATH)`), where one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    /// With `--pareto`: the configurations no other beats on both of two measured values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pareto: Option<Pareto>,
    /// In a many-shape run, this size's line of the run's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<crate::ShapeRow>,
}

/// The Pareto front of two measured values, both lower-is-better, ordered by the first.
#[derive(Debug, Clone, Serialize)]
pub struct Pareto {
    pub axes: [String; 2],
    pub front: Vec<ParetoPoint>,
    /// Configurations measured without one of the two values (no NVML, or from the store
    /// before it was measured), which take no part.
    pub unmeasured: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ParetoPoint {
    pub config: Map<String, Json>,
    pub description: String,
    pub values: [f64; 2],
}

impl RunSummary {
    /// Keeps the Pareto front of `axes` (metric keys such as `time` and `energy_J`) over
    /// the configurations measured, each by its latest evaluation.
    pub fn keep_pareto(&mut self, axes: [&str; 2], space: &Space) {
        self.pareto = Some(Pareto::of(&self.results, axes, space));
    }
}

impl Pareto {
    /// The front of `axes` over `rows` that worked, each configuration by its latest row.
    fn of(rows: &[ResultRow], axes: [&str; 2], space: &Space) -> Pareto {
        let mut latest: BTreeMap<ConfigId, &ResultRow> = BTreeMap::new();
        for row in rows.iter().filter(|r| r.status == Status::Ok.as_str()) {
            latest.insert(row.id, row);
        }
        let value = |row: &ResultRow, key: &str| -> Option<f64> {
            if key == kerntune_engine::objective::TIME {
                row.time_ms.as_ref().and_then(Json::as_f64)
            } else {
                row.observables.get(key).and_then(Json::as_f64)
            }
        };
        let measured: Vec<(&ResultRow, [f64; 2])> =
            latest.values().filter_map(|row| Some((*row, [value(row, axes[0])?, value(row, axes[1])?]))).collect();
        let points: Vec<[f64; 2]> = measured.iter().map(|(_, p)| *p).collect();
        let front = kerntune_engine::objective::pareto_front(&points)
            .into_iter()
            .map(|i| ParetoPoint {
                config: measured[i].0.config.clone(),
                description: space.describe(measured[i].0.id),
                values: measured[i].1,
            })
            .collect();
        Pareto { axes: axes.map(str::to_string), front, unmeasured: latest.len() - measured.len() }
    }
}

/// The finalists that were timed again, the search's best first, and what that found.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Finalists {
    pub configs: Vec<Map<String, Json>>,
    /// The same, as `Space::describe` writes them.
    pub descriptions: Vec<String>,
    pub report: RetimeReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct BestSummary {
    #[serde(skip)]
    pub id: ConfigId,
    pub config: Map<String, Json>,
    pub objective: f64,
    /// Median kernel time (ms) and the number of timed runs it is the median of.
    pub time_ms: Option<f64>,
    pub samples: usize,
    pub description: String,
}

impl BestSummary {
    /// The best configuration, timed by its latest evaluation with samples among `rows`.
    pub(crate) fn new(
        id: ConfigId,
        config: Map<String, Json>,
        objective: f64,
        rows: &[ResultRow],
        space: &Space,
    ) -> Self {
        let samples = rows.iter().rev().find(|r| r.id == id && !r.samples.is_empty()).map(|r| &r.samples);
        BestSummary {
            id,
            config,
            objective,
            time_ms: samples.map(|s| median(s)),
            samples: samples.map_or(0, Vec::len),
            description: space.describe(id),
        }
    }
}

/// One evaluation as it arrived.
#[derive(Debug, Clone, Serialize)]
pub struct ResultRow {
    #[serde(skip)]
    pub id: ConfigId,
    pub config: Map<String, Json>,
    pub status: &'static str,
    pub reason: Option<String>,
    pub objective: Option<f64>,
    pub time_ms: Option<Json>,
    pub samples: Vec<f64>,
    /// Input sets on which its outputs matched the reference (0: not checked, or wrong on
    /// the first); absent for results stored before this was recorded.
    pub verified_sets: Option<u32>,
    /// The factor of the best median its first samples were held to, when early stopping
    /// applied (it follows the run's noise unless the spec fixes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stop_factor: Option<f64>,
    pub costs: Costs,
    pub from_store: bool,
    /// The measured values beyond the time (energy, power, clocks: see
    /// [`kerntune_engine::objective::OBSERVABLES`]) that this evaluation has; none where
    /// they were not measured.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub observables: Map<String, Json>,
}

/// Per-evaluation figures gathered while the run goes.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    statuses: BTreeMap<&'static str, usize>,
    framework_ms: Vec<f64>,
    /// Summed kernel time of all timing samples, seconds.
    measured_s: f64,
    /// Summed kernel time of the checked (untimed) runs, seconds.
    checked_s: f64,
    /// Summed time the benchmark worker spent per configuration, seconds.
    bench_round_trip_s: f64,
    results: Vec<ResultRow>,
}

impl Tally {
    pub(crate) fn add(&mut self, space: &Space, id: ConfigId, evaluation: &Evaluation, from_store: bool) {
        *self.statuses.entry(evaluation.status.as_str()).or_default() += 1;
        self.results.push(ResultRow {
            id,
            config: space.config_json(id),
            status: evaluation.status.as_str(),
            reason: evaluation.reason.clone(),
            objective: evaluation.objective,
            time_ms: evaluation.metrics.get("time").cloned(),
            samples: evaluation.samples.clone(),
            verified_sets: evaluation.metrics.get("verified_sets").and_then(Json::as_u64).map(|n| n as u32),
            early_stop_factor: evaluation.metrics.get("early_stop_factor").and_then(Json::as_f64),
            costs: evaluation.costs,
            from_store,
            observables: kerntune_engine::objective::observed(&evaluation.metrics),
        });
        if from_store {
            return;
        }
        let costs = &evaluation.costs;
        if evaluation.status != Status::CompileFailed {
            self.framework_ms.push(costs.framework_s * 1e3);
        }
        self.measured_s += evaluation.samples.iter().sum::<f64>() / 1e3;
        self.checked_s += evaluation.metrics.get("verify_kernel_ms").and_then(Json::as_f64).unwrap_or(0.0) / 1e3;
        self.bench_round_trip_s += costs.verify_s + costs.benchmark_s + costs.framework_s;
    }

    fn gpu_busy(&self) -> Option<(f64, f64)> {
        (self.bench_round_trip_s > 0.0).then(|| {
            (self.measured_s / self.bench_round_trip_s, (self.measured_s + self.checked_s) / self.bench_round_trip_s)
        })
    }
}

/// What the summary needs to know of the run beyond the tuner's own summary.
pub(crate) struct RunFacts<'a> {
    pub kernel: String,
    pub device: DeviceInfo,
    pub objective: &'a Objective,
    pub strategy: String,
    pub seed: u64,
    pub verified_sets: u32,
    pub verified_sizes: Vec<String>,
    pub wall_s: f64,
    pub compile_workers: Option<usize>,
    pub workers: Option<Startup>,
    pub prepare: Option<crate::gpu::PrepareTimes>,
    pub db: String,
    pub tuning: i64,
    pub compiler: Option<String>,
}

impl RunSummary {
    pub(crate) fn new(summary: Summary, space: &Space, tally: Tally, facts: RunFacts<'_>) -> RunSummary {
        let best = summary
            .best
            .as_ref()
            .map(|best| BestSummary::new(best.id, best.config.clone(), best.objective, &tally.results, space));
        let busy = tally.gpu_busy();
        RunSummary {
            kernel: facts.kernel,
            device: facts.device,
            objective: facts.objective.name.clone(),
            higher_is_better: facts.objective.higher_is_better,
            strategy: facts.strategy,
            seed: facts.seed,
            best,
            verified: facts.verified_sets > 0,
            verified_sets: facts.verified_sets,
            verified_sizes: facts.verified_sizes,
            edge_checked: None,
            evaluations: summary.evaluations,
            failed: summary.failed,
            from_store: summary.from_store,
            statuses: tally.statuses,
            stop: summary.stop,
            failure: summary.failure_message(),
            wall_s: facts.wall_s,
            costs: summary.costs,
            compile_workers: facts.compile_workers,
            workers: facts.workers,
            prepare: facts.prepare,
            framework_median_ms: (!tally.framework_ms.is_empty()).then(|| median(&tally.framework_ms)),
            gpu_busy_timed_runs: busy.map(|b| b.0),
            gpu_busy_tuned_kernels: busy.map(|b| b.1),
            db: facts.db,
            tuning: facts.tuning,
            trace: summary.trace,
            results: tally.results,
            finalists: None,
            schedule: None,
            controls: None,
            compiler: facts.compiler,
            pareto: None,
            shape: None,
            finalists_failed: None,
        }
    }
}

impl RunSummary {
    /// The configurations to time again: the best `count` that worked, ranked by the
    /// objective, whose objective is within `within` (a fraction) of the best's.
    pub(crate) fn contenders(&self, count: usize, within: f64) -> Vec<&ResultRow> {
        let ok = self.ranked();
        let Some(best) = ok.first().and_then(|r| r.objective) else { return Vec::new() };
        ok.into_iter()
            .take(count)
            .filter(|r| r.objective.is_some_and(|o| (o - best).abs() <= within * best.abs()))
            .collect()
    }

    /// The configurations that worked, best first by the objective, each once.
    pub(crate) fn ranked(&self) -> Vec<&ResultRow> {
        let mut ok: Vec<&ResultRow> =
            self.results.iter().filter(|r| r.status == Status::Ok.as_str() && r.objective.is_some()).collect();
        let sign = if self.higher_is_better { -1.0 } else { 1.0 };
        let key = |r: &ResultRow| sign * r.objective.unwrap_or(f64::NAN);
        ok.sort_by(|a, b| key(a).total_cmp(&key(b)));
        ok.dedup_by_key(|r| r.id);
        ok
    }

    /// Makes `row` the best configuration (re-timing found it faster).
    pub(crate) fn replace_best(&mut self, row: &ResultRow, space: &Space) {
        let best = row.objective.map(|o| BestSummary::new(row.id, row.config.clone(), o, &self.results, space));
        self.best = best;
    }
}

#[cfg(test)]
mod tests {
    use kerntune_space::{params_from_json, Space};
    use serde_json::json;

    use super::*;

    fn row(space: &Space, id: usize, status: Status, time: f64, energy: Option<f64>) -> ResultRow {
        let id = ConfigId(id as u32);
        let mut observables = Map::new();
        if let Some(energy) = energy {
            observables.insert("energy_J".into(), json!(energy));
        }
        ResultRow {
            id,
            config: space.config_json(id),
            status: status.as_str(),
            reason: None,
            objective: Some(time),
            time_ms: Some(json!(time)),
            samples: vec![time],
            verified_sets: Some(1),
            costs: Costs::default(),
            from_store: false,
            early_stop_factor: None,
            observables,
        }
    }

    #[test]
    fn the_pareto_front_takes_each_configurations_latest_measurement() {
        let Json::Object(params) = json!({"a": [0, 1, 2, 3, 4]}) else { unreachable!() };
        let space = Space::new::<&str>(params_from_json(&params).expect("params"), &[]).expect("space");
        let rows = vec![
            row(&space, 0, Status::Ok, 1.0, Some(5.0)),
            row(&space, 1, Status::Ok, 4.0, Some(1.0)),
            // Measured again: the latest (2.0 ms, 2.0 J) counts, which 3 no longer beats.
            row(&space, 2, Status::Ok, 2.0, Some(9.0)),
            row(&space, 3, Status::Ok, 3.0, Some(3.0)),
            row(&space, 2, Status::Ok, 2.0, Some(2.0)),
            // A failure and a configuration without an energy figure take no part.
            row(&space, 4, Status::RuntimeFailed, 0.5, Some(0.5)),
        ];
        let mut unmeasured = rows.clone();
        unmeasured.push(row(&space, 4, Status::Ok, 0.1, None));
        for (results, lacking) in [(rows, 0), (unmeasured, 1)] {
            let pareto = Pareto::of(&results, ["time", "energy_J"], &space);
            let front: Vec<[f64; 2]> = pareto.front.iter().map(|p| p.values).collect();
            assert_eq!(front, [[1.0, 5.0], [2.0, 2.0], [4.0, 1.0]]);
            assert_eq!(pareto.front[1].config["a"], 2);
            assert_eq!(pareto.unmeasured, lacking);
        }
    }
}
