//! A pool of compile workers (one per core by default) kept busy from a queue. A compile
//! that crashes its worker or outlives the timeout fails that configuration only: the
//! worker is replaced and the pool goes on. A worker that dies is not always the
//! configuration's fault (a Ray node that goes away looks the same), so the request it held
//! is compiled once more by whichever worker is free; dying a second time fails it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::FailureKind;
use crate::process::{Hub, Line, Origin, Worker, WorkerCommand};
use crate::protocol::{CompileRequest, FromCompiler, LaunchInfo};

/// A compiled kernel as its compile worker returned it.
#[derive(Debug, Clone)]
pub struct Binary {
    pub cubin: Vec<u8>,
    /// How to launch it, from compilers that decide (Triton).
    pub launch: Option<LaunchInfo>,
    /// The kernel's symbol in the cubin, from compilers that lower names (NVRTC).
    pub symbol: Option<String>,
}

/// What became of one compile request.
#[derive(Debug)]
pub enum CompileOutcome {
    Compiled {
        id: u32,
        binary: Binary,
        seconds: f64,
    },
    /// `kind` decides the configuration's status; `reason` is the user's message.
    Failed {
        id: u32,
        kind: FailureKind,
        reason: String,
        seconds: f64,
    },
}

/// A request handed to a worker, and how many workers died under it before.
#[derive(Debug)]
struct Running {
    request: CompileRequest,
    started: Instant,
    retries: u32,
}

#[derive(Debug)]
struct Slot {
    worker: Worker,
    job: Option<Running>,
}

/// Workers that may die under one request before it fails.
const ATTEMPTS: u32 = 2;

#[derive(Debug)]
pub struct CompilePool {
    command: WorkerCommand,
    slots: Vec<Slot>,
    /// Hub slot of the first worker; the pool owns `first..first + slots.len()`.
    first: usize,
    /// Requests waiting for a worker, with the deaths each has seen.
    queue: VecDeque<(CompileRequest, u32)>,
    timeout: Duration,
}

const COMPILE_ARGS: [&str; 2] = ["__worker", "compile"];

