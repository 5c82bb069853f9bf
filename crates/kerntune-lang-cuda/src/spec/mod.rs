//! The kernel spec: what `kerntune tune SPEC.toml` tunes. A [`KernelSpec`] holds the
//! kernel source and name, the problem variables, the parameters and restrictions, the
//! launch geometry, the arguments, the verification, the objective and the timing
//! protocol, with every expression parsed and checked when the file is loaded, so that a
//! mistake is reported once, with the key it is under, before anything is compiled.
//!
//! docs/spec.md documents the format with a complete example.

mod edges;
mod launch;
mod raw;

use std::path::{Path, PathBuf};

use kerntune_device::ptxas::Ptxas;
use kerntune_device::{DType, Init};
use kerntune_engine::objective::{self, Formula};
use kerntune_engine::SearchOptions;
use kerntune_pipeline::controls::{self, Controls, CUTLASS_PREFIX};
use kerntune_pipeline::protocol::PtxasStep;
use kerntune_pipeline::{EnergyMode, Geometry, Timing};
use kerntune_space::{params_from_json, Expression, Param, Space, SpaceError, Value};
use kerntune_store::{fingerprint, Objective, TuningInfo};
use serde_json::{Map, Value as Json};

pub use edges::EdgeSize;
pub use launch::{divided_geometry, GridRule, Launch, LaunchError};

use raw::{ExprText, Exprs, RawInit, RawSpec};

/// The parameter whose values are ptxas flags (a compiler control tuned with the rest).
pub const PTXAS_OPTIONS: &str = "ptxas_options";

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SpecError {
    pub path: String,
    pub message: String,
}

/// One argument of the kernel, in order.
#[derive(Debug, Clone)]
pub struct ArgSpec {
    pub name: String,
    pub dtype: DType,
    pub kind: ArgKind,
}

#[derive(Debug, Clone)]
pub enum ArgKind {
    Buffer { size: Expression, init: Init, output: bool, poison: bool },
    Scalar { value: Expression },
}

/// Where the reference outputs come from.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per spec: not worth a box
pub enum Reference {
    /// The outputs of this configuration (values in parameter order).
    Config(Vec<Value>),
    /// A kernel with the same arguments, launched with its own geometry.
    Kernel { name: String, source: String, options: Vec<String>, grid: [Expression; 3], block: [Expression; 3] },
    /// The expected contents of each output (Kernel Tuner's `answer`), in the order of the
    /// tolerances.
    Outputs(Vec<Init>),
}

#[derive(Debug, Clone)]
pub struct Verify {
    pub reference: Reference,
    /// Per argument (by position): `(atol, rtol)` for outputs.
    pub tolerances: Vec<(usize, f64, f64)>,
    /// Input sets checked beyond the spec's own (none for expected outputs as data).
    pub sets: u32,
    /// Other problem sizes at which every configuration is also checked (`[verify] sizes`).
    pub sizes: Vec<EdgeSize>,
}

#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub path: PathBuf,
    pub kernel_name: String,
    pub source: String,
    /// The source's file as the spec names it (`matmul.cu`), so that the compiler's
    /// messages name the user's file and line.
    pub source_file: String,
    /// Compiler option templates (`{param}` substituted per configuration).
    pub options: Vec<String>,
    pub problem: Vec<(String, Value)>,
    pub params: Vec<Param>,
    pub restrictions: Vec<String>,
    pub launch: Launch,
    pub args: Vec<ArgSpec>,
    pub verify: Option<Verify>,
    pub objective: Objective,
    /// Over problem variables, parameters, `time` (ms) and the measured values (`energy`,
    /// `power`...; see [`kerntune_engine::objective`]); `None` means the time itself.
    pub objective_expression: Option<Formula>,
    pub timing: Timing,
    /// Search settings the spec suggests; the command line's override them.
    pub search: SearchOptions,
    /// `[compiler] ptxas`: the ptxas that assembles NVRTC's PTX; `None`, NVRTC's own.
    pub ptxas: Option<Ptxas>,
    /// The parameters that are compiler controls (`[compiler.controls]`, and a
    /// `ptxas_options` among `[params]`), by name.
    pub controls: Vec<String>,
    /// Where ACF files named by the controls are found (the spec's folder).
    pub base: PathBuf,
    /// Of the source, the reference and every setting that changes what is measured.
    pub fingerprint: String,
    /// `shapes`: the problem sizes of a many-shape run (`None`: the `[problem]` size alone).
    pub shapes: Option<Vec<Map<String, Json>>>,
    /// The spec as written, less its run settings, from which [`KernelSpec::at`] rebuilds it.
    canonical: Json,
}

