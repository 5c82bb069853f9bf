//! Worker processes and their supervision. Every worker's standard output is read by a
//! thread of its own into one channel, so the supervisor waits on a single queue with a
//! deadline; a worker that dies shows up as the end of its stream.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use kerntune_space::Setting;

use crate::error::{Death, Exit};

/// How to start a worker: a program and its arguments (usually the `kerntune` binary
/// itself with a hidden subcommand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment variables set for the worker (on top of the tuner's own).
    pub env: Vec<(String, String)>,
}

impl WorkerCommand {
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> WorkerCommand {
        WorkerCommand { program: program.into(), args, env: Vec::new() }
    }

    /// The command an `argv` names (program first), with `env`; `None` when it is empty.
    pub fn from_argv(argv: &[String], env: Vec<(String, String)>) -> Option<WorkerCommand> {
        let (program, args) = argv.split_first()?;
        Some(WorkerCommand { program: program.into(), args: args.to_vec(), env })
    }
}

/// Which worker a line came from: its slot and the generation of the process in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub slot: usize,
    pub generation: u32,
}

/// A line of output, or `None` when the worker's output ended (it exited or died).
#[derive(Debug)]
pub struct Line {
    pub origin: Origin,
    pub text: Option<String>,
}

/// The channel every worker's output thread writes into. One reader takes every worker's
/// lines ([`Hub::next`]); or several threads share it, each reading its own worker's
/// ([`Hub::next_from`]): the finalists' sessions on a crew's GPUs.
#[derive(Debug)]
pub struct Hub {
    sender: Sender<Line>,
    receiver: Mutex<Receiver<Line>>,
    routing: Mutex<Routing>,
    /// Signalled when a reader of one worker's lines parks a line or stops taking them.
    routed: Condvar,
}

/// How the readers of their own workers' lines share the channel: one of them at a time
/// takes lines from it and parks the others' lines for their readers.
#[derive(Debug, Default)]
struct Routing {
    parked: VecDeque<Line>,
    /// Whether a reader is taking a line from the channel now.
    taking: bool,
}

impl Default for Hub {
    fn default() -> Self {
        let (sender, receiver) = std::sync::mpsc::channel();
        Hub { sender, receiver: Mutex::new(receiver), routing: Mutex::default(), routed: Condvar::new() }
    }
}

impl Hub {
    /// Hands lines taken out of order back to the next readers.
    pub fn put_back(&self, lines: Vec<Line>) {
        for line in lines {
            // The receiver lives as long as self: sending cannot fail.
            let _ = self.sender.send(line);
        }
    }

    /// The next line from any worker, waiting until `deadline` at most.
    pub fn next(&self, deadline: Option<Instant>) -> Option<Line> {
        if let Some(line) = self.routing.lock().ok()?.parked.pop_front() {
            return Some(line);
        }
        let receiver = self.receiver.lock().ok()?;
        match deadline {
            None => receiver.recv().ok(),
            // A timeout and a closed channel both mean: nothing more for now.
            Some(deadline) => receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok(),
        }
    }

