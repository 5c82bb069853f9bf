//! The tuning loop on recorded landscapes: budgets, determinism, and the store.

use std::path::PathBuf;
use std::time::Duration;

use std::cell::Cell;

use kerntune_engine::{Backend, BackendError, Budget, SimBackend, StopReason, Summary, Tuner};
use kerntune_search::{build_strategy, Context, Observation, Strategy};
use kerntune_space::{ConfigId, Space};
use kerntune_store::{Costs, Evaluation, Landscape, Status, Store};

fn landscape(name: &str) -> Landscape {
    Landscape::read(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/landscapes").join(name)).expect("reads")
}

fn run(
    landscape: &Landscape,
    space: &Space,
    strategy: &str,
    budget: Budget,
    seed: u64,
    store: Option<&Store>,
) -> Summary {
    let mut backend = SimBackend::new(landscape, space).expect("backend");
    let store = store.map(|s| (s, s.tuning(&landscape.tuning()).expect("tuning")));
    Tuner {
        space,
        strategy: build_strategy(strategy, &Default::default()).expect("strategy"),
        backend: &mut backend,
        store,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget,
        seed,
        interrupt: None,
    }
    .run(&mut |_| {})
    .expect("runs")
}

/// `strategy` on `backend` over `landscape`'s space, without a store or an interrupt.
fn run_on(
    landscape: &Landscape,
    space: &Space,
    strategy: Box<dyn Strategy>,
    backend: &mut dyn Backend,
    budget: Budget,
) -> Summary {
    Tuner {
        space,
        strategy,
        backend,
        store: None,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget,
        seed: 0,
        interrupt: None,
    }
    .run(&mut |_| {})
    .expect("runs")
}

fn fevals(n: usize) -> Budget {
    Budget { max_fevals: Some(n), ..Budget::default() }
}

#[test]
fn brute_force_finds_the_recorded_optimum() {
    for name in ["convolution_A100.json.gz", "pnpoly_RTX_3090.json.gz", "convolution_A4000_T4.json.gz"] {
        let landscape = landscape(name);
        let space = landscape.space().expect("space");
        let summary = run(&landscape, &space, "brute_force", Budget::default(), 0, None);
        assert_eq!(summary.stop, StopReason::Exhausted, "{name}");
        assert_eq!(summary.evaluations, landscape.records.len());
        assert_eq!(summary.best.map(|b| b.objective), landscape.optimum(), "{name}");
        let failed = landscape.records.iter().filter(|r| r.evaluation.status.is_failure()).count();
        assert_eq!(summary.failed, failed);
    }
}

#[test]
fn random_sample_is_deterministic_per_seed_and_respects_the_budget() {
    let landscape = landscape("pnpoly_RTX_3090.json.gz");
    let space = landscape.space().expect("space");
    let trace = |seed| run(&landscape, &space, "random_sample", fevals(75), seed, None).trace;
    let (a, b, c) = (trace(3), trace(3), trace(4));
    assert_eq!(a.len(), 75);
    let ids = |t: &[kerntune_engine::TracePoint]| t.iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_ne!(ids(&a), ids(&c));
    let mut unique = ids(&a);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 75, "no configuration is evaluated twice");
    assert!(a.windows(2).all(|w| w[0].elapsed_s < w[1].elapsed_s), "simulated time advances");
}

#[test]
fn time_limit_stops_on_the_simulated_clock() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let limit = Duration::from_secs(120);
    let summary =
        run(&landscape, &space, "random_sample", Budget { time_limit: Some(limit), ..Budget::default() }, 1, None);
    assert_eq!(summary.stop, StopReason::TimeLimit);
    let before_last = summary.trace[summary.trace.len() - 2].elapsed_s;
    assert!(before_last < limit.as_secs_f64() && summary.elapsed >= limit, "{before_last} {:?}", summary.elapsed);
}

#[test]
fn target_objective_ends_the_run_once_reached() {
    let landscape = landscape("pnpoly_RTX_3090.json.gz");
    let space = landscape.space().expect("space");
    let target = 10.0;
    let summary =
        run(&landscape, &space, "random_sample", Budget { target: Some(target), ..Budget::default() }, 2, None);
    assert_eq!(summary.stop, StopReason::Target);
    let best = summary.best.expect("found").objective;
    assert!(best <= target);
    assert!(summary.trace[..summary.trace.len() - 1].iter().all(|p| p.best.is_none_or(|b| b > target)));
}

