//! Several GPUs under one pipeline, with fake workers (a Python script) standing in for
//! NVRTC and the GPUs so that this runs anywhere: compiled kernels go to whichever
//! benchmark worker is free, every result names the GPU that measured it, a worker that
//! dies loses nothing (its configuration is measured again), and GPUs of two models are
//! refused before any configuration is measured.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kerntune_device::DeviceInfo;
use kerntune_engine::{Backend, BackendError};
use kerntune_lang_cuda::{CudaLanguage, KernelSpec};
use kerntune_pipeline::{Pipeline, PipelineOptions, WorkerCommand};
use kerntune_store::{Evaluation, Status};

/// As a compiler: an empty cubin. As the benchmark worker of GPU `--device N`: a device
/// named `$FAKE_NAME_<N>` (else "fake") at PCI address `0000000N:00:00.0`, which takes
/// 0.3 s per evaluation; the worker of GPU `$FAKE_CRASH_ON` kills itself on its first
/// evaluation when the file `$FAKE_MARKER` does not exist yet (creating it first).
const FAKE_WORKER: &str = r#"
import json, os, signal, sys, time
kind = sys.argv[2]
if kind == "bench":
    ordinal = int(sys.argv[4])
    device = json.loads(os.environ["FAKE_DEVICE"])
    device.update(ordinal=ordinal, name=os.environ.get(f"FAKE_NAME_{ordinal}", "fake"),
                  pci_bus_id=f"{ordinal:08x}:00:00.0")
    print(json.dumps({"type": "ready", "device": device}), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if kind == "compile":
        reply = {"type": "compiled", "id": message["id"], "cubin": "", "seconds": 0.0, "symbol": "k"}
    elif message["type"] == "setup":
        reply = {"type": "setup_done"}
    else:
        marker = os.environ["FAKE_MARKER"]
        if str(ordinal) == os.environ.get("FAKE_CRASH_ON") and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.3)
        reply = {"type": "result", "id": message["id"], "status": "ok", "samples": [1.0 + ordinal],
                 "reason": None, "verify_s": 0.0, "verify_kernel_ms": 0.0, "benchmark_s": 0.3,
                 "attributes": None, "context_lost": False}
    print(json.dumps(reply), flush=True)
"#;

const SPEC: &str = r#"
[kernel]
name = "vector_add"
source = "vector_add.cu"
[problem]
n = 1000
[params]
block_size_x = [32, 64, 96, 128, 160, 192, 224, 256]
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

fn spec() -> KernelSpec {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
    KernelSpec::parse(SPEC, &folder.join("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn options(env: Vec<(&str, String)>, devices: Vec<usize>) -> PipelineOptions {
    let device = DeviceInfo::compile_target("sm_90").unwrap_or_else(|e| panic!("{e}"));
    let mut worker = WorkerCommand::new("python3", vec!["-c".into(), FAKE_WORKER.into()]);
    worker.env = env.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    worker.env.push(("FAKE_DEVICE".into(), serde_json::to_string(&device).expect("serializes")));
    PipelineOptions { bench_worker: worker.clone(), compile_worker: worker, devices, compile_workers: 2 }
}

fn ordinal(evaluation: &Evaluation) -> u64 {
    evaluation.metrics["device"]["ordinal"].as_u64().unwrap_or_else(|| panic!("{:?}", evaluation.metrics))
}

#[test]
fn every_gpu_measures_and_a_worker_that_dies_loses_no_configuration() {
    let spec = spec();
    let space = spec.space().expect("space");
    let language = CudaLanguage::new(&spec, &space);
    let folder = tempfile::tempdir().expect("a folder");
    let marker = folder.path().join("crashed");
    let env = vec![("FAKE_MARKER", marker.display().to_string()), ("FAKE_CRASH_ON", "1".into())];
    let mut pipeline = Pipeline::start(&language, &space, options(env, vec![0, 1])).expect("starts");
    assert_eq!(pipeline.gpus(), 2);
    assert_eq!(pipeline.capacity(), 2 + 2 * 2, "enough in flight for every compiler and both GPUs");
    let ids: Vec<_> = space.ids().collect();
    for &id in &ids {
        pipeline.submit(id).expect("submits");
    }
    let results: Vec<_> = ids.iter().map(|_| pipeline.next().expect("evaluates")).collect();

    assert!(marker.exists(), "GPU 1's worker died once");
    let measured: BTreeSet<_> = results.iter().map(|(id, _)| *id).collect();
    assert_eq!(measured, ids.iter().copied().collect(), "each configuration has exactly one result");
    for (id, evaluation) in &results {
        assert_eq!(evaluation.status, Status::Ok, "{id:?}: {:?}", evaluation.reason);
        let address = &evaluation.metrics["device"]["pci_bus_id"];
        assert_eq!(address, &serde_json::json!(format!("{:08x}:00:00.0", ordinal(evaluation))));
        assert_eq!(evaluation.samples, vec![1.0 + ordinal(evaluation) as f64], "the result is the named GPU's");
    }
    let per_gpu = |gpu| results.iter().filter(|(_, e)| ordinal(e) == gpu).count();
    assert!(per_gpu(0) >= 2 && per_gpu(1) >= 2, "both GPUs measured: {} and {}", per_gpu(0), per_gpu(1));
}

#[test]
fn a_configuration_that_kills_every_worker_fails_after_a_second_death() {
    let spec = spec();
    let space = spec.space().expect("space");
    let language = CudaLanguage::new(&spec, &space);
    // The marker's folder does not exist: the worker of GPU 0 can never create it, and dies
    // (with a traceback) on every evaluation.
    let folder = tempfile::tempdir().expect("a folder");
    let marker = folder.path().join("missing/crashed");
    let env = vec![("FAKE_MARKER", marker.display().to_string()), ("FAKE_CRASH_ON", "0".into())];
    let mut pipeline = Pipeline::start(&language, &space, options(env, vec![0])).expect("starts");
    let first = space.ids().next().expect("a configuration");
    pipeline.submit(first).expect("submits");
    let (_, evaluation) = pipeline.next().expect("the configuration fails, not the run");
    assert_eq!(evaluation.status, Status::RuntimeFailed);
    let reason = evaluation.reason.unwrap_or_default();
    assert!(reason.starts_with("the benchmark worker of GPU #0 "), "{reason}");
}

#[test]
fn gpus_of_two_models_are_refused_before_anything_is_measured() {
    // As the CLI says it: the setting is named as the front that chose this spells it.
    kerntune_space::Spelling::Flag.choose();
    let spec = spec();
    let space = spec.space().expect("space");
    let language = CudaLanguage::new(&spec, &space);
    let folder = tempfile::tempdir().expect("a folder");
    let env = vec![
        ("FAKE_MARKER", folder.path().join("unused").display().to_string()),
        ("FAKE_NAME_1", "NVIDIA H100".into()),
    ];
    let error = Pipeline::start(&language, &space, options(env, vec![0, 1])).expect_err("two models");
    let BackendError::CannotStart(message) = error else { panic!("{error:?}") };
    assert!(message.starts_with("GPU #0 is a fake and GPU #1 a NVIDIA H100"), "{message}");
    assert!(message.ends_with("(--devices 0 or --devices 1)"), "{message}");
}
