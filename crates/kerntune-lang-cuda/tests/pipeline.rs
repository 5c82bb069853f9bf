//! The pipeline between compile and benchmark workers, with fake workers (a Python script)
//! standing in for NVRTC and the GPU, so that this runs anywhere: the symbol a compiler
//! reports is what the benchmark worker is asked to launch, `__constant__` contents reach
//! the worker, and outputs the worker writes back are judged by the language's check.

use std::path::{Path, PathBuf};

use kerntune_device::DeviceInfo;
use kerntune_engine::Backend;
use kerntune_lang_cuda::KernelSpec;
use kerntune_lang_cuda::{CudaLanguage, OutputCheck};
use kerntune_pipeline::{Pipeline, PipelineOptions, WorkerCommand};
use kerntune_store::Status;

/// Compiles to an empty cubin under the symbol `_Z6mangledv`. As the benchmark worker it
/// writes each output as the text `<id>` and answers with a result whose reason names the
/// kernel it was asked to launch and the constants of its setup, and for each edge size of
/// the setup its label, its buffers' lengths and the kernel's grid there.
const FAKE_WORKER: &str = r#"
import json, os, sys
kind = sys.argv[2]
if kind == "bench":
    print(json.dumps({"type": "ready", "device": json.loads(os.environ["FAKE_DEVICE"])}), flush=True)
setup = None
for line in sys.stdin:
    message = json.loads(line)
    if kind == "compile":
        reply = {"type": "compiled", "id": message["id"], "cubin": "", "seconds": 0.0, "symbol": "_Z6mangledv"}
    elif message["type"] == "setup":
        setup, reply = message, {"type": "setup_done"}
    else:
        request = message
        for position, arg in enumerate(setup["args"]):
            if "Buffer" in arg and arg["Buffer"]["output"] and setup["outputs_dir"]:
                with open(os.path.join(setup["outputs_dir"], f"{request['id']}.{position}.bin"), "w") as f:
                    f.write(str(request["id"]))
        constants = ",".join(name for name, _ in setup["constants"])
        reason = request["kernel"]["name"] + "|" + constants
        for edge, launch in zip(setup.get("edges", []), request["kernel"].get("edges", [])):
            lengths = [arg["Buffer"]["len"] for arg in edge["setup"]["args"] if "Buffer" in arg]
            reason += f"|{edge['label']} {lengths} {launch and launch['grid']}"
        reply = {"type": "result", "id": request["id"], "status": "ok", "samples": [1.0, 1.0],
                 "reason": reason, "verify_s": 0.0, "verify_kernel_ms": 0.0,
                 "benchmark_s": 0.0, "attributes": None, "context_lost": False}
    print(json.dumps(reply), flush=True)
"#;

const SPEC: &str = r#"
[kernel]
name = "vector_add"
source = "vector_add.cu"
[problem]
n = 1000
[params]
block_size_x = [64, 128]
[launch]
problem_size = ["n"]
[[args]]
name = "c"
dtype = "f32"
size = "n"
output = true
[[args]]
name = "n"
dtype = "i32"
value = "n"
"#;

fn device() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: "fake".into(),
        compute_capability: (9, 0),
        multiprocessors: 1,
        l2_bytes: 1 << 20,
        max_threads_per_block: 1024,
        max_shared_per_block: 48 << 10,
        max_shared_per_block_optin: 48 << 10,
        max_registers_per_block: 65_536,
        clock_khz: 0,
        memory_bytes: 0,
        pci_bus_id: None,
    }
}

fn fake_worker() -> WorkerCommand {
    let mut command = WorkerCommand::new("python3", vec!["-c".into(), FAKE_WORKER.into()]);
    command.env = vec![("FAKE_DEVICE".into(), serde_json::to_string(&device()).expect("serializes"))];
    command
}

fn spec() -> KernelSpec {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
    KernelSpec::parse(SPEC, &folder.join("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn the_lowered_symbol_is_launched_and_the_outputs_come_back_for_the_callers_check() {
    let spec = spec();
    let space = spec.space().expect("space");
    let outputs = tempfile::tempdir().expect("a folder");
    let check = OutputCheck {
        dir: outputs.path().to_path_buf(),
        check: Box::new(|_config, files| {
            let [(position, file)] = files else { return Err(format!("expected one output, got {files:?}")) };
            match (*position, text(file).as_str()) {
                (0, "0") => Ok(()),
                (0, other) => Err(format!("output {other} is wrong")),
                _ => Err(format!("output at position {position}")),
            }
        }),
    };
    let language = CudaLanguage::new(&spec, &space)
        .with_constants(vec![("d_filter".into(), vec![0u8; 16])])
        .with_output_check(check);
    let options = PipelineOptions {
        bench_worker: fake_worker(),
        compile_worker: fake_worker(),
        devices: vec![0],
        compile_workers: 1,
    };
    let mut pipeline = Pipeline::start(&language, &space, options).expect("starts");
    let ids: Vec<_> = space.ids().collect();
    pipeline.submit(ids[0]).expect("submits");
    let (_, first) = pipeline.next().expect("evaluates");
    pipeline.submit(ids[1]).expect("submits");
    let (_, second) = pipeline.next().expect("evaluates");

    assert_eq!(first.status, Status::Ok, "{:?}", first.reason);
    assert_eq!(first.reason.as_deref(), Some("_Z6mangledv|d_filter"), "the symbol and the constants reach the worker");
    assert_eq!(second.status, Status::InvalidOutput);
    assert_eq!(second.reason.as_deref(), Some("output 1 is wrong"));
    let sets = |e: &kerntune_store::Evaluation| e.metrics.get("verified_sets").and_then(|n| n.as_u64());
    assert_eq!(sets(&first), Some(1), "the caller's check passed on the one set it sees");
    assert_eq!(sets(&second), Some(0));
    assert_eq!(std::fs::read_dir(outputs.path()).expect("folder").count(), 0, "output files are removed once judged");
}

#[test]
fn edge_sizes_reach_the_benchmark_worker_with_each_configurations_launch_there() {
    let text = format!(
        "restrictions = [\"block_size_x == 64 or n % 8 == 0\"]\n{SPEC}\n[verify]\n\
         reference = {{ kernel = \"reference\", grid = [\"n\"], block = [1] }}\nsizes = [{{ n = 999 }}]\n"
    );
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
    let spec = KernelSpec::parse(&text, &folder.join("test.toml")).unwrap_or_else(|e| panic!("{e}"));
    let space = spec.space().expect("space");
    let language = CudaLanguage::new(&spec, &space);
    let options = PipelineOptions {
        bench_worker: fake_worker(),
        compile_worker: fake_worker(),
        devices: vec![0],
        compile_workers: 1,
    };
    let mut pipeline = Pipeline::start(&language, &space, options).expect("starts");
    let mut reasons = Vec::new();
    for id in space.ids() {
        pipeline.submit(id).expect("submits");
        let (_, evaluation) = pipeline.next().expect("evaluates");
        reasons.push((space.describe(id), evaluation.reason.unwrap_or_default()));
    }
    let reasons: Vec<(&str, &str)> = reasons.iter().map(|(c, r)| (c.as_str(), r.as_str())).collect();
    assert_eq!(
        reasons,
        [
            ("block_size_x=64", "_Z6mangledv||n = 999 [999] [16, 1, 1]"),
            ("block_size_x=128", "_Z6mangledv||n = 999 [999] None"),
        ],
        "999 elements at the edge size; 128 is excluded there by its restriction"
    );
}