    /// The next line of the worker at `origin`, waiting until `deadline` at most; lines of
    /// other workers wait for their own readers. One reader at a time takes lines from the
    /// channel, and parks another's line before any reader may take the next: so each
    /// reader gets its worker's lines in order. The others wait to be woken, so that no
    /// reader holds up another's line while it waits for its own.
    pub fn next_from(&self, origin: Origin, deadline: Instant) -> Option<Line> {
        let mut routing = self.routing.lock().ok()?;
        loop {
            if let Some(at) = routing.parked.iter().position(|line| line.origin == origin) {
                return routing.parked.remove(at);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if routing.taking {
                routing = self.routed.wait_timeout(routing, left).ok()?.0;
                continue;
            }
            routing.taking = true;
            drop(routing);
            let taken = self.receiver.lock().map(|receiver| receiver.recv_timeout(left));
            routing = self.routing.lock().ok()?;
            routing.taking = false;
            self.routed.notify_all();
            match taken {
                Ok(Ok(line)) if line.origin == origin => return Some(line),
                Ok(Ok(line)) => routing.parked.push_back(line),
                Ok(Err(std::sync::mpsc::RecvTimeoutError::Timeout)) => {}
                Ok(Err(std::sync::mpsc::RecvTimeoutError::Disconnected)) | Err(_) => return None,
            }
        }
    }
}

#[derive(Debug)]
pub struct Worker {
    pub origin: Origin,
    child: Child,
    stdin: ChildStdin,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Set when the worker's standard error has been read to its end.
    stderr_done: Arc<std::sync::atomic::AtomicBool>,
}

const STDERR_LINES: usize = 20;

impl Worker {
    pub fn spawn(command: &WorkerCommand, extra_args: &[String], origin: Origin, hub: &Hub) -> std::io::Result<Worker> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .args(extra_args)
            .envs(command.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr"))?;
        let sender = hub.sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(text) = line else { break };
                if sender.send(Line { origin, text: Some(text) }).is_err() {
                    return;
                }
            }
            let _ = sender.send(Line { origin, text: None });
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tail, done) = (Arc::clone(&stderr_tail), Arc::clone(&stderr_done));
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Ok(Worker { origin, child, stdin, stderr_tail, stderr_done })
    }

    pub fn send<T: serde::Serialize>(&mut self, message: &T) -> std::io::Result<()> {
        let line = serde_json::to_string(message).map_err(std::io::Error::other)?;
        writeln!(self.stdin, "{line}")?;
        self.stdin.flush()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// How the worker ended, for the record: its exit status or signal and the last line
    /// it wrote to standard error. Waits briefly for the process to be reaped.
    pub fn death(&mut self) -> Death {
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => break None,
            }
        };
        let exit = status.map_or(Exit::StoppedAnswering, exit_of);
        // The last words on standard error may still be in the pipe when the exit is seen.
        while !self.stderr_done.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tail: Vec<String> = self.stderr_tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
        let last_words = tail.iter().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string());
        Death { exit, last_words }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        _ => Exit::Ended,
    }
}

/// The Python that runs kerntune's Python workers for a front that is not Python itself
/// (the CLI): `$KERNTUNE_PYTHON`, else the Python of the environment kerntune is installed
/// in.
pub fn kerntune_python() -> String {
    std::env::var("KERNTUNE_PYTHON").unwrap_or_else(|_| kerntune_device::wheels::python().display().to_string())
}

/// Running workers on a Ray cluster: the relay (`python -m kerntune.ray_worker`, from
/// `pip install 'kerntune[ray]'`) that a pool starts instead of a worker; it runs the worker
/// in a Ray actor on some node and relays its lines (docs/design-notes.md says why this
/// shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RayRelay {
    /// The cluster: `auto`, `HOST:PORT` or `ray://HOST:PORT`.
    pub address: String,
    /// The Python that has kerntune and Ray: `$KERNTUNE_PYTHON`, else `python3`.
    pub python: String,
}

/// Why a Ray cluster cannot serve the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RayError {
    /// The Python that runs the relay could not be started.
    #[error("cannot run {python} for the Ray relay ({reason}); set KERNTUNE_PYTHON to a Python with kerntune[ray]")]
    CannotRun { python: String, reason: String },
    /// That Python has no relay (no kerntune[ray]); its last words.
    #[error("{python} cannot run the Ray relay ({last}); install kerntune[ray] there, or set KERNTUNE_PYTHON to a Python that has it")]
    NoRelay { python: String, last: String },
    /// The relay refused (Ray not reachable at the address): its reason.
    #[error("{0}")]
    Refused(String),
    /// The relay's check answered without the cluster's GPU count.
    #[error("the Ray relay's check said nothing of the cluster's GPUs: {0}")]
    NoCount(String),
    /// Every GPU of a cluster that has none was asked for.
    #[error("{}: the Ray cluster at '{address}' has no GPU; start its nodes with GPUs, or leave {} out to measure on this machine's", Setting::RAY_GPUS.with("all"), Setting::RAY_GPUS)]
    NoGpus { address: String },
    /// More GPUs were asked for than the cluster has.
    #[error("the Ray cluster at '{address}' has {have} GPU(s); {asked} were asked for ({setting})", setting = Setting::RAY_GPUS)]
    TooFewGpus { address: String, have: usize, asked: usize },
}

/// How many of a Ray cluster's GPUs measure (`ray_gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RayGpus {
    /// Every GPU the cluster has.
    All,
    /// This many.
    Count(usize),
}

