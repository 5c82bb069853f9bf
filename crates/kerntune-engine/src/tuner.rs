//! The tuning loop: ask the strategy, answer what the store already knows, keep the
//! backend full, record every outcome the moment it arrives, stop on the budget.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kerntune_search::{Context, History, Observation, Strategy};
use kerntune_space::{ConfigId, Rng, Space};
use kerntune_store::{Costs, Evaluation, Objective, Status, Store, StoreError, TuningId};
use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::{Backend, BackendError, Budget, StopReason, AUTO_STOP_CHANCE, AUTO_STOP_FLOOR};

/// Consecutive asks that bring nothing new, with nothing in flight, before the run ends.
const STALL_LIMIT: usize = 1000;

/// How long a wait for the backend lasts before the interrupt is asked again.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// Everything one run needs. The store is optional (simulation can run without one).
#[allow(missing_debug_implementations)] // holds trait objects with nothing useful to print
pub struct Tuner<'a> {
    pub space: &'a Space,
    pub strategy: Box<dyn Strategy>,
    pub backend: &'a mut dyn Backend,
    pub store: Option<(&'a Store, TuningId)>,
    /// Answer configurations already in the store from it (the default); `false` measures
    /// everything again, still recording each new result (replacing the old one).
    pub reuse_stored: bool,
    pub objective: Objective,
    pub budget: Budget,
    pub seed: u64,
    /// Asked often (about every 0.1 s while waiting): `true` stops the run at once,
    /// keeping what was recorded and dropping the evaluations still in flight.
    pub interrupt: Option<&'a dyn Fn() -> bool>,
}

/// One step of the run's progress, in the order configurations were observed.
#[derive(Debug, Clone, Serialize)]
pub struct TracePoint {
    /// 1-based count of distinct configurations observed so far.
    pub feval: usize,
    #[serde(skip)]
    pub id: ConfigId,
    pub objective: Option<f64>,
    /// Best objective so far.
    pub best: Option<f64>,
    /// On the backend's clock.
    pub elapsed_s: f64,
    #[serde(skip)]
    pub status: Status,
    /// Answered by the store, at no cost.
    #[serde(skip)]
    pub from_store: bool,
}

#[derive(Debug, Clone)]
pub struct Best {
    pub id: ConfigId,
    pub objective: f64,
    pub config: Map<String, Json>,
}

/// What a run found and what it cost.
#[derive(Debug, Clone)]
pub struct Summary {
    pub best: Option<Best>,
    pub evaluations: usize,
    pub failed: usize,
    pub from_store: usize,
    pub stop: StopReason,
    pub trace: Vec<TracePoint>,
    /// On the backend's clock.
    pub elapsed: Duration,
    /// Summed costs of the evaluations this run made (not those answered by the store).
    pub costs: Costs,
    /// While nothing has worked: the reason every failure so far shares, if they share one.
    pub common_failure: Option<String>,
}

impl Summary {
    /// Why the run found nothing, when it found nothing and was not interrupted: the
    /// counts, the reason every failure shared (if one), and a hint for known causes.
    pub fn failure_message(&self) -> Option<String> {
        if self.best.is_some() || self.stop == StopReason::Interrupted {
            return None;
        }
        let mut message = format!(
            "no configuration ran and passed its check ({} evaluated, {} failed)",
            self.evaluations, self.failed
        );
        if let Some(reason) = &self.common_failure {
            message.push_str(&format!("; every one failed with: {reason}"));
            if let Some(hint) = failure_hint(reason) {
                message.push_str(&format!(" (hint: {hint})"));
            }
        }
        Some(message.replace('\n', " "))
    }
}

/// What usually causes a failure that every configuration shares.
pub fn failure_hint(reason: &str) -> Option<&'static str> {
    let hints: [(&[&str], &str); 4] = [
        (
            &["CUDA_ERROR_NOT_FOUND", "finding the kernel"],
            "the kernel's name is not in the compiled module; a C++ kernel without extern \"C\" has a mangled name",
        ),
        (&["elements wrong"], "no configuration matches the reference: check the expected outputs and the tolerances"),
        (&["shared memory"], "every configuration needs more shared memory than the device has"),
        (&["NVRTC", "error:"], "the kernel does not compile for any configuration: see the compiler's message"),
    ];
    hints.iter().find(|(needles, _)| needles.iter().any(|n| reason.contains(n))).map(|(_, hint)| *hint)
}

