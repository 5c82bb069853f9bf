//! The test corpus: cubins compiled once per test run into a temporary directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use kerntune_sass::{Nvdisasm, Schedule};

pub struct Corpus {
    /// Kept alive so that the directory lives as long as the tests.
    _directory: tempfile::TempDir,
    cubins: BTreeMap<String, Vec<u8>>,
    /// Schedules already read, since nvdisasm takes about half a second a run.
    schedules: Mutex<BTreeMap<String, Schedule>>,
    pub nvdisasm: Nvdisasm,
}

/// Kernels compiled by Triton, with their loops, barriers and memory traffic.
pub const TRITON_KERNELS: &[&str] = &["vector_add", "tiled_matmul", "pipelined_matmul", "looped_softmax"];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("support").join("compile_kernels.py")
}

fn compile() -> Corpus {
    let directory = tempfile::tempdir().expect("a temporary directory for the corpus");
    let python = std::env::var_os(kerntune_sass::PYTHON_ENV).unwrap_or_else(|| "python3".into());
    let output = Command::new(&python)
        .arg(script())
        .arg(directory.path())
        // Keep Triton's cache inside the temporary directory.
        .env("TRITON_CACHE_DIR", directory.path().join("triton-cache"))
        .env("TRITON_HOME", directory.path())
        .output()
        .unwrap_or_else(|e| panic!("these tests need python3 with triton installed: cannot run {python:?}: {e}"));
    assert!(
        output.status.success(),
        "these tests need python3 with triton installed (pip install triton==3.6.0); \
         compile_kernels.py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let manifest = std::fs::read_to_string(directory.path().join("manifest.json")).expect("manifest.json");
    let manifest: BTreeMap<String, String> = serde_json::from_str(&manifest).expect("a JSON manifest");
    let cubins = manifest
        .iter()
        .map(|(file, kernel)| (kernel.clone(), std::fs::read(directory.path().join(file)).expect("a cubin")))
        .collect();
    let nvdisasm = Nvdisasm::locate().unwrap_or_else(|e| panic!("these tests need nvdisasm: {e}"));
    Corpus { _directory: directory, cubins, schedules: Mutex::default(), nvdisasm }
}

/// The corpus, compiled on first use.
pub fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(compile)
}

impl Corpus {
    /// The cubin that holds `kernel`.
    pub fn cubin(&self, kernel: &str) -> &[u8] {
        self.cubins.get(kernel).unwrap_or_else(|| panic!("no kernel {kernel} in the corpus"))
    }

    /// The original schedule of `kernel`.
    pub fn schedule(&self, kernel: &str) -> Schedule {
        let cached = self.schedules.lock().map(|s| s.get(kernel).cloned()).unwrap_or_default();
        if let Some(schedule) = cached {
            return schedule;
        }
        let schedule = Schedule::from_cubin(self.cubin(kernel), kernel, &self.nvdisasm)
            .unwrap_or_else(|e| panic!("cannot read {kernel}: {e}"));
        if let Ok(mut schedules) = self.schedules.lock() {
            schedules.insert(kernel.to_string(), schedule.clone());
        }
        schedule
    }
}