impl KernelSpec {
    pub fn load(path: &Path) -> Result<KernelSpec, SpecError> {
        let name = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| SpecError { path: name.clone(), message: e.to_string() })?;
        KernelSpec::parse(&text, path)
    }

    /// Parses spec text; `path` locates the files it names and labels errors.
    pub fn parse(text: &str, path: &Path) -> Result<KernelSpec, SpecError> {
        let error = |message: String| SpecError { path: path.display().to_string(), message };
        let raw: RawSpec = toml::from_str(text).map_err(|e| error(e.to_string().trim().replace('\n', " ")))?;
        let mut canonical: Json = toml::from_str(text).map_err(|e| error(e.to_string()))?;
        forget_run_settings(&mut canonical);
        Builder { base: path.parent().unwrap_or(Path::new(".")).to_path_buf(), error: &error }
            .build(raw, &canonical)
            .map(|mut spec| {
                spec.path = path.to_path_buf();
                spec
            })
    }

    /// The spec at one size of its `shapes`: its `[problem]` values replaced by the size's,
    /// and everything that depends on them (arguments, launch, restrictions, identity)
    /// worked out again. A size naming a variable `[problem]` does not have is refused.
    pub fn at(&self, shape: &Map<String, Json>) -> Result<KernelSpec, SpecError> {
        let error = |message: String| SpecError { path: self.path.display().to_string(), message };
        let mut canonical = self.canonical.clone();
        let problem = canonical.get_mut("problem").and_then(Json::as_object_mut);
        let Some(problem) = problem else {
            return Err(error("shapes: the spec has no [problem] variables for a size to set".into()));
        };
        for (name, value) in shape {
            match problem.get_mut(name) {
                Some(slot) => *slot = value.clone(),
                None => {
                    let known = problem.keys().cloned().collect::<Vec<_>>().join(", ");
                    return Err(error(format!(
                        "shapes: '{name}' is not a [problem] variable (the spec has {known}): a size sets [problem] values"
                    )));
                }
            }
        }
        let raw: RawSpec = serde_json::from_value(canonical.clone()).map_err(|e| error(e.to_string()))?;
        let sized = Builder { base: self.base.clone(), error: &error }.build(raw, &canonical)?;
        Ok(KernelSpec { path: self.path.clone(), search: self.search.clone(), shapes: None, ..sized })
    }

    /// Parses a spec given as a JSON object with the TOML file's keys, as the Python front
    /// end hands it over; `base` locates the files it names, `label` names it in errors.
    pub fn from_json(text: &str, base: &Path, label: &str) -> Result<KernelSpec, SpecError> {
        let error = |message: String| SpecError { path: label.to_string(), message };
        let canonical: Json = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
        let raw: RawSpec = serde_json::from_value(canonical.clone()).map_err(|e| error(e.to_string()))?;
        let mut canonical = canonical;
        forget_run_settings(&mut canonical);
        Builder { base: base.to_path_buf(), error: &error }.build(raw, &canonical).map(|mut spec| {
            spec.path = base.join(label);
            spec
        })
    }

    /// Names the expressions may use: problem variables, then parameters.
    pub fn names(&self) -> Vec<&str> {
        self.problem.iter().map(|(n, _)| n.as_str()).chain(self.params.iter().map(Param::name)).collect()
    }

    /// Values for the names of [`KernelSpec::names`], for one configuration.
    pub fn values(&self, config: &[Value]) -> Vec<Value> {
        self.problem.iter().map(|(_, v)| v.clone()).chain(config.iter().cloned()).collect()
    }

    pub fn space(&self) -> Result<Space, SpaceError> {
        Space::new(self.params.clone(), &self.restrictions)
    }

    /// Parameters that are compiler controls rather than source parameters, and so are not
    /// `#define`d: those in an option template, and `ptxas_options`.
    fn is_option_param(&self, name: &str) -> bool {
        let placeholder = format!("{{{name}}}");
        self.is_control(name) || self.options.iter().any(|o| o.contains(&placeholder))
    }

    /// Whether the parameter `name` is a compiler control.
    pub fn is_control(&self, name: &str) -> bool {
        self.controls.iter().any(|c| c == name)
    }

    /// Every ptxas flag any configuration may pass to NVRTC's own ptxas (from the controls'
    /// values and the option templates), to check that ptxas supports them before tuning.
    pub fn ptxas_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = Vec::new();
        if self.ptxas.is_none() {
            for param in self.params.iter().filter(|p| self.is_control(p.name())) {
                for value in param.values() {
                    let mut config: Vec<Value> = self.params.iter().map(|p| p.values()[0].clone()).collect();
                    if let Some(position) = self.params.iter().position(|p| p.name() == param.name()) {
                        config[position] = value.clone();
                    }
                    let controls = Controls::of(&self.params, &config, |n| n == param.name(), &self.base);
                    flags.extend(controls.map(|c| c.args).unwrap_or_default());
                }
            }
        }
        flags.extend(self.options.iter().cloned());
        flags
    }

    /// The compiler controls of one configuration.
    pub fn controls_for(&self, config: &[Value]) -> Result<Controls, String> {
        Controls::of(&self.params, config, |name| self.is_control(name), &self.base)
    }

    /// How the chosen ptxas assembles one configuration; `None` without a chosen ptxas.
    pub fn ptxas_step(&self, config: &[Value]) -> Result<Option<PtxasStep>, String> {
        let Some(ptxas) = &self.ptxas else { return Ok(None) };
        let controls = self.controls_for(config)?;
        Ok(Some(PtxasStep {
            path: ptxas.path.clone(),
            version: ptxas.version.clone(),
            args: controls.args,
            prefix: controls.cutlass_name.then(|| CUTLASS_PREFIX.to_string()),
        }))
    }

    /// The source for one configuration: the parameters as `#define NAME value` lines, as
    /// Kernel Tuner writes them, then the kernel.
    pub fn source_for(&self, config: &[Value]) -> String {
        let mut out = String::from("#define kerntune 1\n#define kernel_tuner 1\n");
        for (param, value) in self.params.iter().zip(config) {
            if !self.is_option_param(param.name()) {
                out.push_str(&format!("#define {} {}\n", param.name(), value.source_text()));
            }
        }
        // Without a file name NVRTC names the program after the kernel (matmul_sram.cu).
        let file = self.source_file.replace('\\', "\\\\").replace('"', "\\\"");
        out.push_str(&format!("#line 1 \"{file}\"\n"));
        out.push_str(&self.source);
        out
    }

    /// NVRTC options for one configuration: templates filled in, empty ones dropped, a
    /// template that expands to several words split into several options and, without a
    /// chosen ptxas, each ptxas argument of the compiler controls passed to NVRTC's own.
    pub fn options_for(&self, config: &[Value]) -> Vec<String> {
        let mut options = expand_options(&self.options, &self.params, config);
        if self.ptxas.is_none() {
            let controls = self.controls_for(config).unwrap_or_default();
            options.extend(controls.args.iter().map(|flag| format!("--ptxas-options={flag}")));
        }
        options
    }

    pub fn geometry(&self, config: &[Value]) -> Result<Geometry, LaunchError> {
        self.launch.geometry(&self.values(config))
    }

    /// The objective of a configuration whose median kernel time is `time_ms`, with the
    /// evaluation's `metrics`.
    pub fn objective_value(&self, config: &[Value], time_ms: f64, metrics: &Map<String, Json>) -> Result<f64, String> {
        match &self.objective_expression {
            None => Ok(time_ms),
            Some(formula) => formula.evaluate(&self.values(config), time_ms, metrics),
        }
    }

    /// Replaces the objective with one asked for on the command line (`--objective`),
    /// over the same names as the spec's `[objective]` expression; the energy counter is
    /// then required if the objective needs it.
    pub fn set_objective(&mut self, text: &str, higher_is_better: Option<bool>) -> Result<(), String> {
        let names: Vec<&str> =
            self.problem.iter().map(|(n, _)| n.as_str()).chain(self.params.iter().map(Param::name)).collect();
        let requested = objective::requested(text, higher_is_better, &names)?;
        self.objective = requested.objective;
        self.objective_expression = requested.formula;
        self.timing.energy = self.timing.energy.at_least(self.energy_need());
        let direction = if self.objective.higher_is_better { "higher" } else { "lower" };
        self.vary(&format!("objective {text} {direction}"));
        Ok(())
    }

    /// Times each sample as a CUDA graph of many launches (`--timing graph`), or not.
    pub fn set_graph_timing(&mut self, graph: bool) {
        if self.timing.graph != graph {
            self.timing.graph = graph;
            self.vary(&format!("timing.graph {graph}"));
        }
    }

    /// Measures energy and power with every configuration, where NVML reads them.
    pub fn observe_energy(&mut self) {
        if self.timing.energy == EnergyMode::Off {
            self.timing.energy = EnergyMode::Observe;
            self.vary("timing.energy observe");
        }
    }

    /// Folds a setting given outside the spec file into its fingerprint: it changes what
    /// is measured, so results measured without it are not answers for it.
    fn vary(&mut self, setting: &str) {
        self.fingerprint = fingerprint(&[self.fingerprint.as_str(), setting]);
    }

    /// What the objective asks of the energy counter.
    fn energy_need(&self) -> EnergyMode {
        match &self.objective_expression {
            Some(formula) if formula.needs_energy() => EnergyMode::Require,
            _ => EnergyMode::Off,
        }
    }

    /// The identity of this tuning in a results store, on a named device.
    pub fn tuning_info(&self, device: &str) -> TuningInfo {
        let problem: Map<String, Json> = self.problem.iter().map(|(n, v)| (n.clone(), v.to_json())).collect();
        TuningInfo {
            kernel: format!("cuda:{}", self.fingerprint),
            kernel_name: self.kernel_name.clone(),
            device: device.to_string(),
            problem: Json::Object(problem).to_string(),
            params: self.params.clone(),
            objective: self.objective.clone(),
        }
    }
}