impl RayRelay {
    /// How many of the cluster's GPUs measure, once [`RayRelay::check`] passed: `gpus`
    /// resolved against the cluster (every one for [`RayGpus::All`], which a cluster without
    /// GPUs refuses), 0 when none was asked for (this machine's GPUs measure).
    pub fn measuring_gpus(&self, gpus: Option<RayGpus>) -> Result<usize, RayError> {
        let asked = match gpus {
            Some(RayGpus::Count(n)) => n,
            Some(RayGpus::All) | None => 0,
        };
        let have = self.check(asked)?;
        match gpus {
            Some(RayGpus::All) if have == 0 => Err(RayError::NoGpus { address: self.address.clone() }),
            Some(RayGpus::All) => Ok(have),
            _ => Ok(asked),
        }
    }

    pub fn new(address: impl Into<String>) -> RayRelay {
        RayRelay { address: address.into(), python: kerntune_python() }
    }

    /// Whether the relay can run and reach the cluster (`--check`), and the cluster has
    /// `gpus` GPUs: the cluster's GPU count, or why not (Ray not installed, the address
    /// unreachable, too few GPUs), so that a run stops before any configuration fails for it.
    pub fn check(&self, gpus: usize) -> Result<usize, RayError> {
        let output = Command::new(&self.python)
            .args(["-m", "kerntune.ray_worker", "--check", "--address", &self.address])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| RayError::CannotRun { python: self.python.clone(), reason: e.to_string() })?;
        if output.status.success() {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let answer: Option<serde_json::Value> = stdout.lines().rev().find_map(|l| serde_json::from_str(l).ok());
            let have = answer
                .and_then(|a| a["gpus"].as_u64())
                .map(|n| n as usize)
                .ok_or_else(|| RayError::NoCount(stdout.trim().to_string()))?;
            if gpus > have {
                return Err(RayError::TooFewGpus { address: self.address.clone(), have, asked: gpus });
            }
            return Ok(have);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        Err(match last.strip_prefix("kerntune: ") {
            Some(reason) => RayError::Refused(reason.to_string()),
            None => RayError::NoRelay { python: self.python.clone(), last: last.to_string() },
        })
    }

    /// `worker`, run by a Ray actor that needs no GPU (a compile worker); the variables
    /// `worker` sets are passed on to it.
    pub fn wrap(&self, worker: &WorkerCommand) -> WorkerCommand {
        self.wrap_shipping(worker, 0, &[])
    }

    /// `worker`, run by a Ray actor that holds one GPU of the cluster (a benchmark worker:
    /// the relay gives it `--device 0`, the one GPU Ray lets it see).
    pub fn wrap_on_a_gpu(&self, worker: &WorkerCommand) -> WorkerCommand {
        self.wrap_shipping(worker, 1, &[])
    }

