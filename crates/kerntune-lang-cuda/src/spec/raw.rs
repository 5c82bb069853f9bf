//! The spec file as written: serde structures mirroring the TOML, before any expression is
//! parsed or any file is read. `deny_unknown_fields` everywhere, so a misspelt key is an
//! error rather than a silently ignored setting.

use serde::Deserialize;
use serde_json::{Map, Value as Json};

use kerntune_engine::SearchOptions;
use kerntune_pipeline::RawTiming;
use kerntune_space::Restrictions;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    /// Top-level in TOML, so it must come before the first table.
    #[serde(default)]
    pub restrictions: Restrictions,
    pub kernel: RawKernel,
    #[serde(default)]
    pub problem: Map<String, Json>,
    /// The problem sizes of a many-shape run, each a table of `[problem]` values.
    #[serde(default)]
    pub shapes: Option<Vec<Map<String, Json>>>,
    pub params: Map<String, Json>,
    #[serde(default)]
    pub launch: RawLaunch,
    #[serde(default)]
    pub args: Vec<RawArg>,
    #[serde(default)]
    pub verify: Option<RawVerify>,
    #[serde(default)]
    pub objective: Option<RawObjective>,
    #[serde(default)]
    pub compiler: RawCompiler,
    #[serde(default)]
    pub timing: RawTiming,
    #[serde(default)]
    pub search: SearchOptions,
    /// Kernel Tuner's source and launch conventions (`problem_size`, `grid_div_*`,
    /// `defines`...), as the Python `tune_kernel` received them: it builds each
    /// configuration's source and geometry itself, so here they only enter the results'
    /// identity, and `[launch]` may be left out.
    #[serde(default)]
    pub kernel_tuner: Option<Json>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKernel {
    pub name: String,
    /// Path relative to the spec file.
    pub source: String,
    #[serde(default = "default_language")]
    pub language: String,
    /// Compiler options; `{param}` is replaced by the parameter's value, and an option that
    /// becomes empty is dropped.
    #[serde(default)]
    pub options: Vec<String>,
}

fn default_language() -> String {
    "cuda".to_string()
}

/// `[compiler]`: the ptxas to assemble with, and the compiler controls tuned with the
/// parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCompiler {
    /// A path (relative to the spec), a name on the PATH, or `pip`.
    #[serde(default)]
    pub ptxas: Option<String>,
    /// `name = [values]` for each control (`acf`, `ptxas_options`, `maxrregcount`...).
    #[serde(default)]
    pub controls: Map<String, Json>,
}

/// One expression, or several whose product is meant (Kernel Tuner's `grid_div_x` lists).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Exprs {
    One(ExprText),
    Many(Vec<ExprText>),
}

/// An expression written as a string or a bare number.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum ExprText {
    Text(String),
    Int(i64),
    Float(f64),
}

impl ExprText {
    pub fn text(&self) -> String {
        match self {
            ExprText::Text(t) => t.clone(),
            ExprText::Int(i) => i.to_string(),
            ExprText::Float(f) => f.to_string(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLaunch {
    #[serde(default)]
    pub problem_size: Option<Vec<ExprText>>,
    #[serde(default)]
    pub grid_div_x: Option<Exprs>,
    #[serde(default)]
    pub grid_div_y: Option<Exprs>,
    #[serde(default)]
    pub grid_div_z: Option<Exprs>,
    #[serde(default)]
    pub grid: Option<Vec<ExprText>>,
    #[serde(default)]
    pub block: Option<Vec<ExprText>>,
    #[serde(default)]
    pub block_size_names: Option<Vec<String>>,
    #[serde(default)]
    pub shared_memory: Option<ExprText>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawArg {
    pub name: String,
    #[serde(alias = "type")]
    pub dtype: String,
    /// Number of elements of a buffer.
    #[serde(default)]
    pub size: Option<ExprText>,
    /// Value of a scalar.
    #[serde(default)]
    pub value: Option<ExprText>,
    #[serde(default)]
    pub init: Option<RawInit>,
    #[serde(default)]
    pub output: bool,
    /// Poison an output before the checked run (default). An output the kernel also reads
    /// sets this to false: it is restored from its initial contents instead.
    #[serde(default)]
    pub poison: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawInit {
    Named(String),
    Table(RawInitTable),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInitTable {
    #[serde(default)]
    pub normal: Option<RawMoments>,
    #[serde(default)]
    pub uniform: Option<RawRange>,
    #[serde(default)]
    pub file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMoments {
    #[serde(default)]
    pub mean: f64,
    #[serde(default = "one")]
    pub std: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRange {
    #[serde(default)]
    pub low: f64,
    #[serde(default = "one")]
    pub high: f64,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVerify {
    pub reference: RawReference,
    #[serde(default)]
    pub atol: Option<f64>,
    #[serde(default)]
    pub rtol: Option<f64>,
    /// Per-output tolerances: `[verify.outputs.C] atol = ...`.
    #[serde(default)]
    pub outputs: Map<String, Json>,
    /// Input sets checked beyond the spec's own, where the reference is a kernel or a
    /// configuration (default [`DEFAULT_VERIFY_SETS`](kerntune_pipeline::protocol::DEFAULT_VERIFY_SETS)).
    #[serde(default)]
    pub sets: Option<u32>,
    /// Other problem sizes at which every configuration is also checked: a list of tables
    /// of problem variables (`[{ n = 4095 }]`); checked when the spec is built.
    #[serde(default)]
    pub sizes: Option<Json>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReference {
    /// The outputs of this configuration are the reference.
    #[serde(default)]
    pub config: Option<Map<String, Json>>,
    /// A reference kernel, taking the same arguments as the tuned one.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Its source file (default: the tuned kernel's source).
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub grid: Option<Vec<ExprText>>,
    #[serde(default)]
    pub block: Option<Vec<ExprText>>,
    #[serde(default)]
    pub options: Vec<String>,
    /// Files with the expected contents of each output (`.npy`, or raw bytes).
    #[serde(default)]
    pub outputs: Option<Map<String, Json>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawObjective {
    pub name: String,
    /// Over problem variables, parameters and `time` (the kernel's median time in ms).
    #[serde(default)]
    pub expression: Option<String>,
    #[serde(default)]
    pub higher_is_better: Option<bool>,
}