/// Leaves out of a spec's identity what it asks of a run rather than what it measures: the
/// search settings, and the list of sizes (each size is measured as if tuned alone).
fn forget_run_settings(canonical: &mut Json) {
    if let Some(table) = canonical.as_object_mut() {
        // The sizes are shifted out, so that the rest keep their order (the identity hashes
        // it); the search settings are swapped out as they always were, so that results
        // stored before keep their identity.
        table.shift_remove("shapes");
        table.remove("search");
    }
}

/// Fills `{param}` placeholders of option templates with a configuration's values.
pub fn expand_options(templates: &[String], params: &[Param], config: &[Value]) -> Vec<String> {
    let mut options = Vec::new();
    for template in templates {
        let mut text = template.clone();
        for (param, value) in params.iter().zip(config) {
            text = text.replace(&format!("{{{}}}", param.name()), &value.source_text());
        }
        options.extend(text.split_whitespace().map(str::to_string));
    }
    options
}

struct Builder<'a> {
    base: PathBuf,
    error: &'a dyn Fn(String) -> SpecError,
}

impl Builder<'_> {
    fn build(&self, raw: RawSpec, canonical: &Json) -> Result<KernelSpec, SpecError> {
        let error = self.error;
        if raw.kernel.language != "cuda" {
            return Err(error(format!(
                "[kernel] language '{}': this spec format is for CUDA C (Triton kernels are tuned from Python)",
                raw.kernel.language
            )));
        }
        let source = self.read(&raw.kernel.source, "[kernel] source")?;
        let mut problem = Vec::new();
        for (name, json) in &raw.problem {
            let value = Value::from_json(json)
                .ok_or_else(|| error(format!("[problem] {name}: {json} is not a number, bool or string")))?;
            problem.push((name.clone(), value));
        }
        // `restrictions` may be written under [params] (where TOML puts a key that follows
        // the table header) as well as at the top level.
        let mut param_table = raw.params.clone();
        let mut restrictions = raw.restrictions.to_vec();
        if let Some(listed) = param_table.remove("restrictions") {
            let listed: kerntune_space::Restrictions = serde_json::from_value(listed)
                .map_err(|_| error("[params] restrictions must be a string or a list of strings".into()))?;
            restrictions.extend(listed.to_vec());
        }
        let mut params = params_from_json(&param_table).map_err(|e| error(format!("[params] {e}")))?;
        let (ptxas, controls) = self.compiler(&raw.compiler, &mut params)?;
        if let Some(clash) = params.iter().find(|p| problem.iter().any(|(n, _)| n == p.name())) {
            return Err(error(format!("'{}' is both a problem variable and a parameter", clash.name())));
        }
        let names: Vec<&str> = problem.iter().map(|(n, _)| n.as_str()).chain(params.iter().map(Param::name)).collect();
        let problem_names: Vec<&str> = problem.iter().map(|(n, _)| n.as_str()).collect();
        for restriction in &restrictions {
            // Restrictions may use problem variables; they are substituted as constants.
            Expression::parse(restriction, &names).map_err(|e| error(format!("restriction {e}")))?;
        }
        let written_restrictions = restrictions;
        let restrictions = written_restrictions.iter().map(|r| substitute(r, &problem)).collect();
        let callers_launch =
            raw.kernel_tuner.is_some() && raw.launch.grid.is_none() && raw.launch.problem_size.is_none();
        let launch = if callers_launch { Launch::unused() } else { self.launch(&raw.launch, &names, &params)? };
        let args = self.args(&raw.args, &problem_names)?;
        let context = VerifyContext { problem: &problem, params: &params, restrictions: &written_restrictions };
        let verify = raw.verify.as_ref().map(|v| self.verify(v, &context, &args, &names, &source)).transpose()?;
        let (objective, objective_expression) =
            match &raw.objective {
                None => (Objective::time(), None),
                Some(o) => {
                    // A name alone that is measured (`energy`, `edp`...) is its own expression.
                    let implied = (o.expression.is_none() && o.name != objective::TIME)
                        .then(|| Formula::parse(&o.name, &[]).ok().map(|_| &o.name))
                        .flatten();
                    let expression =
                        o.expression.as_ref().or(implied).map(|e| Formula::parse(e, &names)).transpose().map_err(
                            |e| error(format!("[objective] expression {}", e.trim_start_matches("objective "))),
                        )?;
                    let mut objective = Objective::named(&o.name);
                    if let Some(higher) = o.higher_is_better {
                        objective.higher_is_better = higher;
                    }
                    (objective, expression)
                }
            };
        let mut timing = Timing::from_raw(&raw.timing).map_err(|e| error(format!("[timing] {e}")))?;
        if objective_expression.as_ref().is_some_and(Formula::needs_energy) {
            timing.energy = EnergyMode::Require;
        }
        let reference_source = match &verify {
            Some(Verify { reference: Reference::Kernel { source, .. }, .. }) => source.clone(),
            _ => String::new(),
        };
        let mut parts = vec![source.clone(), reference_source, canonical.to_string()];
        // A different ptxas makes different binaries: its results are not these.
        parts.extend(ptxas.as_ref().map(|p| format!("ptxas {}", p.version)));
        let fingerprint = fingerprint(&parts);
        Ok(KernelSpec {
            path: PathBuf::new(),
            kernel_name: raw.kernel.name,
            source,
            source_file: raw.kernel.source,
            options: raw.kernel.options,
            problem,
            params,
            restrictions,
            launch,
            args,
            verify,
            objective,
            objective_expression,
            timing,
            search: raw.search,
            fingerprint,
            shapes: raw.shapes,
            canonical: canonical.clone(),
            ptxas,
            controls,
            base: self.base.clone(),
        })
    }

    /// `[compiler]`: the chosen ptxas, resolved, and the controls appended to `params`.
    /// Returns the ptxas and the names of the control parameters.
    fn compiler(
        &self,
        raw: &raw::RawCompiler,
        params: &mut Vec<Param>,
    ) -> Result<(Option<Ptxas>, Vec<String>), SpecError> {
        let error = self.error;
        let ptxas = raw
            .ptxas
            .as_deref()
            .map(|choice| Ptxas::resolve(choice, &self.base))
            .transpose()
            .map_err(|e| error(format!("[compiler] {e}")))?;
        let listed = params_from_json(&raw.controls).map_err(|e| error(format!("[compiler.controls] {e}")))?;
        for control in &listed {
            if !controls::is_control(control.name()) {
                return Err(error(format!(
                    "[compiler.controls] '{}' is not a compiler control ({})",
                    control.name(),
                    controls::CONTROL_NAMES.join(", ")
                )));
            }
            if params.iter().any(|p| p.name() == control.name()) {
                return Err(error(format!("'{}' is both a parameter and a compiler control", control.name())));
            }
        }
        let mut names: Vec<String> = listed.iter().map(|p| p.name().to_string()).collect();
        if params.iter().any(|p| p.name() == PTXAS_OPTIONS) {
            names.push(PTXAS_OPTIONS.to_string());
        }
        params.extend(listed);
        controls::check_values(params, |name| names.iter().any(|n| n == name), &self.base)
            .map_err(|e| error(format!("[compiler.controls] {e}")))?;
        if ptxas.is_none() && names.iter().any(|n| n == "cutlass_name") {
            return Err(error(
                "[compiler.controls] cutlass_name renames the kernel in its PTX: it needs [compiler] ptxas".into(),
            ));
        }
        Ok((ptxas, names))
    }

    fn read(&self, relative: &str, key: &str) -> Result<String, SpecError> {
        let path = self.base.join(relative);
        std::fs::read_to_string(&path).map_err(|e| (self.error)(format!("{key} {}: {e}", path.display())))
    }

    fn expr(&self, text: &ExprText, names: &[&str], key: &str) -> Result<Expression, SpecError> {
        Expression::parse(&text.text(), names).map_err(|e| (self.error)(format!("{key} {e}")))
    }

    fn three(&self, texts: &[ExprText], names: &[&str], key: &str) -> Result<[Expression; 3], SpecError> {
        if texts.is_empty() || texts.len() > 3 {
            return Err((self.error)(format!("{key} needs 1 to 3 dimensions")));
        }
        let one = ExprText::Int(1);
        let get = |axis: usize| self.expr(texts.get(axis).unwrap_or(&one), names, key);
        Ok([get(0)?, get(1)?, get(2)?])
    }

    fn launch(&self, raw: &raw::RawLaunch, names: &[&str], params: &[Param]) -> Result<Launch, SpecError> {
        let error = self.error;
        let block_names: Vec<String> = raw
            .block_size_names
            .clone()
            .unwrap_or_else(|| ["block_size_x", "block_size_y", "block_size_z"].map(String::from).to_vec());
        let has = |name: &str| params.iter().any(|p| p.name() == name);
        let block_default: Vec<ExprText> = (0..3)
            .map(|axis| match block_names.get(axis) {
                Some(name) if has(name) => ExprText::Text(name.clone()),
                _ => ExprText::Int(1),
            })
            .collect();
        let block = self.three(raw.block.as_deref().unwrap_or(&block_default), names, "[launch] block")?;
        let grid = match (&raw.grid, &raw.problem_size) {
            (Some(_), Some(_)) => return Err(error("[launch] give either grid or problem_size, not both".into())),
            (Some(grid), None) => GridRule::Explicit(self.three(grid, names, "[launch] grid")?),
            (None, Some(size)) => {
                let problem_size = self.three(size, names, "[launch] problem_size")?;
                let divs = [&raw.grid_div_x, &raw.grid_div_y, &raw.grid_div_z];
                let mut div: [Vec<Expression>; 3] = Default::default();
                for axis in 0..3 {
                    let key = format!("[launch] grid_div_{}", ["x", "y", "z"][axis]);
                    div[axis] = match divs[axis] {
                        Some(Exprs::One(e)) => vec![self.expr(e, names, &key)?],
                        Some(Exprs::Many(list)) => {
                            list.iter().map(|e| self.expr(e, names, &key)).collect::<Result<_, _>>()?
                        }
                        None => vec![block[axis].clone()],
                    };
                }
                GridRule::Divide { problem_size, div }
            }
            (None, None) => {
                return Err(error("[launch] needs problem_size (Kernel Tuner's semantics) or an explicit grid".into()))
            }
        };
        let shared_bytes =
            raw.shared_memory.as_ref().map(|e| self.expr(e, names, "[launch] shared_memory")).transpose()?;
        Ok(Launch { grid, block, shared_bytes })
    }

    fn args(&self, raw: &[raw::RawArg], problem_names: &[&str]) -> Result<Vec<ArgSpec>, SpecError> {
        let error = self.error;
        if raw.is_empty() {
            return Err(error("the kernel needs its arguments: add [[args]] tables".into()));
        }
        raw.iter()
            .map(|arg| {
                let key = format!("[[args]] {}", arg.name);
                let dtype = DType::parse(&arg.dtype).ok_or_else(|| {
                    error(format!("{key}: unknown dtype '{}' (f16, bf16, f32, f64, i32, i64, u8)", arg.dtype))
                })?;
                // Sizes and scalar values depend on the problem only: every configuration
                // shares the same buffers.
                let kind = match (&arg.size, &arg.value) {
                    (Some(size), None) => ArgKind::Buffer {
                        size: self.expr(size, problem_names, &format!("{key} size"))?,
                        init: self.init(arg.init.as_ref(), &key)?,
                        output: arg.output,
                        poison: arg.poison.unwrap_or(true),
                    },
                    (None, Some(value)) => {
                        if arg.output || arg.init.is_some() {
                            return Err(error(format!("{key}: a scalar has a value, not init or output")));
                        }
                        ArgKind::Scalar { value: self.expr(value, problem_names, &format!("{key} value"))? }
                    }
                    _ => return Err(error(format!("{key}: give a buffer's size or a scalar's value (one of them)"))),
                };
                Ok(ArgSpec { name: arg.name.clone(), dtype, kind })
            })
            .collect()
    }

    fn init(&self, raw: Option<&RawInit>, key: &str) -> Result<Init, SpecError> {
        let error = self.error;
        Ok(match raw {
            None => Init::Zeros,
            Some(RawInit::Named(name)) => match name.as_str() {
                "zeros" => Init::Zeros,
                "ones" => Init::Ones,
                "arange" => Init::Arange,
                "normal" | "randn" => Init::Normal { mean: 0.0, std: 1.0 },
                "uniform" | "rand" => Init::Uniform { low: 0.0, high: 1.0 },
                other => {
                    return Err(error(format!(
                        "{key}: unknown init '{other}' (zeros, ones, arange, normal, uniform, or {{file = \"x.npy\"}})"
                    )))
                }
            },
            Some(RawInit::Table(table)) => match (&table.normal, &table.uniform, &table.file) {
                (Some(m), None, None) => Init::Normal { mean: m.mean, std: m.std },
                (None, Some(r), None) => Init::Uniform { low: r.low, high: r.high },
                (None, None, Some(file)) => Init::File(self.base.join(file)),
                _ => return Err(error(format!("{key}: init takes one of normal, uniform or file"))),
            },
        })
    }

    fn verify(
        &self,
        raw: &raw::RawVerify,
        context: &VerifyContext<'_>,
        args: &[ArgSpec],
        names: &[&str],
        source: &str,
    ) -> Result<Verify, SpecError> {
        let error = self.error;
        let params = context.params;
        let reference = match (&raw.reference.config, &raw.reference.kernel, &raw.reference.outputs) {
            (None, None, Some(outputs)) => {
                let mut data = Vec::new();
                for arg in args.iter().filter(|a| matches!(a.kind, ArgKind::Buffer { output: true, .. })) {
                    let file = outputs.get(&arg.name).and_then(Json::as_str).ok_or_else(|| {
                        error(format!("[verify] reference outputs: no file for output '{}'", arg.name))
                    })?;
                    let path = self.base.join(file);
                    let is_npy = path.extension().is_some_and(|e| e == "npy");
                    data.push(if is_npy { Init::File(path) } else { Init::Raw(path) });
                }
                if let Some(extra) = outputs.keys().find(|k| {
                    !args.iter().any(|a| &a.name == *k && matches!(a.kind, ArgKind::Buffer { output: true, .. }))
                }) {
                    return Err(error(format!("[verify] reference outputs: '{extra}' is not an output buffer")));
                }
                Reference::Outputs(data)
            }
            (Some(config), None, None) => {
                let values = params
                    .iter()
                    .map(|p| {
                        // A compiler control left out takes its first value.
                        let first = controls::is_control(p.name()).then(|| p.values()[0].to_json());
                        let json = config.get(p.name()).or(first.as_ref()).ok_or_else(|| {
                            error(format!("[verify] reference config has no value for '{}'", p.name()))
                        })?;
                        Value::from_json(json).filter(|v| p.index_of(v).is_some()).ok_or_else(|| {
                            error(format!("[verify] reference config: {json} is not a value of '{}'", p.name()))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(extra) = config.keys().find(|k| params.iter().all(|p| p.name() != *k)) {
                    return Err(error(format!("[verify] reference config: '{extra}' is not a parameter")));
                }
                Reference::Config(values)
            }
            (None, Some(name), None) => {
                let reference_source = match &raw.reference.source {
                    Some(file) => self.read(file, "[verify] reference source")?,
                    None => source.to_string(),
                };
                let problem_only: Vec<&str> =
                    names.iter().copied().filter(|n| params.iter().all(|p| p.name() != *n)).collect();
                let grid = raw
                    .reference
                    .grid
                    .as_deref()
                    .ok_or_else(|| error("[verify] a reference kernel needs its grid".into()))?;
                let block = raw
                    .reference
                    .block
                    .as_deref()
                    .ok_or_else(|| error("[verify] a reference kernel needs its block".into()))?;
                Reference::Kernel {
                    name: name.clone(),
                    source: reference_source,
                    options: raw.reference.options.clone(),
                    grid: self.three(grid, &problem_only, "[verify] reference grid")?,
                    block: self.three(block, &problem_only, "[verify] reference block")?,
                }
            }
            _ => {
                return Err(error(
                    "[verify] reference takes one of config = {...}, kernel = \"name\" or outputs = {...}".into(),
                ))
            }
        };
        let (atol, rtol) = (raw.atol.unwrap_or(1e-6), raw.rtol.unwrap_or(1e-5));
        let mut tolerances = Vec::new();
        for (position, arg) in args.iter().enumerate() {
            if let ArgKind::Buffer { output: true, .. } = arg.kind {
                let specific = raw.outputs.get(&arg.name).and_then(Json::as_object);
                let get = |key: &str, default: f64| {
                    specific.and_then(|s| s.get(key)).and_then(Json::as_f64).unwrap_or(default)
                };
                tolerances.push((position, get("atol", atol), get("rtol", rtol)));
            }
        }
        if let Some(unknown) = raw
            .outputs
            .keys()
            .find(|k| !args.iter().any(|a| &a.name == *k && matches!(a.kind, ArgKind::Buffer { output: true, .. })))
        {
            return Err(error(format!("[verify.outputs] '{unknown}' is not an output buffer")));
        }
        if tolerances.is_empty() {
            return Err(error("[verify] no argument is marked output = true".into()));
        }
        let sets = match (&reference, raw.sets) {
            (Reference::Outputs(_), Some(sets)) if sets > 0 => {
                return Err(error(format!(
                    "[verify] sets = {sets}: expected outputs fit the spec's own inputs only; a reference kernel \
                     or config computes the outputs of other inputs"
                )))
            }
            (Reference::Outputs(_), _) => 0,
            (_, sets) => sets.unwrap_or(kerntune_pipeline::protocol::DEFAULT_VERIFY_SETS),
        };
        let sizes = match (&raw.sizes, &reference) {
            (None, _) => Vec::new(),
            (Some(_), Reference::Outputs(_)) => {
                return Err(error(
                    "[verify] sizes: expected outputs given as files fit the spec's own sizes; a reference kernel \
                     or config computes the outputs at other sizes"
                        .into(),
                ))
            }
            (Some(sizes), reference) => {
                let config = match reference {
                    Reference::Config(values) => Some(values.as_slice()),
                    _ => None,
                };
                edges::parse(sizes, context.problem, params, context.restrictions, config).map_err(error)?
            }
        };
        Ok(Verify { reference, tolerances, sets, sizes })
    }
}

/// What `[verify]` is read against besides the arguments: the problem, the parameters and
/// the restrictions as written (over both).
struct VerifyContext<'a> {
    problem: &'a [(String, Value)],
    params: &'a [Param],
    restrictions: &'a [String],
}

/// A restriction with problem variables replaced by their values, so that the space
/// (which knows only the parameters) can evaluate it.
fn substitute(restriction: &str, problem: &[(String, Value)]) -> String {
    let mut out = String::with_capacity(restriction.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match problem.iter().find(|(n, _)| n == word) {
            Some((_, value)) => out.push_str(&format!("({})", value.to_json())),
            None => out.push_str(word),
        }
        word.clear();
    };
    let mut in_string: Option<char> = None;
    for c in restriction.chars() {
        if let Some(quote) = in_string {
            out.push(c);
            if c == quote {
                in_string = None;
            }
        } else if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            if c == '\'' || c == '"' {
                in_string = Some(c);
            }
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests;