#[test]
fn a_resumed_run_reuses_the_store_and_ends_as_an_uninterrupted_one() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let store = Store::in_memory().expect("store");
    let partial = run(&landscape, &space, "random_sample", fevals(40), 9, Some(&store));
    assert_eq!(partial.from_store, 0);
    let resumed = run(&landscape, &space, "random_sample", fevals(100), 9, Some(&store));
    let uninterrupted = run(&landscape, &space, "random_sample", fevals(100), 9, None);
    assert_eq!(resumed.from_store, 40);
    let ids = |s: &Summary| s.trace.iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(ids(&resumed), ids(&uninterrupted));
    assert_eq!(resumed.best.map(|b| b.id), uninterrupted.best.map(|b| b.id));
    let tuning = store.find_tuning(&landscape.tuning()).expect("query").expect("exists");
    assert_eq!(store.evaluations(tuning).expect("rows").len(), 100);
    let again = run(&landscape, &space, "random_sample", fevals(100), 9, Some(&store));
    assert_eq!((again.from_store, again.costs.total()), (100, 0.0), "a finished run answers at no cost");
}

#[test]
fn a_strategy_that_runs_dry_ends_the_run_before_the_budget() {
    let landscape = landscape("pnpoly_RTX_3090.json.gz");
    let space = landscape.space().expect("space");
    let summary = run(&landscape, &space, "brute_force", fevals(100_000), 0, None);
    assert_eq!((summary.stop, summary.evaluations), (StopReason::Exhausted, space.len()));
}

/// A backend whose first evaluation finishes at once and whose others never do, as when
/// every compile left in flight takes minutes.
struct OneThenStuck {
    submitted: Vec<ConfigId>,
    waits: usize,
}

impl Backend for OneThenStuck {
    fn capacity(&self) -> usize {
        4
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        self.submitted.push(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        panic!("an interruptible run waits with next_within")
    }

    fn next_within(&mut self, _patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        self.waits += 1;
        if self.waits == 1 {
            let costs = Costs::default();
            return Ok(Some((self.submitted[0], Evaluation::ok(1.0, vec![1.0], costs))));
        }
        Ok(None)
    }

    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

#[test]
fn an_interrupt_stops_a_run_whose_evaluations_never_finish() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let mut backend = OneThenStuck { submitted: Vec::new(), waits: 0 };
    let asked = Cell::new(0);
    // The interrupt arrives on the fifth question, while three evaluations are in flight.
    let interrupted = || {
        asked.set(asked.get() + 1);
        asked.get() >= 5
    };
    let summary = Tuner {
        space: &space,
        strategy: build_strategy("random_sample", &Default::default()).expect("strategy"),
        backend: &mut backend,
        store: None,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget: fevals(10),
        seed: 0,
        interrupt: Some(&interrupted),
    }
    .run(&mut |_| {})
    .expect("runs");
    assert_eq!(summary.stop, StopReason::Interrupted);
    assert_eq!(summary.evaluations, 1, "the finished evaluation is kept");
    assert!(backend.waits >= 2, "the run gave up waiting and asked again");
}

/// A landscape played back four at a time, the last submitted finishing first, as results
/// of a compile pool and a GPU arrive out of the order they were asked for.
struct LastFirst<'a> {
    inner: SimBackend<'a>,
    waiting: Vec<ConfigId>,
    submitted: usize,
}

impl Backend for LastFirst<'_> {
    fn capacity(&self) -> usize {
        4
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        self.submitted += 1;
        self.waiting.push(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        let id = self.waiting.pop().expect("called only while something is in flight");
        self.inner.submit(id)?;
        self.inner.next()
    }

    fn elapsed(&self) -> Duration {
        self.inner.elapsed()
    }
}

