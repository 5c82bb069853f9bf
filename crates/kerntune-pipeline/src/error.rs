//! Why a configuration failed, typed: a [`Failure`] is a [`FailureKind`] and the message
//! for the user. The kind travels through the worker protocol (a compile worker's
//! `failed` reply names it), so that no outcome is ever decided by a message's wording,
//! and it becomes the store's [`Status`] in exactly one place (`From<FailureKind>`).
//! A [`LanguageError`] is why a language cannot do what the pipeline asks, a
//! [`CompileError`] why a compile pool cannot go on, a [`ScheduleError`] why the schedule stage
//! cannot. [`Death`] is how a worker process ended; [`MixedModels`] refuses GPUs of two models as
//! one target.

use kerntune_engine::BackendError;
use kerntune_space::Setting;
use kerntune_store::Status;
use serde::{Deserialize, Serialize};

/// The kind of a configuration's failure, as workers name it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The configuration exceeds a device limit (threads, shared memory, registers).
    InvalidConfig,
    /// The compiler rejected the configuration. What an old worker's reply without a
    /// kind means.
    #[default]
    CompileFailed,
    /// The compile outlived its timeout; the compiler was killed.
    CompileTimeout,
    /// The compile worker died while compiling.
    CompilerCrashed,
    /// The kernel could not be loaded or launched, or it crashed.
    LaunchFailed,
    /// The kernel ran, but its outputs differ from the reference's.
    WrongAnswer,
    /// The kernel did not finish in time; its worker was killed.
    LaunchTimeout,
    /// The benchmark worker died while measuring.
    WorkerDied,
    /// A worker's reply did not follow the protocol.
    Protocol,
    /// The driver failed outside any one kernel's doing.
    Device,
    /// The objective could not be computed from the measured time.
    Objective,
}

impl From<FailureKind> for Status {
    /// The one place where the pipeline's failures become the store's statuses.
    fn from(kind: FailureKind) -> Status {
        match kind {
            FailureKind::InvalidConfig => Status::InvalidConfig,
            FailureKind::CompileFailed
            | FailureKind::CompileTimeout
            | FailureKind::CompilerCrashed
            | FailureKind::Protocol => Status::CompileFailed,
            FailureKind::LaunchFailed | FailureKind::WorkerDied | FailureKind::Device | FailureKind::Objective => {
                Status::RuntimeFailed
            }
            FailureKind::WrongAnswer => Status::InvalidOutput,
            FailureKind::LaunchTimeout => Status::Timeout,
        }
    }
}

impl FailureKind {
    /// The store's status for this kind.
    pub fn status(self) -> Status {
        Status::from(self)
    }
}

/// A configuration's failure: what kind, and the user's message (the compiler's log, the
/// driver's error, the differing outputs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }

    pub fn status(&self) -> Status {
        self.kind.status()
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it (a segmentation fault, an abort...).
    Signal(i32),
    /// It ended, neither by an exit status nor by a signal.
    Ended,
    /// It still runs, but closed its output.
    StoppedAnswering,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exited with status {code}"),
            Exit::Signal(signal) => write!(f, "killed by signal {signal} ({})", signal_name(*signal)),
            Exit::Ended => f.write_str("ended"),
            Exit::StoppedAnswering => f.write_str("stopped answering"),
        }
    }
}

/// A dead worker: how it ended, and its last words on standard error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{exit}{}", last_words.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
pub struct Death {
    pub exit: Exit,
    pub last_words: Option<String>,
}

/// Why a language cannot do what the pipeline asks of it, by kind; the message is the
/// user's explanation (the spec's wording, the compiler's log, the outputs that differ).
/// What each kind becomes is the pipeline's to decide: an invalid configuration is
/// recorded, a broken setup stops the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LanguageError {
    /// A tool the language compiles with is missing, or rejects the run's settings.
    #[error("{0}")]
    Toolchain(String),
    /// The configuration cannot be built or launched on this device (recorded
    /// `invalid_config`, never compiled).
    #[error("{0}")]
    InvalidConfig(String),
    /// The objective cannot be computed from what was measured.
    #[error("{0}")]
    Objective(String),
    /// The benchmark worker's setup cannot be made: a reference that does not compile or
    /// run, inputs that cannot be made.
    #[error("{0}")]
    Setup(String),
    /// A configuration's outputs differ from the reference's.
    #[error("{0}")]
    WrongOutputs(String),
}

