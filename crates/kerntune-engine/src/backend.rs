//! The contract between the engine and whatever turns configurations into evaluations:
//! a real GPU pipeline, or a recorded landscape.

use std::time::Duration;

use kerntune_space::ConfigId;
use kerntune_store::Evaluation;

/// Evaluates configurations, possibly several at once (a compile pool ahead of the GPU).
///
/// A configuration that fails (does not compile, crashes, is wrong) is an [`Evaluation`]
/// with a failed status, not an error: `Err` means the backend itself cannot go on.
pub trait Backend {
    /// How many configurations the backend wants in flight to stay busy.
    fn capacity(&self) -> usize {
        1
    }

    /// Starts evaluating a configuration.
    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError>;

    /// Waits for the next finished evaluation. Called only while something is in flight.
    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError>;

    /// Like `next`, but gives up after about `patience` with `None`, so that the caller
    /// can look for an interruption while a slow evaluation runs. The default waits as
    /// long as `next` does (right for backends whose evaluations take no real time).
    fn next_within(&mut self, patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        let _ = patience;
        self.next().map(Some)
    }

    /// Time spent since the backend started: simulated time for a landscape, wall time for
    /// a device. Time budgets compare against this clock.
    fn elapsed(&self) -> Duration;

    /// Gives up the configurations in flight whose evaluation has not reached a device yet
    /// (waiting for or under a compiler), when a time budget has run out: the run ends
    /// without waiting for their compiles, which can take seconds each. Returns them; no
    /// result of theirs arrives afterwards. The default gives up nothing (a recorded
    /// landscape's evaluations end when simulated time says).
    fn abandon_unstarted(&mut self) -> Vec<ConfigId> {
        Vec::new()
    }
}

/// The backend cannot continue, by kind; the message is the user's explanation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend could not start: a worker that does not start, no device, no compiler,
    /// a reference that does not compile or run.
    #[error("{0}")]
    CannotStart(String),
    /// The device, or the worker that holds it, is gone for good (it failed again and
    /// again, or reported itself unusable).
    #[error("{0}")]
    DeviceLost(String),
    /// A worker's reply was unreadable or out of turn.
    #[error("{0}")]
    Protocol(String),
    /// A configuration the backend does not know (not in its space or landscape).
    #[error("configuration {0} is not in the backend's space or landscape")]
    UnknownConfig(ConfigId),
    /// A misuse of the backend by its caller (asking for a result with nothing in flight):
    /// what was asked.
    #[error("{0}")]
    Misuse(&'static str),
    /// The caller asked to stop (Ctrl-C) while the backend waited.
    #[error("interrupted")]
    Interrupted,
}

/// A backend that starts only when the first configuration needs evaluating, so that a
/// run the store answers entirely never starts compilers or touches the GPU.
pub struct Lazy<B, F> {
    start: Option<F>,
    backend: Option<B>,
    capacity: usize,
    created: std::time::Instant,
}

impl<B: Backend, F: FnOnce() -> Result<B, BackendError>> Lazy<B, F> {
    /// `capacity` stands in for the backend's own until it has started.
    pub fn new(capacity: usize, start: F) -> Self {
        Lazy { start: Some(start), backend: None, capacity, created: std::time::Instant::now() }
    }

    /// The backend, if it has started.
    pub fn started(&self) -> Option<&B> {
        self.backend.as_ref()
    }

    /// The backend itself, if it has started, for whatever follows the search.
    pub fn into_started(self) -> Option<B> {
        self.backend
    }
}

impl<B, F> std::fmt::Debug for Lazy<B, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy").field("started", &self.backend.is_some()).finish()
    }
}

impl<B: Backend, F: FnOnce() -> Result<B, BackendError>> Backend for Lazy<B, F> {
    fn capacity(&self) -> usize {
        self.backend.as_ref().map_or(self.capacity, Backend::capacity)
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        if self.backend.is_none() {
            let start = self
                .start
                .take()
                .ok_or_else(|| BackendError::CannotStart("the backend failed to start before".into()))?;
            self.backend = Some(start()?);
        }
        match self.backend.as_mut() {
            Some(backend) => backend.submit(id),
            None => Err(BackendError::CannotStart("the backend did not start".into())),
        }
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        match self.backend.as_mut() {
            Some(backend) => backend.next(),
            None => Err(BackendError::Misuse("nothing is being evaluated")),
        }
    }

    fn next_within(&mut self, patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        match self.backend.as_mut() {
            Some(backend) => backend.next_within(patience),
            None => Err(BackendError::Misuse("nothing is being evaluated")),
        }
    }

    fn elapsed(&self) -> Duration {
        self.created.elapsed()
    }

    fn abandon_unstarted(&mut self) -> Vec<ConfigId> {
        self.backend.as_mut().map_or_else(Vec::new, Backend::abandon_unstarted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that is never reached: its start always fails.
    struct Unreachable;

    impl Backend for Unreachable {
        fn submit(&mut self, _id: ConfigId) -> Result<(), BackendError> {
            Ok(())
        }

        fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
            Err(BackendError::Misuse("unreachable"))
        }

        fn elapsed(&self) -> Duration {
            Duration::ZERO
        }
    }

    /// A backend with one configuration still compiling.
    struct Compiling;

    impl Backend for Compiling {
        fn submit(&mut self, _id: ConfigId) -> Result<(), BackendError> {
            Ok(())
        }

        fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
            Err(BackendError::Misuse("still compiling"))
        }

        fn elapsed(&self) -> Duration {
            Duration::ZERO
        }

        fn abandon_unstarted(&mut self) -> Vec<ConfigId> {
            vec![ConfigId(7)]
        }
    }

    #[test]
    fn a_lazy_backend_gives_up_what_its_backend_gives_up() {
        let mut lazy = Lazy::new(1, || -> Result<Compiling, BackendError> { Ok(Compiling) });
        assert_eq!(lazy.abandon_unstarted(), vec![], "nothing before it started");
        lazy.submit(ConfigId(7)).expect("starts");
        assert_eq!(lazy.abandon_unstarted(), vec![ConfigId(7)]);
    }

    #[test]
    fn a_backend_that_cannot_start_says_so_by_kind_in_its_own_words() {
        let mut lazy =
            Lazy::new(1, || -> Result<Unreachable, _> { Err(BackendError::CannotStart("no GPU #3".into())) });
        let first = lazy.submit(ConfigId(0)).expect_err("the start fails");
        assert_eq!(first, BackendError::CannotStart("no GPU #3".into()));
        assert_eq!(first.to_string(), "no GPU #3");
        let again = lazy.submit(ConfigId(1)).expect_err("no second start");
        assert!(matches!(again, BackendError::CannotStart(_)), "{again:?}");
        assert!(matches!(lazy.next(), Err(BackendError::Misuse(_))));
    }
}
