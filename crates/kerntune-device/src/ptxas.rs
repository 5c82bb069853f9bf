//! A chosen ptxas: the assembler that turns PTX into a cubin when compiler controls (ACF
//! files, ptxas options) are tuned, instead of the one built into NVRTC or Triton.
//!
//! [`Ptxas::resolve`] finds it (a path, or `pip`: the `nvidia-cuda-nvcc` wheel of any
//! Python on the PATH) and asks its version, which enters the results' identity: a
//! different ptxas makes different binaries. [`Ptxas::assemble`] runs it on PTX; a file it
//! rejects fails with ptxas's message, the ACF's version where it can be read and ptxas's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `[compiler] ptxas` value that names the `nvidia-cuda-nvcc` wheel's ptxas.
pub const PIP: &str = "pip";

/// A ptxas that answered `--version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ptxas {
    pub path: PathBuf,
    /// `13.3.73`: from `Cuda compilation tools, release 13.3, V13.3.73`.
    pub version: String,
}

/// Why a ptxas cannot be used: one line, naming what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PtxasError {
    /// `ptxas = "pip"`, and the Python kerntune runs from has no `nvidia-cuda-nvcc`.
    #[error(
        "ptxas = \"pip\": the Python environment kerntune runs from ({python}) has no nvidia-cuda-nvcc package: {hint}"
    )]
    NoWheel { python: String, hint: String },
    /// A bare name that no folder of the PATH holds.
    #[error("ptxas = \"{0}\": not found on the PATH")]
    NotOnPath(String),
    /// The file is missing, does not run, or does not answer `--version` as ptxas does.
    #[error("ptxas {}: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    /// The ptxas answers with another version than when the spec was read.
    #[error("ptxas {} is now version {now}, not {then} as when the spec was read", path.display())]
    Changed { path: PathBuf, now: String, then: String },
}

impl Ptxas {
    /// The ptxas `choice` names: `pip`, or a path (relative to `base`, or found on the
    /// PATH when it is a bare name).
    pub fn resolve(choice: &str, base: &Path) -> Result<Ptxas, PtxasError> {
        let path = if choice == PIP {
            pip_ptxas().ok_or_else(|| PtxasError::NoWheel {
                python: crate::wheels::python().display().to_string(),
                hint: crate::wheels::install_hint("nvidia-cuda-nvcc==13.3.*"),
            })?
        } else if !choice.contains('/') && !base.join(choice).exists() {
            on_path(choice).ok_or_else(|| PtxasError::NotOnPath(choice.to_string()))?
        } else {
            base.join(choice)
        };
        let version = version_of(&path).map_err(|reason| PtxasError::Unusable { path: path.clone(), reason })?;
        Ok(Ptxas { path, version })
    }

    /// `major.minor` of the version, for comparisons.
    pub fn release(&self) -> Option<(u32, u32)> {
        release_of(&self.version)
    }

    /// Still there and still answering: what a run checks before any work.
    pub fn check(&self) -> Result<(), PtxasError> {
        match version_of(&self.path) {
            Ok(version) if version == self.version => Ok(()),
            Ok(now) => Err(PtxasError::Changed { path: self.path.clone(), now, then: self.version.clone() }),
            Err(reason) => Err(PtxasError::Unusable { path: self.path.clone(), reason }),
        }
    }

    /// Assembles `ptx` for `arch` (`sm_90`) with `args` (`--apply-controls=FILE`, `-O1`...):
    /// the cubin, or ptxas's message with the versions of any ACF file and of ptxas.
    pub fn assemble(&self, ptx: &str, arch: &str, args: &[String]) -> Result<Vec<u8>, String> {
        assemble(&self.path, &self.version, ptx, arch, args)
    }
}

