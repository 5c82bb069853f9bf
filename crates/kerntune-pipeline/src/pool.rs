//! A pool of compile workers (one per core by default) kept busy from a queue. A compile
//! that crashes its worker or outlives the limit ([`CompileLimit`]) fails that
//! configuration only: the worker is replaced and the pool goes on. A worker that dies is
//! not always the configuration's fault (a Ray node that goes away looks the same), so the
//! request it held is compiled once more by whichever worker is free; dying a second time
//! fails it.
//!
//! Requests of one family (see [`crate::protocol::CompileJob::family`]) go to the worker that compiled one
//! of that family before, where it is free: that worker compiles them from the work it kept.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use kerntune_engine::stats::quantile;

use crate::error::{CompileError, FailureKind};
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
    /// The families of the requests this worker was sent (it keeps their shared work).
    families: HashSet<String>,
    /// Whether it has answered a request: its compiler is loaded and warm.
    warm: bool,
}

/// A request waiting for a worker, with the deaths it has seen and its family (see
/// [`crate::protocol::CompileJob::family`]), worked out once.
#[derive(Debug)]
struct Queued {
    request: CompileRequest,
    retries: u32,
    family: Option<String>,
}

impl Queued {
    fn new(request: CompileRequest, retries: u32) -> Queued {
        let family = request.job.family();
        Queued { request, retries, family }
    }
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
    queue: VecDeque<Queued>,
    limit: CompileLimit,
}

/// How long a compile may run: the configured timeout, or, once it adapts, a limit drawn
/// from this run's own compile times. A configuration whose compile takes many times longer
/// than nine in ten of the run's is one ptxas struggles with (huge tiles, deep pipelines,
/// spills): waiting the full timeout for each of them sets the floor of a tuning run (on an
/// H200, 36 Triton matmul configurations of 576 that outlived 10 s cost more than the rest
/// put together at a 60 s timeout).
#[derive(Debug, Clone)]
pub struct CompileLimit {
    /// The configured timeout; the adapted limit never exceeds it.
    cap: Duration,
    adapts: bool,
    /// Wall seconds of each successful compile so far.
    seconds: Vec<f64>,
    /// The limit they give, kept up to date by [`Self::record`] (the pool asks for it on
    /// every turn of its loop).
    current: Duration,
}

/// Successful compiles before the limit adapts.
pub const ADAPT_AFTER: usize = 16;
/// The adapted limit is this many times the 90th percentile of the compile times so far...
pub const ADAPT_FACTOR: f64 = 4.0;
/// ...and never below this.
pub const ADAPT_FLOOR: Duration = Duration::from_secs(10);

impl CompileLimit {
    /// The configured `cap`, adapting to the run's compile times when `adapts`.
    pub fn new(cap: Duration, adapts: bool) -> CompileLimit {
        CompileLimit { cap, adapts, seconds: Vec::new(), current: cap }
    }

    /// Records a successful compile's wall time.
    pub fn record(&mut self, seconds: f64) {
        if !self.adapts || !seconds.is_finite() {
            return;
        }
        self.seconds.push(seconds);
        if self.seconds.len() >= ADAPT_AFTER {
            let limit = Duration::from_secs_f64(ADAPT_FACTOR * quantile(&self.seconds, 0.9));
            self.current = limit.clamp(ADAPT_FLOOR.min(self.cap), self.cap);
        }
    }

    /// The limit now.
    pub fn current(&self) -> Duration {
        self.current
    }

    /// Why a compile that ran past [`Self::current`] failed.
    fn reason(&self) -> String {
        let limit = self.current();
        if limit == self.cap {
            format!("the compile did not finish within {:.0} s", limit.as_secs_f64())
        } else {
            format!(
                "the compile did not finish within {:.0} s, this run's limit: {ADAPT_FACTOR} x the 90th percentile \
                 of its {} compile times, at least {} s (a fixed compile_timeout, e.g. \"{:.0}s\", waits longer)",
                limit.as_secs_f64(),
                self.seconds.len(),
                ADAPT_FLOOR.as_secs(),
                self.cap.as_secs_f64()
            )
        }
    }
}

const COMPILE_ARGS: [&str; 2] = ["__worker", "compile"];

impl CompilePool {
    pub fn new(
        command: &WorkerCommand,
        workers: usize,
        limit: CompileLimit,
        hub: &Hub,
        first: usize,
    ) -> std::io::Result<CompilePool> {
        let mut pool =
            CompilePool { command: command.clone(), slots: Vec::new(), first, queue: VecDeque::new(), limit };
        pool.grow(workers.max(1), hub)?;
        Ok(pool)
    }

