//! The compile worker: a child process that compiles CUDA C with NVRTC, one request at a
//! time, so that a compiler crash or hang costs one configuration and not the run.

use std::io::{BufRead, Write};

use crate::error::FailureKind;
use crate::protocol::{Bytes, CompileJob, CompileRequest, FromCompiler};
use kerntune_device::nvrtc;

/// Runs the worker on standard input and output until the input closes.
pub fn run() -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<CompileRequest>(&line) {
            Ok(CompileRequest { id, job: CompileJob::Cuda { source, name, options, arch } }) => {
                match nvrtc::compile(&source, &name, &options, &arch) {
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