/// How many configurations failing for one reason, with none working, end a run: the
/// fault is then the kernel's or the setup's (a kernel name not in the module, a source
/// that never compiles, a wrong reference), and more evaluations would only repeat it.
pub const ALL_FAILED_LIMIT: usize = 12;

/// Failures for one reason, while nothing has worked. Reasons are compared with their
/// numbers blanked out, as they name sizes and indexes that differ by configuration.
#[derive(Debug, Default)]
struct CommonFailure {
    /// The first failure's reason, and its shape (digits blanked).
    first: Option<(String, String)>,
    count: usize,
    /// A configuration worked, or two failed for different reasons.
    broken: bool,
}

impl CommonFailure {
    fn observe(&mut self, evaluation: &Evaluation) {
        // A configuration the device cannot run says nothing about the kernel.
        if self.broken || evaluation.status == Status::InvalidConfig {
            return;
        }
        if !evaluation.status.is_failure() {
            self.broken = true;
            return;
        }
        let text = evaluation.reason.as_deref().unwrap_or(evaluation.status.as_str());
        let shape: String = text.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        match &self.first {
            Some((_, seen)) if *seen != shape => self.broken = true,
            Some(_) => self.count += 1,
            None => {
                self.first = Some((text.to_string(), shape));
                self.count = 1;
            }
        }
    }

    /// The shared reason, while there is one.
    fn reason(&self) -> Option<&str> {
        self.first.as_ref().filter(|_| !self.broken).map(|(text, _)| text.as_str())
    }

    fn decided(&self) -> bool {
        !self.broken && self.count >= ALL_FAILED_LIMIT
    }
}

/// Progress, for fronts to render.
#[derive(Debug)]
pub enum Event<'a> {
    Started { space_size: usize, from_store: usize, budget: &'a Budget },
    Evaluated { point: &'a TracePoint, evaluation: &'a Evaluation },
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    #[error("the search space has no valid configuration")]
    EmptySpace,
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

struct Loop<'a, 'e> {
    space: &'a Space,
    strategy: Box<dyn Strategy>,
    store: Option<(&'a Store, TuningId)>,
    objective: Objective,
    rng: Rng,
    history: History,
    /// Stored evaluations not yet asked for, with their place in the order they were recorded.
    stored: HashMap<ConfigId, (usize, Evaluation)>,
    /// Share of the ask that proposed each configuration in flight (stored answers waiting
    /// in `replaying` included).
    in_flight: HashMap<ConfigId, f64>,
    /// Stored answers that were asked for, by their place in the recorded order. They are
    /// handed to the strategy in that order, one wherever the backend would have delivered
    /// a result, so a rerun proposes what the recorded run proposed (see `drive`).
    replaying: BTreeMap<usize, (ConfigId, Evaluation)>,
    trace: Vec<TracePoint>,
    best: Option<(ConfigId, f64)>,
    failed: usize,
    from_store: usize,
    costs: Costs,
    common_failure: CommonFailure,
    /// Whether the configurations not yet on a device were given up, the time being out.
    abandoned: bool,
    on_event: &'e mut dyn FnMut(Event<'_>),
}

/// What waiting for the backend brought.
enum Waited {
    Finished((ConfigId, Evaluation)),
    Interrupted,
    OutOfTime,
}

impl Tuner<'_> {
    pub fn run(self, on_event: &mut dyn FnMut(Event<'_>)) -> Result<Summary, TuneError> {
        if self.space.is_empty() {
            return Err(TuneError::EmptySpace);
        }
        let stored = match self.store {
            Some((store, tuning)) if self.reuse_stored => stored_by_id(self.space, store, tuning)?,
            _ => HashMap::new(),
        };
        on_event(Event::Started { space_size: self.space.len(), from_store: stored.len(), budget: &self.budget });
        let mut state = Loop {
            space: self.space,
            strategy: self.strategy,
            store: self.store,
            objective: self.objective,
            rng: Rng::seeded(self.seed),
            history: History::new(),
            stored,
            in_flight: HashMap::new(),
            replaying: BTreeMap::new(),
            trace: Vec::new(),
            best: None,
            failed: 0,
            from_store: 0,
            costs: Costs::default(),
            common_failure: CommonFailure::default(),
            abandoned: false,
            on_event,
        };
        let stop = state.drive(self.backend, &self.budget, self.interrupt)?;
        let elapsed = self.backend.elapsed();
        Ok(state.summary(stop, elapsed))
    }
}

/// What one ask brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// At least one configuration was started or answered by the store.
    Progress,
    /// Only configurations already observed or in flight.
    OnlyKnown,
    /// Nothing at all.
    Nothing,
}