#[test]
fn a_rerun_of_results_that_arrived_out_of_order_is_answered_wholly_by_the_store() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let tune = |strategy: &str, store: &Store| {
        let mut backend = LastFirst {
            inner: SimBackend::new(&landscape, &space).expect("backend"),
            waiting: Vec::new(),
            submitted: 0,
        };
        let summary = Tuner {
            space: &space,
            strategy: build_strategy(strategy, &Default::default()).expect("strategy"),
            backend: &mut backend,
            store: Some((store, store.tuning(&landscape.tuning()).expect("tuning"))),
            reuse_stored: true,
            objective: landscape.objective.clone(),
            budget: fevals(60),
            seed: 5,
            interrupt: None,
        }
        .run(&mut |_| {})
        .expect("runs");
        (summary, backend.submitted)
    };
    // Strategies whose next proposals depend on the results so far.
    for strategy in ["default", "genetic_algorithm", "greedy_ils"] {
        let store = Store::in_memory().expect("store");
        let (first, submitted) = tune(strategy, &store);
        assert_eq!((first.from_store, submitted), (0, 60), "{strategy}");
        let (again, submitted) = tune(strategy, &store);
        assert_eq!((again.from_store, submitted), (60, 0), "{strategy}: nothing is measured again");
        let ids = |s: &Summary| s.trace.iter().map(|p| p.id).collect::<Vec<_>>();
        assert_eq!(ids(&again), ids(&first), "{strategy}: the same configurations in the same order");
        assert_eq!(again.best.map(|b| b.id), first.best.map(|b| b.id));
    }
}

/// A backend whose second evaluation fails because the user pressed Ctrl-C while a callback
/// of theirs ran for it, as when Python raises the KeyboardInterrupt in the grid function.
struct FailsOnInterrupt<'a> {
    submitted: Vec<ConfigId>,
    delivered: usize,
    pressed: &'a Cell<bool>,
}

impl Backend for FailsOnInterrupt<'_> {
    fn capacity(&self) -> usize {
        2
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        self.submitted.push(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        let id = self.submitted.remove(0);
        let costs = Costs::default();
        self.delivered += 1;
        if self.delivered == 1 {
            return Ok((id, Evaluation::ok(1.0, vec![1.0], costs)));
        }
        self.pressed.set(true);
        let reason = "the grid function failed: KeyboardInterrupt";
        Ok((id, Evaluation::failed(Status::RuntimeFailed, reason, costs)))
    }

    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

#[test]
fn a_failure_that_arrives_with_an_interrupt_is_not_recorded() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let store = Store::in_memory().expect("store");
    let tuning = store.tuning(&landscape.tuning()).expect("tuning");
    let pressed = Cell::new(false);
    let mut backend = FailsOnInterrupt { submitted: Vec::new(), delivered: 0, pressed: &pressed };
    let interrupted = || pressed.get();
    let summary = Tuner {
        space: &space,
        strategy: build_strategy("random_sample", &Default::default()).expect("strategy"),
        backend: &mut backend,
        store: Some((&store, tuning)),
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget: fevals(10),
        seed: 0,
        interrupt: Some(&interrupted),
    }
    .run(&mut |_| {})
    .expect("runs");
    assert_eq!(summary.stop, StopReason::Interrupted);
    assert_eq!((summary.evaluations, summary.failed), (1, 0));
    let rows = store.evaluations(tuning).expect("rows");
    assert_eq!(rows.len(), 1, "only the evaluation finished before Ctrl-C is stored");
    assert_eq!(rows[0].evaluation.status, Status::Ok);
}

/// Answers every configuration at once with what `outcome` says of its position.
struct Scripted {
    waiting: Vec<ConfigId>,
    outcome: fn(usize) -> Evaluation,
    submitted: usize,
}

impl Scripted {
    fn new(outcome: fn(usize) -> Evaluation) -> Scripted {
        Scripted { waiting: Vec::new(), outcome, submitted: 0 }
    }
}