/// [`Ptxas::assemble`] for a ptxas known by path and version (as a compile job carries it).
pub fn assemble(path: &Path, version: &str, ptx: &str, arch: &str, args: &[String]) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a folder for ptxas: {e}"))?;
    let input = dir.path().join("kernel.ptx");
    let output = dir.path().join("kernel.cubin");
    std::fs::write(&input, ptx).map_err(|e| format!("writing the PTX for ptxas: {e}"))?;
    let run = Command::new(path)
        .arg(format!("-arch={arch}"))
        .args(args)
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output()
        .map_err(|e| format!("cannot run ptxas {}: {e}", path.display()))?;
    if run.status.success() {
        return std::fs::read(&output).map_err(|e| format!("ptxas wrote no cubin: {e}"));
    }
    let message = String::from_utf8_lossy(&run.stderr).trim().to_string();
    let message = if message.is_empty() { format!("ptxas failed ({})", run.status) } else { message };
    let acfs: Vec<String> =
        args.iter().filter_map(|a| acf_file(a)).map(|file| describe_acf(Path::new(&file))).collect();
    if acfs.is_empty() {
        Err(format!("{message} (ptxas {version})"))
    } else {
        Err(format!("{message} ({}; ptxas {version})", acfs.join(", ")))
    }
}

/// The file of an `--apply-controls=FILE` (or `-apply-controls=FILE`) argument.
fn acf_file(arg: &str) -> Option<String> {
    let rest = arg.strip_prefix("--apply-controls=").or_else(|| arg.strip_prefix("-apply-controls="))?;
    Some(rest.to_string())
}

/// `ACF FILE (version V)`, or `(version unreadable)` when its header does not say.
fn describe_acf(file: &Path) -> String {
    match acf_version(file) {
        Some(version) => format!("ACF {} is for ptxas {version}", file.display()),
        None => format!("ACF {} (its version cannot be read)", file.display()),
    }
}

/// The compiler version an ACF file names in its readable header, if it has one: the
/// first `major.minor` that follows a `version` or `cuda` word in its leading text.
pub fn acf_version(file: &Path) -> Option<String> {
    let bytes = std::fs::read(file).ok()?;
    let head: String = bytes.iter().take(512).take_while(|b| b.is_ascii() && **b != 0).map(|b| *b as char).collect();
    let lower = head.to_ascii_lowercase();
    for key in ["version", "cuda"] {
        if let Some(at) = lower.find(key) {
            let after = &head[at + key.len()..];
            let start = after.find(|c: char| c.is_ascii_digit())?;
            let number: String = after[start..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            if release_of(&number).is_some() {
                return Some(number.trim_end_matches('.').to_string());
            }
        }
    }
    None
}

fn version_of(path: &Path) -> Result<String, String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let output = Command::new(path).arg("--version").output().map_err(|e| format!("cannot run it ({e})"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !text.contains("ptxas") && !text.contains("Cuda compilation tools") {
        return Err(format!("`--version` did not answer as ptxas does ({})", output.status));
    }
    let release = text.lines().find_map(|line| line.split_once(", V").map(|(_, v)| v.trim().to_string()));
    release.filter(|v| release_of(v).is_some()).ok_or_else(|| "`--version` names no release".into())
}

fn release_of(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// `nvidia/cu*/bin/ptxas` of the Python environment kerntune runs from (the wheel of
/// `nvidia-cuda-nvcc`), the newest CUDA first.
fn pip_ptxas() -> Option<PathBuf> {
    crate::wheels::wheel_paths("nvidia/cu*/bin/ptxas").into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_resolution_names_a_missing_file_in_one_line() {
        let error = Ptxas::resolve("missing/ptxas", Path::new("/nowhere")).expect_err("no such ptxas");
        assert_eq!(error.to_string(), "ptxas /nowhere/missing/ptxas: no such file");
        let error = Ptxas::resolve("no-such-ptxas-kt", Path::new("/nowhere")).expect_err("not on the PATH");
        assert_eq!(error, PtxasError::NotOnPath("no-such-ptxas-kt".into()));
    }

    #[test]
    fn ptxas_resolution_refuses_a_program_that_is_not_ptxas() {
        let error = Ptxas::resolve("true", Path::new("/nowhere")).expect_err("true is no ptxas");
        assert!(
            matches!(&error, PtxasError::Unusable { reason, .. } if reason.contains("did not answer as ptxas does")),
            "{error}"
        );
    }

    #[test]
    fn acf_arguments_name_their_file() {
        assert_eq!(acf_file("--apply-controls=a.acf").as_deref(), Some("a.acf"));
        assert_eq!(acf_file("-O1"), None);
        assert_eq!(release_of("13.3.73"), Some((13, 3)));
        assert_eq!(release_of("V13"), None);
    }
}
