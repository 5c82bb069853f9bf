//! Messages between the tuner and its worker processes: one JSON object per line on the
//! worker's standard input and output; binaries travel base64-encoded.

use base64::Engine as _;
use kerntune_device::{DType, DeviceInfo, FunctionAttributes, Init};
use kerntune_store::Status;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::early_stop::Bar;
use crate::energy::Energy;
use crate::error::FailureKind;
use crate::sampling::{ClockSpan, Clocks};
use crate::timing::Timing;

/// Bytes that serialize as a base64 string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD.decode(text).map(Bytes).map_err(serde::de::Error::custom)
    }
}

/// Grid and block dimensions and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl Geometry {
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|b| u64::from(*b)).product()
    }
}

/// Where one kernel parameter's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamSource {
    /// The argument at this position of the setup.
    Arg { index: usize },
    /// A device buffer of this many bytes per program (block) of the launch, zeroed; a
    /// null pointer when the size is 0 (Triton's global and profile scratch).
    Scratch { bytes_per_program: u64 },
    /// A TMA descriptor (`CUtensorMap`, by value) over the buffer argument at `index`,
    /// encoded by the benchmark worker over its own copy of the buffer: Triton's host-side
    /// tensor descriptors.
    TensorMap { index: usize, map: kerntune_device::TensorMapSpec },
    /// A value fixed when the kernel was compiled, packed as the kernel receives it (at most
    /// 8 bytes): the shapes and strides Triton passes beside a tensor descriptor.
    Value { bytes: Bytes },
}

/// A compiled kernel ready to launch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelImage {
    pub cubin: Bytes,
    pub name: String,
    pub geometry: Geometry,
    /// The kernel's parameters in order; `None` means every argument, in order.
    #[serde(default)]
    pub params: Option<Vec<ParamSource>>,
    /// Blocks per thread-block cluster along x (1: no cluster).
    #[serde(default = "one")]
    pub cluster_x: u32,
    /// Its launch at each of the setup's [`Setup::edges`], in their order: the same binary
    /// with another geometry, or `None` where the configuration does not apply at that
    /// size (its restrictions exclude it there), so it is not checked there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<Option<Geometry>>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ArgSetup {
    /// `reset`: zeroed before every launch, checked and timed (Triton's `reset_to_zero`,
    /// for counters and locks that a kernel expects to find at zero).
    Buffer {
        name: String,
        dtype: DType,
        len: usize,
        init: Init,
        output: bool,
        poison: bool,
        seed: u64,
        #[serde(default)]
        reset: bool,
    },
    Scalar {
        name: String,
        bytes: Bytes,
    },
}

/// What every configuration's outputs must match.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReferenceSetup {
    /// The outputs of this kernel, run once at setup.
    Kernel(KernelImage),
    /// Expected contents of each checked output, in the order of `tolerances`, and any
    /// further input sets with their own expected outputs.
    Outputs {
        data: Vec<Init>,
        #[serde(default)]
        sets: Vec<GivenSet>,
    },
}

/// An input set given as data, with the outputs expected on it (where the reference is
/// data, the front computes them: the worker cannot).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GivenSet {
    /// `(argument position, its data)` of each argument that differs from the setup's.
    pub inputs: Vec<(usize, Init)>,
    /// Expected contents of each checked output, in the order of `tolerances`.
    pub expected: Vec<Init>,
}

/// Input sets checked beyond the setup's own when a language's settings do not say.
pub const DEFAULT_VERIFY_SETS: u32 = 2;

/// Where a benchmark worker's setup went: `seconds` in all (allocations, uploads, the
/// reference's runs on every input set), `drawing_s` of it drawing the inputs on the CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupTimes {
    pub seconds: f64,
    pub drawing_s: f64,
}

/// Everything a benchmark worker needs before it can evaluate configurations.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    pub args: Vec<ArgSetup>,
    pub timing: Timing,
    /// `None` when outputs are not checked.
    pub reference: Option<ReferenceSetup>,
    /// `(argument position, atol, rtol)` of each checked output.
    pub tolerances: Vec<(usize, f64, f64)>,
    /// Outputs must equal the reference bit for bit (a reordered schedule changes no
    /// arithmetic), rather than within the tolerances.
    #[serde(default)]
    pub bitwise: bool,
    /// Input sets beyond the setup's own on which every configuration is checked, where
    /// the reference is a kernel that can compute them: the inputs drawn from a random
    /// [`Init`] are drawn again with other seeds ([`crate::refillable`] says which). Expected outputs given as data fit the setup's inputs only.
    #[serde(default)]
    pub verify_sets: u32,
    /// `__constant__` symbols of the kernel's module and their contents, written after
    /// each load (Kernel Tuner's `cmem_args`).
    #[serde(default)]
    pub constants: Vec<(String, Bytes)>,
    /// Where the worker writes every output buffer after each checked run, as raw bytes in
    /// `{dir}/{id}.{position}.bin` (see [`output_file`]), for a check the supervisor runs.
    #[serde(default)]
    pub outputs_dir: Option<std::path::PathBuf>,
    /// Other problem sizes at which every configuration is also checked (sizes that are no
    /// multiple of its tiles, where its bounds checks matter), each with arguments and a
    /// reference of its own; never timed. Each configuration's launch at each is in
    /// [`KernelImage::edges`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeSetup>,
    /// Entries of pointer tables (arguments holding the device addresses of other buffers,
    /// as Triton's grouped GEMM passes its matrices): the caller's addresses mean nothing
    /// here, so the worker writes its own buffers' addresses there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relocations: Vec<Relocation>,
}