impl CompilePool {
    pub fn new(
        command: &WorkerCommand,
        workers: usize,
        timeout: Duration,
        hub: &Hub,
        first: usize,
    ) -> std::io::Result<CompilePool> {
        let args: Vec<String> = COMPILE_ARGS.map(String::from).to_vec();
        let slots = (0..workers.max(1))
            .map(|i| {
                Worker::spawn(command, &args, Origin { slot: first + i, generation: 0 }, hub)
                    .map(|worker| Slot { worker, job: None })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(CompilePool { command: command.clone(), slots, first, queue: VecDeque::new(), timeout })
    }

    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    pub fn submit(&mut self, request: CompileRequest) {
        self.queue.push_back((request, 0));
    }

    /// Compiles queued or running.
    pub fn pending(&self) -> usize {
        self.queue.len() + self.slots.iter().filter(|s| s.job.is_some()).count()
    }

    /// Hands queued requests to idle workers. A worker that cannot be written to is
    /// replaced and the request goes back to the queue, or fails once it has seen
    /// [`ATTEMPTS`] workers die.
    pub fn dispatch(&mut self, hub: &Hub) -> Vec<CompileOutcome> {
        let mut failed = Vec::new();
        for index in 0..self.slots.len() {
            if self.slots[index].job.is_some() {
                continue;
            }
            let Some((request, retries)) = self.queue.pop_front() else { break };
            match self.slots[index].worker.send(&request) {
                Ok(()) => self.slots[index].job = Some(Running { request, started: Instant::now(), retries }),
                Err(error) => {
                    self.replace(index, hub);
                    let running = Running { request, started: Instant::now(), retries };
                    failed.extend(self.retry_or_fail(running, format!("the compile worker is gone: {error}")));
                }
            }
        }
        failed
    }

    /// A request whose worker died: queued again (first in line) if it has attempts left.
    fn retry_or_fail(&mut self, running: Running, reason: String) -> Option<CompileOutcome> {
        if running.retries + 1 < ATTEMPTS {
            self.queue.push_front((running.request, running.retries + 1));
            return None;
        }
        Some(CompileOutcome::Failed {
            id: running.request.id,
            kind: FailureKind::CompilerCrashed,
            reason,
            seconds: running.started.elapsed().as_secs_f64(),
        })
    }

    pub fn owns(&self, origin: Origin) -> bool {
        (self.first..self.first + self.slots.len()).contains(&origin.slot)
    }

    /// Handles a line from one of the pool's workers.
    pub fn handle(&mut self, line: Line, hub: &Hub) -> Option<CompileOutcome> {
        let index = line.origin.slot - self.first;
        if self.slots[index].worker.origin != line.origin {
            return None; // from a worker already replaced
        }
        let Some(text) = line.text else {
            // The worker died; its job, if any, is compiled again or fails with the reason.
            let death = self.slots[index].worker.death();
            let job = self.slots[index].job.take();
            self.replace(index, hub);
            return job.and_then(|running| self.retry_or_fail(running, format!("the compiler crashed: {death}")));
        };
        self.slots[index].job = None;
        match serde_json::from_str::<FromCompiler>(&text) {
            Ok(FromCompiler::Compiled { id, cubin, seconds, launch, symbol }) => {
                Some(CompileOutcome::Compiled { id, binary: Binary { cubin: cubin.0, launch, symbol }, seconds })
            }
            Ok(FromCompiler::Failed { id, kind, message, seconds }) => {
                Some(CompileOutcome::Failed { id, kind, reason: message, seconds })
            }
            Err(error) => {
                self.replace(index, hub);
                Some(CompileOutcome::Failed {
                    id: u32::MAX,
                    kind: FailureKind::Protocol,
                    reason: format!("unreadable reply from a compile worker: {error}"),
                    seconds: 0.0,
                })
            }
        }
    }

    /// The earliest moment a running compile times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.slots.iter().filter_map(|s| s.job.as_ref().map(|running| running.started + self.timeout)).min()
    }

    /// Fails and replaces every compile past its timeout.
    pub fn expire(&mut self, hub: &Hub) -> Vec<CompileOutcome> {
        let now = Instant::now();
        let mut expired = Vec::new();
        for index in 0..self.slots.len() {
            let started = self.slots[index].job.as_ref().map(|running| (running.request.id, running.started));
            if let Some((id, started)) = started {
                if now >= started + self.timeout {
                    self.slots[index].job = None;
                    self.replace(index, hub);
                    expired.push(CompileOutcome::Failed {
                        id,
                        kind: FailureKind::CompileTimeout,
                        reason: format!("the compile did not finish within {:.0} s", self.timeout.as_secs_f64()),
                        seconds: started.elapsed().as_secs_f64(),
                    });
                }
            }
        }
        expired
    }

    fn replace(&mut self, index: usize, hub: &Hub) {
        let slot = &mut self.slots[index];
        slot.worker.kill();
        let origin = Origin { slot: slot.worker.origin.slot, generation: slot.worker.origin.generation + 1 };
        let args: Vec<String> = COMPILE_ARGS.map(String::from).to_vec();
        // If even a fresh worker cannot start, the next dispatch to it fails and says so.
        if let Ok(worker) = Worker::spawn(&self.command, &args, origin, hub) {
            slot.worker = worker;
        }
        slot.job = None;
    }
}

/// Compiles every request through the pool, handing each outcome to `on_outcome` as it
/// arrives, until all are done or `stop` returns true.
pub fn compile_all(
    pool: &mut CompilePool,
    hub: &Hub,
    requests: Vec<CompileRequest>,
    on_outcome: &mut dyn FnMut(CompileOutcome) -> Result<(), String>,
    stop: &dyn Fn() -> bool,
) -> Result<(), String> {
    for request in requests {
        pool.submit(request);
    }
    while pool.pending() > 0 && !stop() {
        for outcome in pool.dispatch(hub) {
            on_outcome(outcome)?;
        }
        match hub.next(pool.deadline()) {
            Some(line) if pool.owns(line.origin) => {
                if let Some(outcome) = pool.handle(line, hub) {
                    on_outcome(outcome)?;
                }
            }
            Some(_) => {}
            None => {
                for outcome in pool.expire(hub) {
                    on_outcome(outcome)?;
                }
            }
        }
    }
    Ok(())
}
