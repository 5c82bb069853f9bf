//! Compiles shared between the runs of one process: a CUDA C compile job names everything
//! its binary depends on (source, kernel, options, architecture, ptxas), so a job met again
//! (the same configuration at another size of a many-shape run: problem variables are not
//! `#define`d) is answered with the binary compiled the first time. Triton's jobs depend on
//! the kernel's specialization, which their worker holds, not the job: Triton's own cache
//! shares those between sizes.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::pool::Binary;
use crate::protocol::CompileJob;

/// The most cubin bytes kept: past it, new binaries are not kept (those kept stay).
const MOST_BYTES: usize = 256 << 20;

#[derive(Default)]
struct Memo {
    binaries: HashMap<String, Binary>,
    bytes: usize,
}

fn memo() -> &'static Mutex<Memo> {
    static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
    MEMO.get_or_init(Mutex::default)
}

/// The key of a job whose binary depends on nothing else; `None` for other jobs.
pub(crate) fn key(job: &CompileJob) -> Option<String> {
    match job {
        CompileJob::Cuda { .. } => serde_json::to_string(job).ok(),
        _ => None,
    }
}

/// The binary compiled earlier in this process for the job of `key`.
pub(crate) fn recall(key: &str) -> Option<Binary> {
    memo().lock().ok()?.binaries.get(key).cloned()
}

/// Keeps `binary` as the answer to the job of `key`.
pub(crate) fn keep(key: String, binary: &Binary) {
    let Ok(mut memo) = memo().lock() else { return };
    if memo.bytes + binary.cubin.len() <= MOST_BYTES && !memo.binaries.contains_key(&key) {
        memo.bytes += binary.cubin.len();
        memo.binaries.insert(key, binary.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(source: &str) -> CompileJob {
        CompileJob::Cuda { source: source.into(), name: "k".into(), options: vec![], arch: "sm_90".into(), ptxas: None }
    }

    #[test]
    fn a_cuda_job_met_again_is_answered_with_its_binary_and_other_jobs_are_not_kept() {
        let binary = Binary { cubin: vec![1, 2, 3], launch: None, symbol: Some("k".into()) };
        let first = key(&cuda("__global__ void k() {} // memo test")).expect("a CUDA job has a key");
        assert!(recall(&first).is_none());
        keep(first.clone(), &binary);
        assert_eq!(recall(&first).map(|b| b.cubin), Some(vec![1, 2, 3]));
        let other = key(&cuda("__global__ void k() { } // memo test")).expect("a key");
        assert!(recall(&other).is_none(), "another source is another binary");
        let triton = CompileJob::Triton {
            constexprs: Default::default(),
            options: Default::default(),
            descriptors: Default::default(),
            setup: None,
        };
        assert_eq!(key(&triton), None, "a Triton job depends on its worker's kernel");
    }
}
