//! The description of a Triton tuning that the Python package hands to Rust.

use std::path::PathBuf;

use kerntune_device::DType;
use kerntune_engine::objective::{self, Formula};
use kerntune_pipeline::protocol::{Bytes, Relocation};
use kerntune_pipeline::Timing;
use kerntune_space::{params_from_json, Param, Space, Value};
use kerntune_store::{Objective, TuningInfo};
use serde::Deserialize;
use serde_json::{Map, Value as Json};

/// Parameters that are compile options rather than constexpr arguments of the kernel. The
/// last two are compiler controls (`kerntune_pipeline::controls`), which reach ptxas
/// through `ptx_options`.
pub const OPTION_NAMES: [&str; 7] =
    ["num_warps", "num_stages", "num_ctas", "maxnreg", "ptx_options", "acf", "opt_level"];

/// The options of [`OPTION_NAMES`] that are compiler controls.
pub fn is_control_option(name: &str) -> bool {
    matches!(name, "acf" | "opt_level")
}

/// What a configuration that leaves a compile option out means: Triton 3.6's default. The
/// Python package reads these (and [`is_compilers_choice`]) from here.
pub fn option_default(name: &str) -> Option<Json> {
    Some(match name {
        "num_warps" => Json::from(4),
        "num_stages" => Json::from(3),
        "num_ctas" => Json::from(1),
        "maxnreg" => Json::from(0),
        "ptx_options" => Json::from(""),
        "acf" => Json::from(kerntune_pipeline::controls::NO_ACF),
        "opt_level" => Json::from(3),
        _ => return None,
    })
}

/// `maxnreg` 0, an empty `ptx_options` and `acf = "none"` mean "the compiler's choice", which a launch and a
/// compile spell by leaving the option out.
pub fn is_compilers_choice(name: &str, value: &Json) -> bool {
    match name {
        "maxnreg" => value.as_i64() == Some(0),
        "ptx_options" => value.as_str() == Some(""),
        "acf" => value.as_str() == Some(kerntune_pipeline::controls::NO_ACF),
        _ => false,
    }
}

/// One parameter of the kernel, in the kernel's order.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TritonArg {
    /// A tensor: a device buffer holding a copy of the user's data. An output is poisoned
    /// before the checked run unless `poison` is false (then it is restored).
    Buffer {
        name: String,
        dtype: DType,
        len: usize,
        file: PathBuf,
        output: bool,
        #[serde(default = "yes")]
        poison: bool,
        /// Zeroed before every launch (`reset_to_zero`).
        #[serde(default)]
        reset: bool,
    },
    /// A scalar, packed as the kernel receives it.
    Scalar { name: String, bytes: Bytes },
    /// A `tl.constexpr` parameter or an argument the compiler turns into a constant; it
    /// is not passed at launch.
    Constant { name: String },
}

impl TritonArg {
    pub fn name(&self) -> &str {
        match self {
            TritonArg::Buffer { name, .. } | TritonArg::Scalar { name, .. } | TritonArg::Constant { name } => name,
        }
    }
}

/// The expected contents of one output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceOutput {
    /// Position of the output among the arguments.
    pub position: usize,
    pub file: PathBuf,
    pub atol: f64,
    pub rtol: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveSpec {
    pub name: String,
    /// Over the parameters, the scalar arguments named in `values`, `time` (ms) and the
    /// measured values (`energy`, `power`...).
    pub expression: Option<String>,
    pub higher_is_better: Option<bool>,
    #[serde(default)]
    pub values: Map<String, Json>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TritonJob {
    pub kernel_name: String,
    /// `name: [values]`, constexprs and compile options alike.
    pub params: Map<String, Json>,
    #[serde(default)]
    pub restrictions: Vec<String>,
    /// A listed space (`triton.Config`s): exactly these configurations, each a value for
    /// every parameter. `None`: every combination of `params` under `restrictions`.
    #[serde(default)]
    pub configs: Option<Vec<Map<String, Json>>>,
    pub args: Vec<TritonArg>,
    /// The entries of pointer-table arguments, and the buffers (arguments, or further
    /// buffers after the kernel's own parameters) they point into.
    #[serde(default)]
    pub relocations: Vec<Relocation>,
    /// `None`: outputs are not checked.
    #[serde(default)]
    pub reference: Option<Vec<ReferenceOutput>>,
    /// Further input sets, each with the outputs expected on it (in the order of
    /// `reference`): every configuration is checked on these too.
    #[serde(default)]
    pub extra_sets: Vec<InputSet>,
    /// In the spec's `[timing]` format; defaults where absent.
    #[serde(default)]
    pub timing: Option<Json>,
    #[serde(default)]
    pub objective: Option<ObjectiveSpec>,
    /// What identifies this kernel in the store (its source, the argument types...).
    pub fingerprint: String,
    /// The problem, for the store's key (shapes, dtypes, the call's key values).
    pub problem: Json,
    /// The command that starts a Triton compile worker.
    pub compile_worker: Vec<String>,
    /// The compile worker's setup file (the kernel as data, the call's arguments), named in
    /// every compile request.
    pub compile_setup: PathBuf,
    /// The command that starts a benchmark worker.
    pub bench_worker: Vec<String>,
    /// Environment variables for both kinds of worker.
    #[serde(default)]
    pub worker_env: Map<String, Json>,
    /// The ptxas the user chose (`ptxas=`; the workers have it as `TRITON_PTXAS_PATH`).
    #[serde(default)]
    pub ptxas: Option<ChosenPtxas>,
}

/// A ptxas the Python front resolved, with the version it answered.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChosenPtxas {
    pub path: PathBuf,
    pub version: String,
}

