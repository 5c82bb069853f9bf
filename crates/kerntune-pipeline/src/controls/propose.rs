//! The proposing side of the compiler-controls search: CompileIQ, run where it lives, in a
//! Python worker process (`python -m kerntune._worker __worker controls`, see
//! `kerntune._compileiq`) that answers `ask` with a generation of candidate ACF files and
//! takes their times with `tell`. It speaks one JSON object per line, as every worker of the
//! pipeline does ([`crate::protocol`]), and lives for the whole search: CompileIQ keeps its
//! state between generations in that one process.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kerntune_engine::BackendError;
use serde::{Deserialize, Serialize};

use crate::process::{Hub, Origin, Worker, WorkerCommand};

/// What the search asks of the proposer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToProposer {
    /// The next generation of candidates.
    Ask,
    /// The times of candidates asked for (`None`: the candidate failed).
    Tell { scores: Vec<Score> },
}

/// One candidate's outcome, as told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub id: String,
    pub time_ms: Option<f64>,
}

/// A candidate ACF file the proposer wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: String,
    pub path: PathBuf,
}

/// What the proposer answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromProposer {
    /// Started; candidates are written into `directory`.
    Ready {
        directory: PathBuf,
    },
    Asked {
        candidates: Vec<Candidate>,
    },
    Told {
        count: usize,
    },
    /// It cannot go on (CompileIQ or its search space missing, a tell out of turn).
    Fatal {
        message: String,
    },
}

/// An ask/tell search over ACF files: the worker below, or a stand-in in tests.
pub trait Propose {
    /// The next generation of candidates. `stop` (Ctrl-C) ends a long wait with
    /// [`BackendError::Interrupted`].
    fn ask(&mut self, stop: &dyn Fn() -> bool) -> Result<Vec<Candidate>, BackendError>;
    /// The outcomes of candidates asked for.
    fn tell(&mut self, scores: Vec<Score>, stop: &dyn Fn() -> bool) -> Result<(), BackendError>;
}

/// How long the proposer may take to start (CompileIQ imports, reads its search space)
/// and to answer one request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// How often a wait asks whether to stop.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The proposer worker process, started once for a whole search.
#[derive(Debug)]
pub struct ProposerWorker {
    hub: Hub,
    worker: Worker,
    /// Where its candidates are written (kept after the run: a kept ACF is used from there).
    pub directory: PathBuf,
}

impl ProposerWorker {
    /// Starts `command` with `__worker controls` and the search's settings, and waits until
    /// it is ready; a proposer that cannot run says why in one line.
    pub fn start(
        command: &WorkerCommand,
        ptxas_version: &str,
        pool_size: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<ProposerWorker, BackendError> {
        let hub = Hub::default();
        let args: Vec<String> = ["__worker", "controls", "--ptxas-version", ptxas_version, "--pool-size"]
            .map(String::from)
            .into_iter()
            .chain([pool_size.to_string()])
            .collect();
        let worker = Worker::spawn(command, &args, Origin { slot: 0, generation: 0 }, &hub).map_err(|e| {
            BackendError::CannotStart(format!(
                "cannot start the CompileIQ worker ({}): {e}; set KERNTUNE_PYTHON to a Python with kerntune and compileiq",
                command.program.display()
            ))
        })?;
        let mut proposer = ProposerWorker { hub, worker, directory: PathBuf::new() };
        match proposer.receive(stop)? {
            FromProposer::Ready { directory } => proposer.directory = directory,
            other => return Err(unexpected(&other)),
        }
        Ok(proposer)
    }

    fn request(&mut self, message: &ToProposer, stop: &dyn Fn() -> bool) -> Result<FromProposer, BackendError> {
        self.worker
            .send(message)
            .map_err(|e| BackendError::DeviceLost(format!("the CompileIQ worker is gone: {e}")))?;
        self.receive(stop)
    }

    fn receive(&mut self, stop: &dyn Fn() -> bool) -> Result<FromProposer, BackendError> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let Some(line) = self.hub.next(Some(deadline.min(Instant::now() + STOP_POLL))) else {
                if stop() {
                    return Err(BackendError::Interrupted);
                }
                if Instant::now() < deadline {
                    continue;
                }
                return Err(BackendError::Protocol("the CompileIQ worker did not answer".into()));
            };
            let Some(text) = line.text else {
                let death = self.worker.death();
                return Err(match death.last_words {
                    Some(words) => BackendError::CannotStart(format!("the CompileIQ worker stopped: {words}")),
                    None => BackendError::CannotStart(format!("the CompileIQ worker {death}")),
                });
            };
            let message: FromProposer = serde_json::from_str(&text)
                .map_err(|e| BackendError::Protocol(format!("unreadable reply from the CompileIQ worker: {e}")))?;
            return match message {
                FromProposer::Fatal { message } => Err(BackendError::CannotStart(message)),
                other => Ok(other),
            };
        }
    }
}

impl Propose for ProposerWorker {
    fn ask(&mut self, stop: &dyn Fn() -> bool) -> Result<Vec<Candidate>, BackendError> {
        match self.request(&ToProposer::Ask, stop)? {
            FromProposer::Asked { candidates } => Ok(candidates),
            other => Err(unexpected(&other)),
        }
    }

    fn tell(&mut self, scores: Vec<Score>, stop: &dyn Fn() -> bool) -> Result<(), BackendError> {
        let sent = scores.len();
        match self.request(&ToProposer::Tell { scores }, stop)? {
            FromProposer::Told { count } if count == sent => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(message: &FromProposer) -> BackendError {
    BackendError::Protocol(format!("unexpected reply from the CompileIQ worker: {message:?}"))
}