impl Backend for Scripted {
    fn capacity(&self) -> usize {
        4
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        self.waiting.push(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        let id = self.waiting.remove(0);
        self.submitted += 1;
        Ok((id, (self.outcome)(self.submitted)))
    }

    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

fn run_scripted(outcome: fn(usize) -> Evaluation) -> Summary {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let mut backend = Scripted::new(outcome);
    Tuner {
        space: &space,
        strategy: build_strategy("random_sample", &Default::default()).expect("strategy"),
        backend: &mut backend,
        store: None,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget: fevals(60),
        seed: 0,
        interrupt: None,
    }
    .run(&mut |_| {})
    .expect("runs")
}

fn not_found(_: usize) -> Evaluation {
    Evaluation::failed(Status::RuntimeFailed, "finding the kernel: CUDA_ERROR_NOT_FOUND (500)", Costs::default())
}

#[test]
fn a_run_whose_configurations_all_fail_the_same_way_stops_early_and_says_why() {
    let summary = run_scripted(not_found);
    assert_eq!(summary.stop, StopReason::AllFailed);
    // Stopped once the limit was reached, give or take what was already in flight.
    assert!((12..12 + 4).contains(&summary.evaluations), "{}", summary.evaluations);
    let message = summary.failure_message().expect("nothing was found");
    assert!(message.contains("CUDA_ERROR_NOT_FOUND") && message.contains("extern \"C\""), "{message}");
}

#[test]
fn failures_that_differ_or_a_configuration_that_works_do_not_stop_a_run() {
    fn mixed(n: usize) -> Evaluation {
        let reason = if n.is_multiple_of(2) {
            "launch failed: CUDA_ERROR_ILLEGAL_ADDRESS"
        } else {
            "NVRTC: error: expected a ';'"
        };
        Evaluation::failed(Status::RuntimeFailed, reason, Costs::default())
    }
    fn one_works(n: usize) -> Evaluation {
        if n == 20 {
            Evaluation::ok(1.0, vec![1.0], Costs::default())
        } else {
            not_found(n)
        }
    }
    fn invalid_then_not_found(n: usize) -> Evaluation {
        if n <= 30 {
            Evaluation::failed(Status::InvalidConfig, "invalid config: 2048 threads", Costs::default())
        } else {
            not_found(n)
        }
    }
    let mixed = run_scripted(mixed);
    assert_eq!((mixed.stop, mixed.evaluations), (StopReason::MaxFevals, 60));
    assert!(mixed.failure_message().expect("nothing was found").contains("60 failed"));
    // One configuration that works, before the limit, and the run goes on to its budget.
    fn early_success(n: usize) -> Evaluation {
        if n == 5 {
            Evaluation::ok(1.0, vec![1.0], Costs::default())
        } else {
            not_found(n)
        }
    }
    let worked = run_scripted(early_success);
    assert_eq!((worked.stop, worked.evaluations), (StopReason::MaxFevals, 60));
    assert_eq!(worked.failure_message(), None);
    assert_eq!(run_scripted(one_works).stop, StopReason::AllFailed, "12 failures came first");
    // Configurations the device cannot run say nothing about the kernel.
    let invalid = run_scripted(invalid_then_not_found);
    assert_eq!(invalid.stop, StopReason::AllFailed);
    assert!(invalid.evaluations > 30 + 11, "{}", invalid.evaluations);
}

/// In real time, a replay waits out each evaluation's recorded cost, but no longer than
/// the caller's patience at once (issue 37: Ctrl-C waited for the whole evaluation).
#[test]
fn a_realtime_replay_gives_up_waiting_after_the_patience_asked_and_delivers_on_time() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let id = space.ids().next().expect("a configuration");
    let mut probe = SimBackend::new(&landscape, &space).expect("backend");
    probe.submit(id).expect("submits");
    probe.next().expect("evaluates");
    let cost = probe.elapsed();
    assert!(cost > Duration::from_secs(1), "{cost:?}: the first evaluation's recorded cost");

    // Replayed in 2 s of real time, asked every 0.1 s.
    let speed = cost.as_secs_f64() / 2.0;
    let mut backend = SimBackend::new(&landscape, &space).expect("backend").with_realtime_speed(speed);
    backend.submit(id).expect("submits");
    let started = std::time::Instant::now();
    let first = backend.next_within(Duration::from_millis(100)).expect("waits");
    assert!(first.is_none(), "nothing before its time");
    assert!(started.elapsed() >= Duration::from_millis(100), "{:?}", started.elapsed());
    assert_eq!(backend.elapsed(), Duration::ZERO, "the clock waits for the evaluation");
    let (finished, _) = loop {
        if let Some(finished) = backend.next_within(Duration::from_millis(100)).expect("waits") {
            break finished;
        }
    };
    assert_eq!(finished, id);
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}: on time, not early", started.elapsed());
    assert_eq!(backend.elapsed(), cost);
}

