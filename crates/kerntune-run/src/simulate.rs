//! A tuning on a recorded landscape, replayed as if it were a device: no GPU, each
//! evaluation returns its recorded outcome and advances a simulated clock by its cost.

use kerntune_engine::{Event, SearchOptions, SimBackend, Summary, Tuner, DEFAULT_STRATEGY};
use kerntune_space::Space;
use kerntune_store::{Landscape, Store};

use crate::{RunError, Transfer};

/// What `kerntune simulate` asks for.
#[derive(Debug)]
pub struct Simulation<'a> {
    pub landscape: &'a Landscape,
    pub space: &'a Space,
    pub search: SearchOptions,
    /// Evaluations found there are reused and a stopped run resumes; without it nothing
    /// is kept.
    pub store: Option<&'a Store>,
    /// Replay each evaluation's recorded cost in real time, this many times faster.
    pub realtime: Option<f64>,
    /// Evaluations in flight at once (1: one after another).
    pub batch: usize,
    /// In a many-shape simulation, the size this landscape stands for and the sizes
    /// replayed before it (their tunings in `store`), as on a GPU.
    pub transfer: Option<Transfer>,
}

/// The run's summary with the settings it ran with.
#[derive(Debug)]
pub struct SimulationSummary {
    pub summary: Summary,
    pub strategy: String,
    pub seed: u64,
    /// The tuning's number in `store`, where there is one.
    pub tuning: Option<i64>,
}

impl Simulation<'_> {
    /// The settled search (strategy built, budget settled), for fronts to show before they
    /// [`Simulation::run`] it.
    pub fn search(&self) -> Result<kerntune_engine::Search, RunError> {
        if let Some(speed) = self.realtime.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(RunError::Realtime(speed));
        }
        Ok(self.search.resolve(DEFAULT_STRATEGY)?)
    }

    pub fn run(
        &self,
        search: kerntune_engine::Search,
        on_event: &mut dyn FnMut(Event<'_>),
        interrupt: &dyn Fn() -> bool,
    ) -> Result<SimulationSummary, RunError> {
        let store = self.store.map(|s| s.tuning(&self.landscape.tuning()).map(|t| (s, t))).transpose()?;
        let search = match (&self.transfer, store) {
            (Some(transfer), Some((store, _))) => {
                let options = self.search.strategy_options_map();
                transfer.apply(search, &options, self.space, store, self.landscape.objective.higher_is_better)?
            }
            _ => search,
        };
        let mut backend = SimBackend::new(self.landscape, self.space)?.with_batch(self.batch);
        if let Some(speed) = self.realtime {
            backend = backend.with_realtime_speed(speed);
        }
        let summary = Tuner {
            space: self.space,
            strategy: search.strategy,
            backend: &mut backend,
            store,
            reuse_stored: true,
            objective: self.landscape.objective.clone(),
            budget: search.budget,
            seed: search.seed,
            interrupt: Some(interrupt),
        }
        .run(on_event)?;
        Ok(SimulationSummary {
            summary,
            strategy: search.strategy_name,
            seed: search.seed,
            tuning: store.map(|(_, t)| t.get()),
        })
    }
}