impl Loop<'_, '_> {
    fn drive(
        &mut self,
        backend: &mut dyn Backend,
        budget: &Budget,
        interrupt: Option<&dyn Fn() -> bool>,
    ) -> Result<StopReason, TuneError> {
        let interrupted = || interrupt.is_some_and(|stop| stop());
        let mut stalls = 0;
        loop {
            if interrupted() {
                return Ok(StopReason::Interrupted);
            }
            if self.common_failure.decided() {
                return Ok(StopReason::AllFailed);
            }
            if let (Some(target), Some((_, best))) = (budget.target, self.best) {
                if !self.objective.is_better(target, best) {
                    return Ok(StopReason::Target);
                }
            }
            let started = self.history.len() + self.in_flight.len();
            let remaining = budget.max_fevals.map(|max| max.saturating_sub(started));
            let out_of_time = budget.time_limit.is_some_and(|limit| backend.elapsed() >= limit);
            let room = backend.capacity().max(1).saturating_sub(self.in_flight.len());
            let converged = budget.auto_stop
                && self.history.len() >= AUTO_STOP_FLOOR
                && self.strategy.improvement_chance().is_some_and(|chance| chance < AUTO_STOP_CHANCE);
            let mut asked = None;
            if !converged && !out_of_time && started < self.space.len() && remaining != Some(0) && room > 0 {
                let outcome = self.ask_and_start(backend, room.min(remaining.unwrap_or(usize::MAX)), remaining)?;
                stalls = if outcome == Asked::OnlyKnown { stalls + 1 } else { 0 };
                asked = Some(outcome);
            }
            if self.in_flight.is_empty() {
                let observed = self.history.len();
                let stop = if budget.max_fevals.is_some_and(|max| observed >= max) {
                    Some(StopReason::MaxFevals)
                } else if observed >= self.space.len() {
                    Some(StopReason::Exhausted)
                } else if out_of_time {
                    Some(StopReason::TimeLimit)
                } else if converged {
                    Some(StopReason::Converged)
                } else if asked == Some(Asked::Nothing) {
                    Some(StopReason::StrategyFinished)
                } else if stalls > STALL_LIMIT {
                    Some(StopReason::StrategyStalled)
                } else {
                    None
                };
                match stop {
                    Some(reason) => return Ok(reason),
                    None => continue,
                }
            }
            // A recorded run's results arrived in the order they were recorded, each when
            // its configuration was in flight; answering the stored ones in that order, at
            // the point where the backend would deliver one, gives the strategy the same
            // history after the same asks, so it proposes the same configurations again.
            if let Some((_, (id, evaluation))) = self.replaying.pop_first() {
                self.in_flight.remove(&id);
                self.from_store += 1;
                self.observe(id, &evaluation, backend.elapsed(), true);
                continue;
            }
            let (id, mut evaluation) = match self.wait(backend, budget, interrupt)? {
                Waited::Finished(finished) => finished,
                Waited::Interrupted => return Ok(StopReason::Interrupted),
                Waited::OutOfTime => {
                    self.abandoned = true;
                    for id in backend.abandon_unstarted() {
                        self.in_flight.remove(&id);
                    }
                    continue;
                }
            };
            // A front may raise the interrupt inside a callback of this very evaluation
            // (Python raises KeyboardInterrupt in whatever Python code runs), which then
            // fails for that reason alone: such a failure is not the configuration's.
            if evaluation.status.is_failure() && interrupted() {
                return Ok(StopReason::Interrupted);
            }
            evaluation.costs.strategy_s += self.in_flight.remove(&id).unwrap_or(0.0);
            if let Some((store, tuning)) = self.store {
                store.record(tuning, &self.space.config_json(id), &evaluation)?;
            }
            self.costs.add(&evaluation.costs);
            self.observe(id, &evaluation, backend.elapsed(), false);
        }
    }

