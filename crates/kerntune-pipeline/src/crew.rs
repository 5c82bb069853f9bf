//! Workers kept from one tuning to the next in one process. A model's GEMMs and a
//! many-shape run's sizes are tunings one after another, and each used to start its own
//! compile workers (a Python that imports Triton, whose first compile then pays Triton's
//! own start) and benchmark workers (a GPU context): seconds per tuning, more than a
//! small search itself takes. A [`Crew`] is those workers, idle, as a finished tuning
//! leaves them; the next tuning that asks for the same workers ([`Crew::fits`]) sets the
//! benchmark workers up with its own data and sends the compile workers its own requests
//! (a Triton request names the kernel setup it needs, which the worker loads when it
//! changes). A process keeps at most one crew, in a [`Kept`], for as long as it asks to.

use std::sync::{Arc, Mutex};

use kerntune_device::DeviceInfo;
use kerntune_engine::BackendError;

use crate::backend::PipelineOptions;
use crate::pool::{CompileLimit, CompilePool};
use crate::process::{Hub, Worker, WorkerCommand};
use crate::protocol::Setup;

/// Idle workers: a benchmark worker per GPU, set up with the last tuning's data, and a
/// compile pool with nothing queued. Dropping it stops them.
#[derive(Debug)]
pub struct Crew {
    pub(crate) hub: Arc<Hub>,
    /// In the order of the GPUs of the tuning that left them.
    pub(crate) hands: Vec<Hand>,
    pub(crate) pool: CompilePool,
    pub(crate) bench_command: WorkerCommand,
    /// What the benchmark workers are set up with (`None`: started ahead, not set up yet).
    pub(crate) setup: Option<Setup>,
}

/// One GPU's benchmark worker, started (and, once it said so, ready on the GPU `info`).
#[derive(Debug)]
pub(crate) struct Hand {
    pub ordinal: usize,
    pub worker: Worker,
    pub info: Option<DeviceInfo>,
}

impl Crew {
    /// The workers `options` asks for, started ahead of a tuning, which sets them up.
    pub fn start(options: &PipelineOptions) -> Result<Crew, BackendError> {
        // The tuning that takes the crew holds its compiles to its own limit (`retarget`).
        let unused = CompileLimit::new(std::time::Duration::MAX, false);
        let (hub, hands, pool) = crate::backend::spawn(options, unused, options.compile_workers)?;
        Ok(Crew { hub, hands, pool, bench_command: options.bench_worker.clone(), setup: None })
    }

    /// Whether these are the workers `options` would start: the same programs, the same
    /// GPUs in the same order, no more compile workers (a pool with fewer grows while
    /// compiles hold the GPUs back, see `Language::compile_workers_to_start`).
    pub fn fits(&self, options: &PipelineOptions) -> bool {
        self.bench_command == options.bench_worker
            && self.pool.command() == &options.compile_worker
            && self.pool.workers() <= options.compile_workers.max(1)
            && self.hands.iter().map(|h| h.ordinal).eq(options.devices.iter().copied())
    }

    /// The workers, for a tuning whose compiles are held to `limit`.
    pub(crate) fn retarget(self, limit: CompileLimit) -> Option<(Arc<Hub>, Vec<Hand>, CompilePool)> {
        let Crew { hub, hands, pool, .. } = self;
        Some((hub, hands, pool.retarget(limit)?))
    }
}

/// Where a process keeps a crew between its tunings (one at most).
#[derive(Debug, Default)]
pub struct Kept(Mutex<Option<Crew>>);

impl Kept {
    pub const fn new() -> Kept {
        Kept(Mutex::new(None))
    }

    /// The kept crew, if any; it is no longer kept.
    pub fn take(&self) -> Option<Crew> {
        self.0.lock().ok().and_then(|mut kept| kept.take())
    }

    /// Keeps `crew`; a crew kept before stops.
    pub fn put(&self, crew: Crew) {
        let older = self.0.lock().ok().and_then(|mut kept| kept.replace(crew));
        drop(older);
    }

    /// Stops the kept crew's workers; whether there was one.
    pub fn release(&self) -> bool {
        self.take().is_some()
    }
}