    /// Starts `more` workers beside the pool's own (the hub's slots after the pool's are
    /// free: the pool takes the last ones).
    pub fn grow(&mut self, more: usize, hub: &Hub) -> std::io::Result<()> {
        let args: Vec<String> = COMPILE_ARGS.map(String::from).to_vec();
        for _ in 0..more {
            let origin = Origin { slot: self.first + self.slots.len(), generation: 0 };
            let worker = Worker::spawn(&self.command, &args, origin, hub)?;
            self.slots.push(Slot { worker, job: None, families: HashSet::new(), warm: false });
        }
        Ok(())
    }

    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Whether requests wait for a worker while every worker is past its first compile:
    /// the pool, warm, does not keep up.
    pub fn outpaced(&self) -> bool {
        !self.queue.is_empty() && self.slots.iter().all(|s| s.warm)
    }

    /// The program its workers run.
    pub fn command(&self) -> &WorkerCommand {
        &self.command
    }

    /// The pool, idle, for another tuning (see [`crate::Crew`]): its compiles are held to
    /// `limit`, and the work its workers kept for families of the last tuning's requests
    /// no longer steers where requests go. `None` while anything is queued or compiling.
    pub fn retarget(mut self, limit: CompileLimit) -> Option<CompilePool> {
        if self.pending() > 0 {
            return None;
        }
        for slot in &mut self.slots {
            slot.families.clear();
        }
        self.limit = limit;
        Some(self)
    }

    pub fn submit(&mut self, request: CompileRequest) {
        self.queue.push_back(Queued::new(request, 0));
    }

    /// Drops the queued requests among `ids` (running ones finish).
    pub fn forget(&mut self, ids: &HashSet<u32>) {
        self.queue.retain(|queued| !ids.contains(&queued.request.id));
    }

    /// Compiles queued or running.
    pub fn pending(&self) -> usize {
        self.queue.len() + self.slots.iter().filter(|s| s.job.is_some()).count()
    }

    /// Hands queued requests to idle workers: first each request whose family an idle
    /// worker knows, to that worker; then, to each worker still idle, the first request of
    /// a family no worker knows, else the first in line (a worker never waits while a
    /// request does). A worker that cannot be written to is replaced and the request goes
    /// back to the queue, or fails once it has seen [`ATTEMPTS`] workers die.
    pub fn dispatch(&mut self, hub: &Hub) -> Vec<CompileOutcome> {
        let mut failed = Vec::new();
        let mut position = 0;
        while position < self.queue.len() {
            let family = &self.queue[position].family;
            let knows = |slot: &Slot| slot.job.is_none() && family.as_ref().is_some_and(|f| slot.families.contains(f));
            match self.slots.iter().position(knows) {
                Some(index) => {
                    let queued = self.queue.remove(position).expect("in the queue");
                    failed.extend(self.send(index, queued, hub));
                }
                None => position += 1,
            }
        }
        for index in 0..self.slots.len() {
            if self.slots[index].job.is_some() {
                continue;
            }
            let known = |family: &Option<String>| {
                family.as_ref().is_some_and(|f| self.slots.iter().any(|s| s.families.contains(f)))
            };
            let fresh = self.queue.iter().position(|queued| !known(&queued.family)).unwrap_or(0);
            let Some(queued) = self.queue.remove(fresh) else { break };
            failed.extend(self.send(index, queued, hub));
        }
        failed
    }

    fn send(&mut self, index: usize, queued: Queued, hub: &Hub) -> Option<CompileOutcome> {
        let Queued { request, retries, family } = queued;
        match self.slots[index].worker.send(&request) {
            Ok(()) => {
                self.slots[index].families.extend(family);
                self.slots[index].job = Some(Running { request, started: Instant::now(), retries });
                None
            }
            Err(error) => {
                self.replace(index, hub);
                let running = Running { request, started: Instant::now(), retries };
                self.retry_or_fail(running, format!("the compile worker is gone: {error}"))
            }
        }
    }