/// Simulated time of a batch: every evaluation starts when a slot frees and finishes its
/// recorded cost later, so N at a time end sooner than one at a time, by at most N times.
#[test]
fn a_batch_overlaps_evaluations_and_tells_them_back_as_they_finish() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let ids: Vec<ConfigId> = space.ids().take(40).collect();
    let cost = |id: ConfigId| {
        let mut probe = SimBackend::new(&landscape, &space).expect("backend");
        probe.submit(id).expect("submits");
        probe.next().expect("evaluates");
        probe.elapsed()
    };
    let total: Duration = ids.iter().map(|id| cost(*id)).sum();
    let mut serial = SimBackend::new(&landscape, &space).expect("backend");
    for id in &ids {
        serial.submit(*id).expect("submits");
        serial.next().expect("evaluates");
    }
    assert_eq!(serial.elapsed(), total, "one at a time, the costs add up");

    let mut batch = SimBackend::new(&landscape, &space).expect("backend").with_batch(8);
    assert_eq!(batch.capacity(), 8);
    let mut finished = Vec::new();
    let mut queue = ids.iter();
    for id in queue.by_ref().take(8) {
        batch.submit(*id).expect("submits");
    }
    let mut last = Duration::ZERO;
    while finished.len() < ids.len() {
        let (id, _) = batch.next().expect("evaluates");
        assert!(batch.elapsed() >= last, "the clock never runs backwards");
        last = batch.elapsed();
        finished.push(id);
        if let Some(next) = queue.next() {
            batch.submit(*next).expect("submits");
        }
    }
    assert!(batch.elapsed() < total && batch.elapsed() >= total / 8, "{:?} of {:?}", batch.elapsed(), total);
    assert_ne!(finished, ids, "told back in the order they finish, not the order asked");
    let mut sorted = finished.clone();
    sorted.sort();
    let mut asked = ids.clone();
    asked.sort();
    assert_eq!(sorted, asked, "every evaluation comes back once");
}

#[test]
fn strategies_run_in_batches_and_stay_deterministic() {
    let landscape = landscape("convolution_A100.json.gz");
    let space = landscape.space().expect("space");
    let batched = |seed| {
        let mut backend = SimBackend::new(&landscape, &space).expect("backend").with_batch(16);
        Tuner {
            space: &space,
            strategy: build_strategy("default", &Default::default()).expect("strategy"),
            backend: &mut backend,
            store: None,
            reuse_stored: true,
            objective: landscape.objective.clone(),
            budget: Budget { max_fevals: Some(60), ..Budget::default() },
            seed,
            interrupt: None,
        }
        .run(&mut |_| {})
        .expect("runs")
    };
    let (a, b) = (batched(3), batched(3));
    assert_eq!(a.evaluations, 60);
    let ids = |s: &Summary| s.trace.iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b), "the same seed repeats the same batched search");
    let serial = run(&landscape, &space, "default", Budget { max_fevals: Some(60), ..Budget::default() }, 3, None);
    assert!(a.elapsed < serial.elapsed, "{:?} batched against {:?} one at a time", a.elapsed, serial.elapsed);
}

/// Issue 13, item 3: a `default` run without a budget stops by itself, well before the
/// space is exhausted, close to the optimum, and says why.
#[test]
fn default_without_a_budget_stops_by_itself_near_the_optimum() {
    for name in ["convolution_A100.json.gz", "pnpoly_RTX_3090.json.gz", "convolution_A4000_T4.json.gz"] {
        let landscape = landscape(name);
        let space = landscape.space().expect("space");
        let optimum = landscape.optimum().expect("optimum");
        let budget = Budget { auto_stop: true, ..Budget::default() };
        let summary = run(&landscape, &space, "default", budget, 0, None);
        assert_eq!(summary.stop, StopReason::Converged, "{name}");
        assert!(summary.evaluations <= space.len() / 4, "{name}: {} of {} evaluated", summary.evaluations, space.len());
        let ratio = optimum / summary.best.expect("a best").objective;
        assert!(ratio >= AUTO_STOP_REACHES, "{name}: stopped at {ratio:.3} of the optimum");
    }
}

/// What an auto-stopped run reaches on the shipped landscapes, at least (docs/design-notes.md).
const AUTO_STOP_REACHES: f64 = 0.95;

/// The scores a strategy was told, by configuration.
type Told = std::sync::Arc<std::sync::Mutex<Vec<(ConfigId, Option<f64>)>>>;