/// One entry of a pointer table: 64-bit entry `entry` of buffer argument `table` holds the
/// address `offset` bytes into buffer argument `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relocation {
    pub table: usize,
    pub entry: usize,
    pub target: usize,
    pub offset: u64,
}

/// One edge size of a [`Setup`]: its label (`n = 4095`), named in the reason of a
/// configuration that fails there, and the setup of its arguments and reference (whose
/// timing is never used and whose own `edges` are empty).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EdgeSetup {
    pub label: String,
    pub setup: Setup,
}

/// The file of one output of one evaluation under [`Setup::outputs_dir`].
pub fn output_file(dir: &std::path::Path, id: u32, position: usize) -> std::path::PathBuf {
    dir.join(format!("{id}.{position}.bin"))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvaluateRequest {
    pub id: u32,
    pub kernel: KernelImage,
    /// The bar of an early stop, when one applies.
    pub early_stop: Option<Bar>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToBench {
    Setup(Setup),
    Evaluate(EvaluateRequest),
    /// Run both kernels on `sets` fresh sets of random inputs (floating-point buffers only;
    /// integer buffers may hold sizes or indices and keep their data) and compare their
    /// outputs bit for bit. The setup's inputs are restored afterwards.
    Compare {
        original: KernelImage,
        candidate: KernelImage,
        sets: u32,
        seed: u64,
    },
    /// Time the two kernels alternately, `rounds` times each (A, B, A, B...), in `blocks`
    /// blocks: each block loads both kernels afresh, in a random order drawn from `seed`.
    Interleave {
        a: KernelImage,
        b: KernelImage,
        rounds: u32,
        blocks: u32,
        seed: u64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvaluateResult {
    pub id: u32,
    pub status: Status,
    pub reason: Option<String>,
    pub samples: Vec<f64>,
    pub verify_s: f64,
    /// Kernel time of the checked (untimed) run.
    pub verify_kernel_ms: f64,
    pub benchmark_s: f64,
    pub attributes: Option<FunctionAttributes>,
    /// Input sets on which the outputs matched the reference (0 when not checked, or when
    /// the first check failed; the setup's own alone for a configuration stopped early).
    #[serde(default)]
    pub verified_sets: u32,
    /// The worker's context is unusable after this evaluation; it exits after replying.
    pub context_lost: bool,
    /// The clocks around the samples, where NVML could read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<Clocks>,
    /// Energy and power per launch, where asked for and NVML reads the energy counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<Energy>,
}

impl EvaluateResult {
    /// The result of evaluation `id` before anything is measured: ok, with no samples.
    pub fn empty(id: u32) -> EvaluateResult {
        EvaluateResult {
            id,
            status: Status::Ok,
            reason: None,
            samples: Vec::new(),
            verify_s: 0.0,
            verify_kernel_ms: 0.0,
            benchmark_s: 0.0,
            attributes: None,
            verified_sets: 0,
            context_lost: false,
            clocks: None,
            energy: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromBench {
    Ready {
        device: DeviceInfo,
    },
    SetupDone {
        #[serde(default)]
        times: SetupTimes,
    },
    /// About to wait for this many launches: the supervisor extends its deadline.
    Waiting {
        launches: usize,
    },
    Result(EvaluateResult),
    /// The outcome of `Compare`: how many sets differed, and how, for the first.
    Compared {
        sets: u32,
        differing: u32,
        first_difference: Option<String>,
    },
    /// The samples of `Interleave`, in ms, in round order, and the clocks' range over them
    /// where NVML reads them.
    Interleaved {
        a: Vec<f64>,
        b: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clocks: Option<ClockSpan>,
    },
    /// The worker cannot go on (no device, a broken reference...).
    Fatal {
        message: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileRequest {
    pub id: u32,
    #[serde(flatten)]
    pub job: CompileJob,
}

/// What to compile, for the worker of each language.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CompileJob {
    /// CUDA C through NVRTC; with `ptxas`, NVRTC emits PTX and that ptxas assembles it.
    Cuda {
        source: String,
        name: String,
        options: Vec<String>,
        arch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ptxas: Option<PtxasStep>,
    },
    /// A configuration of the Triton kernel the worker was started for: constexpr values
    /// and compile options (`num_warps`, `num_stages`, `num_ctas`, `maxnreg`, `ptx_options`).
    /// `descriptors`: the block shape of each host-side tensor descriptor argument, by
    /// name, as the user's `pre_hook` sets it for this configuration (it is part of the
    /// kernel's signature).
    /// `setup`: the worker's setup file (the kernel as data, its arguments), where a worker
    /// kept from another tuning may hold another kernel's (see [`crate::Crew`]): the worker
    /// loads it when it differs from the one it holds.
    Triton {
        constexprs: serde_json::Map<String, serde_json::Value>,
        options: serde_json::Map<String, serde_json::Value>,
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        descriptors: serde_json::Map<String, serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        setup: Option<std::path::PathBuf>,
    },
}

impl CompileJob {
    /// The jobs whose compiles share work that a worker keeps between them: for Triton,
    /// configurations that differ only in `num_warps` and `num_stages` share their front
    /// end (the worker keeps each one's TTIR). `None`: nothing is shared.
    pub fn family(&self) -> Option<String> {
        match self {
            CompileJob::Cuda { .. } => None,
            CompileJob::Triton { constexprs, options, descriptors, setup } => {
                let shared: serde_json::Map<_, _> = options
                    .iter()
                    .filter(|(name, _)| !matches!(name.as_str(), "num_warps" | "num_stages"))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect();
                Some(serde_json::json!([constexprs, shared, descriptors, setup]).to_string())
            }
        }
    }
}

/// The assembly of NVRTC's PTX by a chosen ptxas, with the configuration's compiler
/// controls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxasStep {
    pub path: std::path::PathBuf,
    /// Its version, named in failures (an ACF file is tied to one).
    pub version: String,
    /// `--apply-controls=FILE`, `--maxrregcount=N`, `-O1`...; `-arch` is added.
    pub args: Vec<String>,
    /// A prefix given to the kernel's entry in the PTX before assembly (ptxas is reported
    /// to treat kernels whose names contain "cutlass" differently); the cubin's symbol is
    /// then the prefixed name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// How to launch what a Triton worker compiled, read off the compiled kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchInfo {
    pub name: String,
    pub shared_bytes: u32,
    pub num_warps: u32,
    pub num_ctas: u32,
    pub params: Vec<ParamSource>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromCompiler {
    Compiled {
        id: u32,
        cubin: Bytes,
        seconds: f64,
        #[serde(default)]
        launch: Option<LaunchInfo>,
        /// The kernel's symbol in the cubin (NVRTC's lowered name), where the compiler
        /// reports one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        symbol: Option<String>,
    },
    /// The configuration failed to compile; `kind` says how (a reply without one, from
    /// an older worker, means `compile_failed`).
    Failed {
        id: u32,
        #[serde(default)]
        kind: FailureKind,
        message: String,
        seconds: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_round_trip_as_base64() {
        let message = FromCompiler::Compiled {
            id: 3,
            cubin: Bytes(vec![0, 255, 7, 0x7f]),
            seconds: 0.5,
            launch: None,
            symbol: Some("_Z1kPf".into()),
        };
        let line = serde_json::to_string(&message).expect("serializes");
        assert!(line.contains("\"AP8Hfw==\""), "{line}");
        let back: FromCompiler = serde_json::from_str(&line).expect("parses");
        assert!(matches!(back, FromCompiler::Compiled { id: 3, ref cubin, ref symbol, .. }
            if cubin.0 == vec![0, 255, 7, 0x7f] && symbol.as_deref() == Some("_Z1kPf")));
    }

    #[test]
    fn a_failed_reply_names_its_kind_and_an_old_one_means_compile_failed() {
        let line = r#"{"type": "failed", "id": 4, "kind": "invalid_config", "message": "too much shared memory", "seconds": 0.1}"#;
        let reply: FromCompiler = serde_json::from_str(line).expect("parses");
        assert!(matches!(reply, FromCompiler::Failed { id: 4, kind: FailureKind::InvalidConfig, .. }), "{reply:?}");
        let old = r#"{"type": "failed", "id": 5, "message": "error: expected ';'", "seconds": 0.1}"#;
        let reply: FromCompiler = serde_json::from_str(old).expect("parses");
        assert!(matches!(reply, FromCompiler::Failed { id: 5, kind: FailureKind::CompileFailed, .. }), "{reply:?}");
    }
}