    /// A request whose worker died: queued again (first in line) if it has attempts left.
    fn retry_or_fail(&mut self, running: Running, reason: String) -> Option<CompileOutcome> {
        if running.retries + 1 < ATTEMPTS {
            self.queue.push_front(Queued::new(running.request, running.retries + 1));
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
        let started = self.slots[index].job.take().map(|running| running.started);
        self.slots[index].warm = true;
        match serde_json::from_str::<FromCompiler>(&text) {
            Ok(FromCompiler::Compiled { id, cubin, seconds, launch, symbol }) => {
                self.limit.record(started.map_or(seconds, |s| s.elapsed().as_secs_f64()));
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
        let limit = self.limit.current();
        self.slots.iter().filter_map(|s| s.job.as_ref().map(|running| running.started + limit)).min()
    }

    /// Fails and replaces every compile past its timeout.
    pub fn expire(&mut self, hub: &Hub) -> Vec<CompileOutcome> {
        let now = Instant::now();
        let limit = self.limit.current();
        let mut expired = Vec::new();
        for index in 0..self.slots.len() {
            let started = self.slots[index].job.as_ref().map(|running| (running.request.id, running.started));
            if let Some((id, started)) = started {
                if now >= started + limit {
                    self.slots[index].job = None;
                    self.replace(index, hub);
                    expired.push(CompileOutcome::Failed {
                        id,
                        kind: FailureKind::CompileTimeout,
                        reason: self.limit.reason(),
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
        slot.families.clear();
        slot.warm = false;
    }
}

/// How long [`compile_all`] waits for a worker before it asks `stop` again: a compile can
/// take a minute, and Ctrl-C must not wait for it.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Compiles every request through the pool, handing each outcome to `on_outcome` as it
/// arrives, until all are done or `stop` returns true (asked at least every [`STOP_POLL`]).
pub fn compile_all(
    pool: &mut CompilePool,
    hub: &Hub,
    requests: Vec<CompileRequest>,
    on_outcome: &mut dyn FnMut(CompileOutcome) -> Result<(), CompileError>,
    stop: &dyn Fn() -> bool,
) -> Result<(), CompileError> {
    for request in requests {
        pool.submit(request);
    }
    while pool.pending() > 0 && !stop() {
        for outcome in pool.dispatch(hub) {
            on_outcome(outcome)?;
        }
        let poll = Instant::now() + STOP_POLL;
        match hub.next(Some(pool.deadline().map_or(poll, |deadline| deadline.min(poll)))) {
            Some(line) if pool.owns(line.origin) => {
                if let Some(outcome) = pool.handle(line, hub) {
                    on_outcome(outcome)?;
                }
            }
            Some(_) => {}
            // Past no compile's limit when only the poll ran out: `expire` then fails none.
            None => {
                for outcome in pool.expire(hub) {
                    on_outcome(outcome)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit_after(seconds: &[f64], cap: u64) -> Duration {
        let mut limit = CompileLimit::new(Duration::from_secs(cap), true);
        for &s in seconds {
            limit.record(s);
        }
        limit.current()
    }

    #[test]
    fn the_limit_is_the_cap_until_enough_compiles_succeeded() {
        assert_eq!(limit_after(&[5.0; ADAPT_AFTER - 1], 60), Duration::from_secs(60));
    }

    #[test]
    fn the_limit_is_four_times_the_90th_percentile_within_floor_and_cap() {
        // 20 compiles: 18 of 2 s, then 3.5 s and 30 s; the 90th percentile (18th) is 2 s.
        let mut times = vec![2.0; 18];
        times.extend([3.5, 30.0]);
        assert_eq!(limit_after(&times, 60), Duration::from_secs(10), "4 x 2 s is below the floor");
        let slow = vec![4.0; 20];
        assert_eq!(limit_after(&slow, 60), Duration::from_secs(16));
        let slower = vec![20.0; 20];
        assert_eq!(limit_after(&slower, 60), Duration::from_secs(60), "never above the cap");
        assert_eq!(limit_after(&slow, 5), Duration::from_secs(5), "a cap below the floor wins");
    }

    #[test]
    fn a_fixed_timeout_never_adapts() {
        let mut limit = CompileLimit::new(Duration::from_secs(60), false);
        for _ in 0..100 {
            limit.record(1.0);
        }
        assert_eq!(limit.current(), Duration::from_secs(60));
        assert_eq!(limit.reason(), "the compile did not finish within 60 s");
    }

    #[test]
    fn an_adapted_limit_explains_itself() {
        let mut limit = CompileLimit::new(Duration::from_secs(60), true);
        for _ in 0..20 {
            limit.record(4.0);
        }
        let reason = limit.reason();
        assert!(reason.starts_with("the compile did not finish within 16 s, this run's limit"), "{reason}");
        assert!(reason.contains("\"60s\""), "{reason}");
    }
}