/// Brute force that keeps every score it is told, by configuration.
struct Listening {
    inner: Box<dyn Strategy>,
    told: Told,
}

impl Strategy for Listening {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        self.inner.ask(context, n)
    }

    fn tell(&mut self, context: &mut Context<'_>, observation: Observation) {
        self.told.lock().expect("not poisoned").push((observation.id, observation.score));
        self.inner.tell(context, observation);
    }
}

/// On the GPU most configurations measured after a good one are stopped early; the search
/// learns their measured time (they are slow, not broken), but only a configuration
/// measured in full can be the best, even where the early one's time would be lower.
#[test]
fn an_early_stopped_configuration_teaches_the_search_its_time_but_never_wins() {
    let mut landscape = landscape("pnpoly_RTX_3090.json.gz");
    let space = landscape.space().expect("space");
    let fastest = landscape.optimum().expect("optimum");
    let stopped = landscape.records.iter().position(|r| r.evaluation.status == Status::Ok).expect("a valid record");
    landscape.records[stopped].evaluation.status = Status::EarlyStopped;
    landscape.records[stopped].evaluation.objective = Some(fastest / 2.0);
    let stopped_id = space.id_of(&landscape.records[stopped].config).expect("in its space");
    let told = Told::default();
    let strategy =
        Listening { inner: build_strategy("brute_force", &Default::default()).expect("strategy"), told: told.clone() };
    let mut backend = SimBackend::new(&landscape, &space).expect("backend");
    let summary = run_on(&landscape, &space, Box::new(strategy), &mut backend, fevals(space.len()));
    let told = told.lock().expect("not poisoned");
    let score = told.iter().find(|(id, _)| *id == stopped_id).map(|(_, score)| *score).expect("told");
    assert_eq!(score, Some(fastest / 2.0), "the early-stopped time, not a failure");
    let best = summary.best.expect("a best");
    assert_ne!(best.id, stopped_id);
    assert_eq!(best.objective, fastest);
    assert_eq!(summary.failed, landscape.records.iter().filter(|r| r.evaluation.status.is_failure()).count());
}

/// A device whose compiles never end: each configuration stays in flight until it is
/// given up, except one in four, which reaches the GPU and is measured at once.
struct SlowCompiles {
    clock: Duration,
    compiling: Vec<ConfigId>,
    measured: Vec<ConfigId>,
    abandoned: Vec<ConfigId>,
    submitted: usize,
}

impl Backend for SlowCompiles {
    fn capacity(&self) -> usize {
        4
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        self.submitted += 1;
        if self.submitted % 4 == 1 {
            self.measured.push(id);
        } else {
            self.compiling.push(id);
        }
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        Err(BackendError::Misuse("a run with a time limit waits with next_within"))
    }

    fn next_within(&mut self, patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        self.clock += patience;
        Ok(self.measured.pop().map(|id| (id, Evaluation::ok(1.0, vec![1.0], Costs::default()))))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }

    fn abandon_unstarted(&mut self) -> Vec<ConfigId> {
        self.abandoned = std::mem::take(&mut self.compiling);
        self.abandoned.clone()
    }
}

/// A time limit ends the run when it runs out, not when the compiles in flight end:
/// the configurations still compiling are given up, those measured count.
#[test]
fn a_time_limit_gives_up_the_compiles_in_flight() {
    let landscape = landscape("pnpoly_RTX_3090.json.gz");
    let space = landscape.space().expect("space");
    let mut backend =
        SlowCompiles { clock: Duration::ZERO, compiling: vec![], measured: vec![], abandoned: vec![], submitted: 0 };
    let strategy = build_strategy("random_sample", &Default::default()).expect("strategy");
    let budget = Budget { time_limit: Some(Duration::from_secs(1)), ..Budget::default() };
    let summary = run_on(&landscape, &space, strategy, &mut backend, budget);
    assert_eq!(summary.stop, StopReason::TimeLimit);
    assert!(summary.evaluations >= 1, "the measured configurations count");
    assert!(!backend.abandoned.is_empty(), "the compiles in flight were given up");
    assert!(backend.abandoned.iter().all(|id| summary.trace.iter().all(|p| p.id != *id)));
    assert!(backend.clock <= Duration::from_millis(1100), "ended at the limit, not later: {:?}", backend.clock);
}
