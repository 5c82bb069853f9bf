//! NVIDIA's pip wheels (`nvidia-cuda-nvrtc`, `nvidia-cuda-nvcc`) in the Python environment
//! kerntune is installed in: the quickstart puts the `kerntune` binary in the checkout's
//! `.venv/bin`, beside the Python that `scripts/test.sh` installs the wheels into; the
//! Python package runs inside its Python. [`python`] is that Python,
//! [`wheel_paths`] what its import path holds, and [`install_hint`] the one line that says
//! how to install a wheel there (never into the user's own Python).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The Python running this process, when kerntune is a Python extension in it (its
/// `sys.executable`: the process's own file is the interpreter a virtual environment's
/// `python3` links to, outside the environment).
static HOST_PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// Called by the Python extension as it is imported.
pub fn set_host_python(python: PathBuf) {
    let _ = HOST_PYTHON.set(python);
}

/// The Python of the environment this program is installed in: the one running it (the
/// extension), else `python3` beside it (a virtual environment's `bin/`), else `python3` on
/// the PATH.
pub fn python() -> PathBuf {
    environment_python().unwrap_or_else(|| PathBuf::from("python3"))
}

fn environment_python() -> Option<PathBuf> {
    if let Some(python) = HOST_PYTHON.get() {
        return Some(python.clone());
    }
    let exe = std::env::current_exe().ok()?;
    let python = exe.parent()?.join("python3");
    python.is_file().then_some(python)
}

/// Every existing path `pattern` (a glob such as `nvidia/cu*/lib`) names under an entry of
/// [`python`]'s import path, in that order, each entry's matches newest first.
pub fn wheel_paths(pattern: &str) -> Vec<PathBuf> {
    let script = "import sys, os, glob\n\
                  for p in sys.path:\n    \
                  for f in sorted(glob.glob(os.path.join(p, sys.argv[1])), reverse=True): print(f)";
    let Ok(output) = Command::new(python()).args(["-c", script, pattern]).stderr(std::process::Stdio::null()).output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).filter(|p| p.exists()).collect()
}

/// How to install `package` where this program looks for it, for an error's hint.
pub fn install_hint(package: &str) -> String {
    match environment_python() {
        Some(python) => format!("{} -m pip install '{package}'", python.display()),
        None => format!(
            "install it into the Python environment kerntune runs from (`bash scripts/quickstart.sh` makes the \
             checkout's .venv, with .venv/bin/kerntune: `.venv/bin/pip install '{package}'`)"
        ),
    }
}