/// An input set beyond the call's own: new data for some arguments and the outputs expected.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSet {
    /// `(argument position, raw file)` of each argument given new data.
    pub inputs: Vec<(usize, std::path::PathBuf)>,
    /// Raw files of the expected outputs, in the order of the job's `reference`.
    pub expected: Vec<std::path::PathBuf>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl TritonJob {
    pub fn from_json(text: &str) -> Result<TritonJob, JobError> {
        serde_json::from_str(text).map_err(|e| JobError(format!("invalid tuning job: {e}")))
    }

    /// What identifies this job's tuning in the store, on `device`.
    pub fn tuning_info(&self, device: &str, params: Vec<Param>, objective: Objective) -> TuningInfo {
        TuningInfo {
            kernel: format!("triton:{}", self.fingerprint),
            kernel_name: self.kernel_name.clone(),
            device: device.to_string(),
            problem: self.problem.to_string(),
            params,
            objective,
        }
    }

    pub fn param_list(&self) -> Result<Vec<Param>, JobError> {
        let params = params_from_json(&self.params).map_err(|e| JobError(e.to_string()))?;
        for param in &params {
            let is_constexpr =
                self.args.iter().any(|a| matches!(a, TritonArg::Constant { name } if name == param.name()));
            if !is_constexpr && !OPTION_NAMES.contains(&param.name()) {
                return Err(JobError(format!(
                    "parameter '{}' is neither a tl.constexpr argument of {} nor a compile option ({})",
                    param.name(),
                    self.kernel_name,
                    OPTION_NAMES.join(", ")
                )));
            }
        }
        Ok(params)
    }

    /// The configurations to tune: the listed ones, or the product under restrictions.
    pub fn space(&self, params: Vec<Param>) -> Result<Space, JobError> {
        let Some(configs) = &self.configs else {
            return Space::new(params, &self.restrictions).map_err(|e| JobError(e.to_string()));
        };
        if !self.restrictions.is_empty() {
            return Err(JobError("restrictions apply to a params space, not to a list of configs".into()));
        }
        let rows = configs
            .iter()
            .enumerate()
            .map(|(index, config)| {
                params
                    .iter()
                    .map(|param| {
                        config
                            .get(param.name())
                            .and_then(Value::from_json)
                            .and_then(|value| param.index_of(&value))
                            .ok_or_else(|| {
                                JobError(format!("config {index} has no listed value for '{}'", param.name()))
                            })
                    })
                    .collect::<Result<Vec<usize>, JobError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Space::from_configs(params, rows).map_err(|e| JobError(e.to_string()))
    }

    /// A worker command (`argv`) with this job's environment.
    pub fn worker(&self, argv: &[String]) -> Result<kerntune_pipeline::WorkerCommand, JobError> {
        let env = self
            .worker_env
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
            .collect();
        kerntune_pipeline::WorkerCommand::from_argv(argv, env).ok_or_else(|| JobError("an empty worker command".into()))
    }

    pub fn timing(&self) -> Result<Timing, JobError> {
        match &self.timing {
            None => Ok(Timing::default()),
            Some(table) => Timing::from_json(table).map_err(|e| JobError(format!("timing: {e}"))),
        }
    }

    /// The objective's formula, parsed over the parameters, the named values, `time` and the
    /// measured values (`energy`...); a name alone that is measured (`energy`, `edp`) is its
    /// own formula.
    pub fn objective_formula(&self, params: &[Param]) -> Result<Option<Formula>, JobError> {
        let Some(spec) = &self.objective else { return Ok(None) };
        let implied = (spec.name != objective::TIME && Formula::parse(&spec.name, &[]).is_ok()).then_some(&spec.name);
        let Some(text) = spec.expression.as_ref().or(implied) else { return Ok(None) };
        let mut names: Vec<&str> = params.iter().map(Param::name).collect();
        names.extend(spec.values.keys().map(String::as_str));
        Formula::parse(text, &names).map(Some).map_err(JobError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(objective: Json) -> TritonJob {
        let text = serde_json::json!({
            "kernel_name": "add", "params": {"BLOCK": [64, 128]}, "args": [{"kind": "constant", "name": "BLOCK"}],
            "objective": objective, "timing": {"graph": true}, "fingerprint": "f", "problem": {},
            "compile_worker": [], "compile_setup": "/tmp/setup.json", "bench_worker": []
        });
        TritonJob::from_json(&text.to_string()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_measured_name_alone_is_its_own_formula_and_others_need_an_expression() {
        let params = job(Json::Null).param_list().expect("params");
        let formula = |objective: Json| job(objective).objective_formula(&params).expect("parses");
        let energy = formula(serde_json::json!({"name": "energy"})).expect("a formula");
        assert!(energy.needs_energy() && !energy.monotone_in_time(0..1));
        assert!(formula(serde_json::json!({"name": "TFLOP/s"})).is_none());
        let expression =
            formula(serde_json::json!({"name": "x", "expression": "n * energy / BLOCK", "values": {"n": 4}}))
                .expect("a formula");
        let Json::Object(metrics) = serde_json::json!({"energy_J": 0.5}) else { unreachable!() };
        assert_eq!(expression.evaluate(&[Value::Int(64), Value::Int(4)], 1.0, &metrics), Ok(4.0 * 0.5 / 64.0));
        assert!(job(serde_json::json!({"name": "x", "expression": "volts"})).objective_formula(&params).is_err());
        assert!(job(Json::Null).timing().expect("timing").graph);
    }
}