    /// `worker`, run by a Ray actor that holds `gpus` GPUs, on a node where the relay first
    /// writes each file of `ship` at the same path (a Triton compile worker's setup, the
    /// arguments a benchmark worker reads).
    pub fn wrap_shipping(&self, worker: &WorkerCommand, gpus: usize, ship: &[PathBuf]) -> WorkerCommand {
        let mut args: Vec<String> =
            ["-m", "kerntune.ray_worker", "--address", &self.address].map(String::from).to_vec();
        if gpus > 0 {
            args.extend(["--gpus".to_string(), gpus.to_string()]);
        }
        for (name, _) in &worker.env {
            args.extend(["--env".to_string(), name.clone()]);
        }
        for path in ship {
            args.extend(["--ship".to_string(), path.display().to_string()]);
        }
        args.push("--".into());
        args.push(worker.program.display().to_string());
        args.extend(worker.args.iter().cloned());
        WorkerCommand { program: self.python.clone().into(), args, env: worker.env.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_worker_runs_the_same_argv_after_the_relays_own_and_keeps_its_variables() {
        let mut worker = WorkerCommand::new("/opt/kerntune", vec!["--quiet".into()]);
        worker.env = vec![("PYTHONPATH".into(), "/src".into())];
        let relay = RayRelay { address: "10.0.0.1:6379".into(), python: "/venv/bin/python".into() };
        let relayed = relay.wrap(&worker);
        assert_eq!(relayed.program, PathBuf::from("/venv/bin/python"));
        let expected = "-m kerntune.ray_worker --address 10.0.0.1:6379 --env PYTHONPATH -- /opt/kerntune --quiet";
        assert_eq!(relayed.args.join(" "), expected);
        assert_eq!(relayed.env, worker.env, "the relay sees the variables it passes on");
        let on_a_gpu = relay.wrap_on_a_gpu(&worker).args.join(" ");
        assert_eq!(
            on_a_gpu,
            "-m kerntune.ray_worker --address 10.0.0.1:6379 --gpus 1 --env PYTHONPATH -- /opt/kerntune --quiet"
        );
        let shipping = relay.wrap_shipping(&worker, 0, &[PathBuf::from("/tmp/setup.json")]).args.join(" ");
        assert_eq!(
            shipping,
            "-m kerntune.ray_worker --address 10.0.0.1:6379 --env PYTHONPATH --ship /tmp/setup.json -- /opt/kerntune --quiet"
        );
    }

    #[test]
    fn readers_of_one_hub_each_get_their_own_worker_s_lines_in_order() {
        let hub = Hub::default();
        let origin = |slot| Origin { slot, generation: 0 };
        for index in 0..20 {
            let slot = index % 2;
            let _ = hub.sender.send(Line { origin: origin(slot), text: Some(format!("{slot}:{index}")) });
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let read =
            |slot| (0..10).map(|_| hub.next_from(origin(slot), deadline).and_then(|l| l.text)).collect::<Vec<_>>();
        let (odd, even) = std::thread::scope(|scope| {
            let odd = scope.spawn(|| read(1));
            let even = scope.spawn(|| read(0));
            (odd.join().unwrap_or_default(), even.join().unwrap_or_default())
        });
        assert_eq!(even, (0..10).map(|i| Some(format!("0:{}", 2 * i))).collect::<Vec<_>>());
        assert_eq!(odd, (0..10).map(|i| Some(format!("1:{}", 2 * i + 1))).collect::<Vec<_>>());
        assert!(hub.next_from(origin(0), Instant::now() + Duration::from_millis(30)).is_none(), "nothing left");
    }

    #[test]
    fn a_reader_gets_its_worker_s_lines_while_other_readers_wait_for_theirs() {
        // The finalists on several GPUs: each reader waits for its worker's reply while the
        // others' arrive. Worker 1 answers every 20 ms; workers 0 and 2 after a second.
        // Before the readers waited to be woken, the one taking lines from the channel held
        // it between polls and the others' lines waited for it: 50 to 140 ms late here.
        let hub = Hub::default();
        let origin = |slot| Origin { slot, generation: 0 };
        let deadline = Instant::now() + Duration::from_secs(5);
        let lags = std::thread::scope(|scope| {
            let hub = &hub;
            let waiting: Vec<_> =
                [0, 2].into_iter().map(|slot| scope.spawn(move || hub.next_from(origin(slot), deadline))).collect();
            let reader = scope.spawn(|| {
                (0..10).map(|_| hub.next_from(origin(1), deadline).map(|_| Instant::now())).collect::<Vec<_>>()
            });
            let mut sent = Vec::new();
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(20));
                sent.push(Instant::now());
                let _ = hub.sender.send(Line { origin: origin(1), text: Some("reply".into()) });
            }
            let received = reader.join().unwrap_or_default();
            std::thread::sleep(Duration::from_millis(500));
            for slot in [0, 2] {
                let _ = hub.sender.send(Line { origin: origin(slot), text: Some("late".into()) });
            }
            let late: Vec<bool> = waiting.into_iter().map(|h| h.join().ok().flatten().is_some()).collect();
            assert_eq!(late, [true, true], "the waiting readers get their lines too");
            received
                .iter()
                .zip(&sent)
                .map(|(got, sent)| got.map(|got| got.saturating_duration_since(*sent)))
                .collect::<Vec<_>>()
        });
        assert!(lags.iter().all(Option::is_some), "{lags:?}");
        // Within 40 ms of being sent (microseconds, here), allowing two for a busy machine.
        let prompt = lags.iter().flatten().filter(|lag| **lag < Duration::from_millis(40)).count();
        assert!(prompt >= 8, "worker 1's lines came late: {lags:?}");
    }
}
