//! The compile worker: a child process that compiles CUDA C with NVRTC, one request at a
//! time, so that a compiler crash or hang costs one configuration and not the run. Where
//! the job names a ptxas, NVRTC emits PTX and that ptxas assembles it with the
//! configuration's compiler controls.

use std::io::{BufRead, Write};

use crate::error::FailureKind;
use crate::protocol::{Bytes, CompileJob, CompileRequest, FromCompiler, PtxasStep};
use kerntune_device::nvrtc;

/// Runs the worker on standard input and output until the input closes.
pub fn run() -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<CompileRequest>(&line) {
            Ok(CompileRequest { id, job: CompileJob::Cuda { source, name, options, arch, ptxas } }) => {
                let compiled = match &ptxas {
                    None => nvrtc::compile(&source, &name, &options, &arch),
                    Some(step) => assemble(&source, &name, &options, &arch, step),
                };
                match compiled {
                    Ok(compiled) => FromCompiler::Compiled {
                        id,
                        cubin: Bytes(compiled.cubin),
                        seconds: compiled.seconds,
                        launch: None,
                        symbol: Some(compiled.symbol),
                    },
                    Err(error) => FromCompiler::Failed {
                        id,
                        kind: FailureKind::CompileFailed,
                        message: error.message,
                        seconds: error.seconds,
                    },
                }
            }
            Ok(CompileRequest { id, job }) => {
                let message = format!("this worker compiles CUDA C, not {job:?}");
                FromCompiler::Failed { id, kind: FailureKind::Protocol, message, seconds: 0.0 }
            }
            Err(error) => FromCompiler::Failed {
                id: u32::MAX,
                kind: FailureKind::Protocol,
                message: format!("bad request: {error}"),
                seconds: 0.0,
            },
        };
        let Ok(text) = serde_json::to_string(&reply) else { return 1 };
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            return 1;
        }
    }
    0
}

/// NVRTC to PTX, then the chosen ptxas to a cubin. The symbol is NVRTC's lowered name,
/// prefixed where the step renames the entry.
fn assemble(
    source: &str,
    name: &str,
    options: &[String],
    arch: &str,
    step: &PtxasStep,
) -> Result<nvrtc::Compiled, nvrtc::CompileError> {
    let start = std::time::Instant::now();
    let compiled = nvrtc::compile_ptx(source, name, options, arch)?;
    let fail = |message: String| nvrtc::CompileError { message, seconds: start.elapsed().as_secs_f64() };
    let mut ptx = String::from_utf8(compiled.cubin).map_err(|_| fail("NVRTC's PTX is not text".into()))?;
    let mut symbol = compiled.symbol;
    if let Some(prefix) = &step.prefix {
        let renamed = format!("{prefix}{symbol}");
        ptx = rename_entry(&ptx, &symbol, &renamed);
        symbol = renamed;
    }
    let cubin = kerntune_device::ptxas::assemble(&step.path, &step.version, &ptx, arch, &step.args).map_err(fail)?;
    Ok(nvrtc::Compiled { cubin, symbol, log: compiled.log, seconds: start.elapsed().as_secs_f64() })
}

/// The PTX with every whole-word occurrence of the symbol `from` replaced by `to`.
fn rename_entry(ptx: &str, from: &str, to: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut out = String::with_capacity(ptx.len() + to.len());
    let mut rest = ptx;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::rename_entry;

    #[test]
    fn a_renamed_ptxas_entry_changes_whole_symbols_only() {
        let ptx = ".visible .entry matmul(\n.param .u64 matmul_param_0\n)\n// matmul";
        let renamed = rename_entry(ptx, "matmul", "cutlass_matmul");
        assert_eq!(renamed, ".visible .entry cutlass_matmul(\n.param .u64 matmul_param_0\n)\n// cutlass_matmul");
    }
}