    /// Waits for the next evaluation. Where a front can interrupt, or a time budget can run
    /// out, it looks up every [`INTERRUPT_POLL`] (and when the time runs out): once the time
    /// is out, the configurations not yet on a device are given up (once), so a time budget
    /// is not overrun by the compiles in flight.
    fn wait(
        &self,
        backend: &mut dyn Backend,
        budget: &Budget,
        interrupt: Option<&dyn Fn() -> bool>,
    ) -> Result<Waited, TuneError> {
        if interrupt.is_none() && budget.time_limit.is_none() {
            return Ok(Waited::Finished(backend.next()?));
        }
        loop {
            let left =
                budget.time_limit.filter(|_| !self.abandoned).map(|limit| limit.saturating_sub(backend.elapsed()));
            if left == Some(Duration::ZERO) {
                return Ok(Waited::OutOfTime);
            }
            let patience = left.map_or(INTERRUPT_POLL, |left| left.min(INTERRUPT_POLL));
            if let Some(finished) = backend.next_within(patience)? {
                return Ok(Waited::Finished(finished));
            }
            if interrupt.is_some_and(|stop| stop()) {
                return Ok(Waited::Interrupted);
            }
        }
    }

    /// Asks for up to `n` configurations; starts the new ones, answers the rest from the
    /// history or the store.
    fn ask_and_start(
        &mut self,
        backend: &mut dyn Backend,
        n: usize,
        remaining: Option<usize>,
    ) -> Result<Asked, TuneError> {
        let clock = Instant::now();
        let proposed = {
            let mut context = Context { space: self.space, rng: &mut self.rng, history: &self.history, remaining };
            self.strategy.ask(&mut context, n)
        };
        let share = clock.elapsed().as_secs_f64() / proposed.len().max(1) as f64;
        if proposed.is_empty() {
            return Ok(Asked::Nothing);
        }
        let mut outcome = Asked::OnlyKnown;
        let mut started = 0;
        for id in proposed {
            if let Some(score) = self.history.score(id) {
                self.tell(Observation { id, score });
            } else if self.history.is_pending(id) || started >= n {
                // Already in flight (or past what was asked for): it will be told once.
            } else {
                outcome = Asked::Progress;
                started += 1;
                self.history.start(id);
                self.in_flight.insert(id, share);
                match self.stored.remove(&id) {
                    Some((recorded, evaluation)) => {
                        self.replaying.insert(recorded, (id, evaluation));
                    }
                    None => backend.submit(id)?,
                }
            }
        }
        Ok(outcome)
    }

    fn tell(&mut self, observation: Observation) {
        let mut context = Context { space: self.space, rng: &mut self.rng, history: &self.history, remaining: None };
        self.strategy.tell(&mut context, observation);
    }

    fn observe(&mut self, id: ConfigId, evaluation: &Evaluation, elapsed: Duration, from_store: bool) {
        let objective = evaluation.valid_objective();
        if evaluation.status.is_failure() {
            self.failed += 1;
        }
        self.common_failure.observe(evaluation);
        if let Some(value) = objective {
            if self.best.is_none_or(|(_, best)| self.objective.is_better(value, best)) {
                self.best = Some((id, value));
            }
        }
        // A configuration stopped early was measured and is slow: the search learns its
        // time, where a failure would teach it "worst seen" (more than half of a GPU run's
        // evaluations are stopped early once a good configuration is known).
        let measured = evaluation.measured_objective();
        let observation = Observation { id, score: measured.map(|o| self.objective.score(o)) };
        self.history.observe(observation);
        let point = TracePoint {
            feval: self.history.len(),
            id,
            objective,
            best: self.best.map(|(_, b)| b),
            elapsed_s: elapsed.as_secs_f64(),
            status: evaluation.status,
            from_store,
        };
        (self.on_event)(Event::Evaluated { point: &point, evaluation });
        self.trace.push(point);
        self.tell(observation);
    }

    fn summary(self, stop: StopReason, elapsed: Duration) -> Summary {
        Summary {
            best: self.best.map(|(id, objective)| Best { id, objective, config: self.space.config_json(id) }),
            evaluations: self.history.len(),
            failed: self.failed,
            from_store: self.from_store,
            stop,
            trace: self.trace,
            elapsed,
            costs: self.costs,
            common_failure: if self.best.is_none() { self.common_failure.reason().map(str::to_string) } else { None },
        }
    }
}

/// The stored evaluations of a tuning that belong to configurations of this space,
/// each with its place in the order they were recorded.
fn stored_by_id(
    space: &Space,
    store: &Store,
    tuning: TuningId,
) -> Result<HashMap<ConfigId, (usize, Evaluation)>, StoreError> {
    let mut by_id = HashMap::new();
    for (recorded, row) in store.evaluations(tuning)?.into_iter().enumerate() {
        if let Some(id) = space.values_of_json(&row.config).and_then(|v| space.id_of_values(&v)) {
            by_id.insert(id, (recorded, row.evaluation));
        }
    }
    Ok(by_id)
}