impl LanguageError {
    /// How a configuration that met this error failed.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            LanguageError::InvalidConfig(_) => FailureKind::InvalidConfig,
            LanguageError::Objective(_) => FailureKind::Objective,
            LanguageError::WrongOutputs(_) => FailureKind::WrongAnswer,
            LanguageError::Toolchain(_) | LanguageError::Setup(_) => FailureKind::Device,
        }
    }
}

/// Why a pool of compile workers cannot go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// A compile worker could not be started.
    #[error(transparent)]
    Spawn(#[from] std::io::Error),
    /// A worker's reply names a configuration that was never asked for.
    #[error("a compile worker answered for configuration #{0}, which was not asked")]
    UnaskedReply(u32),
    /// An outcome could not be stored.
    #[error(transparent)]
    Store(#[from] kerntune_store::StoreError),
}

/// Why the schedule stage cannot tune the best configuration's schedule.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The benchmark worker or the compile worker could not go on, or Ctrl-C came.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The best configuration no longer compiles or launches.
    #[error("the best configuration: {0}")]
    Language(LanguageError),
    #[error("compiling the best configuration: {0}")]
    Compile(String),
    /// The A/B timing's settings cannot make a comparison.
    #[error(
        "schedule: blocks = {blocks} and rounds = {rounds}: the A/B timing needs at least {min} blocks and a round per block"
    )]
    TooFewBlocks { blocks: u32, rounds: u32, min: u32 },
    #[error("unknown schedule method '{0}' (hill_climb or anneal)")]
    UnknownMethod(String),
    /// The cubin's SASS cannot be read or rewritten.
    #[error("schedule: {0}")]
    Sass(#[from] kerntune_sass::SassError),
}

/// GPUs of more than one model, asked to be one tuning's target: the first GPU and the
/// first of another model, by number and name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "GPU #{} is a {} and GPU #{} a {}: one tuning's results must come from one model; tune each model on its own ({} or {})",
    first.0, first.1, other.0, other.1, Setting::DEVICES.with(first.0), Setting::DEVICES.with(other.0)
)]
pub struct MixedModels {
    pub first: (usize, String),
    pub other: (usize, String),
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => "segmentation fault",
        libc::SIGABRT => "aborted",
        libc::SIGKILL => "killed",
        libc::SIGBUS => "bus error",
        libc::SIGFPE => "arithmetic error",
        libc::SIGILL => "illegal instruction",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_status_and_a_wire_name() {
        let kinds = [
            (FailureKind::InvalidConfig, "invalid_config", Status::InvalidConfig),
            (FailureKind::CompileFailed, "compile_failed", Status::CompileFailed),
            (FailureKind::CompileTimeout, "compile_timeout", Status::CompileFailed),
            (FailureKind::CompilerCrashed, "compiler_crashed", Status::CompileFailed),
            (FailureKind::LaunchFailed, "launch_failed", Status::RuntimeFailed),
            (FailureKind::WrongAnswer, "wrong_answer", Status::InvalidOutput),
            (FailureKind::LaunchTimeout, "launch_timeout", Status::Timeout),
            (FailureKind::WorkerDied, "worker_died", Status::RuntimeFailed),
            (FailureKind::Protocol, "protocol", Status::CompileFailed),
            (FailureKind::Device, "device", Status::RuntimeFailed),
            (FailureKind::Objective, "objective", Status::RuntimeFailed),
        ];
        for (kind, name, status) in kinds {
            assert_eq!(serde_json::to_value(kind).expect("serializes"), serde_json::json!(name));
            assert_eq!(Status::from(kind), status, "{kind:?}");
        }
    }

    #[test]
    fn a_death_reads_as_before_the_types() {
        let death = Death { exit: Exit::Signal(libc::SIGSEGV), last_words: Some("oops".into()) };
        assert_eq!(death.to_string(), format!("killed by signal {} (segmentation fault) (oops)", libc::SIGSEGV));
        assert_eq!(Death { exit: Exit::Code(3), last_words: None }.to_string(), "exited with status 3");
    }
}
