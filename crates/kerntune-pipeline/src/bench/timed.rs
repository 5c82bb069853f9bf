//! The timed part of an evaluation, after the checked run: the samples, taken again once
//! if the GPU's clocks moved under them, and before the worker's first samples a wait for
//! the clocks to settle; each sample one launch, or with `[timing] graph` one CUDA graph
//! of many; then, when asked, a block of launches that measures energy and power
//! ([`crate::energy`]). Every decision is [`crate::sampling`]'s and [`crate::energy`]'s;
//! this is the GPU side.

use std::ffi::c_void;
use std::time::Instant;

use kerntune_device::driver::{Context, CudaError, Graph};
use kerntune_device::nvml::Gauge;
use kerntune_engine::stats::median;
use kerntune_store::Status;

use super::{Ended, Worker};
use crate::energy;
use crate::error::FailureKind;
use crate::protocol::{EvaluateRequest, EvaluateResult};
use crate::sampling::{ClockVerdict, ClockWatch, Sampling, Settling, Step};
use crate::timing::EnergyMode;

/// Kernel time one graph of `[timing] graph` covers: enough launches that a graph's own
/// launch overhead (a few µs) is a small share of its time.
const GRAPH_MS: f64 = 1.0;
/// The fewest and most launches captured in one graph.
const GRAPH_LAUNCHES: (f64, f64) = (20.0, 2000.0);

/// Launches captured per graph for a kernel of `kernel_ms`.
pub(super) fn graph_launches(kernel_ms: f64) -> usize {
    (GRAPH_MS / kernel_ms.max(1e-4)).ceil().clamp(GRAPH_LAUNCHES.0, GRAPH_LAUNCHES.1) as usize
}

/// Batches of the energy block queued at once (of 10 ms of kernel time each): the GPU has
/// 30 ms of work ahead of it while the host reads the counter and queues the next.
const QUEUED_BATCHES: usize = 4;

/// How the kernel under test is launched, with its parameter pointers.
type Launch<'a> = dyn Fn(&mut [*mut c_void]) -> Result<(), CudaError> + 'a;

impl Worker {
    /// Samples the kernel `launch` runs into `result` ([`Worker::sample`]), then, where the
    /// timing asks for energy, measures it in a block of its own.
    pub(super) fn time(
        &mut self,
        context: &Context,
        request: &EvaluateRequest,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        result: &mut EvaluateResult,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let sampled = self.sample(context, request, launch, pointers, result, waiting);
        // A configuration stopped early still gets its energy block: whoever asked for
        // energy reads it on every result (Kernel Tuner's observers measure every
        // configuration, and users' metrics divide by it), and the block's figures are a
        // measurement of their own, not an extrapolation of the few samples.
        let failed = sampled.as_ref().is_err_and(|ended| ended.status != Status::EarlyStopped);
        if failed || self.timing.energy == EnergyMode::Off || self.gauge.is_none() {
            return sampled;
        }
        self.ensure_events(context, QUEUED_BATCHES)
            .map_err(|e| Ended::cuda(FailureKind::Device, "creating events", e))?;
        let clock = Instant::now();
        let mut batches = 0;
        let gauge = self.gauge.as_ref().expect("checked above");
        let mut run = |launches: usize| self.queued(context, launch, pointers, launches, &mut batches, waiting);
        let measured = energy::measure(gauge, median(&result.samples), &mut || clock.elapsed(), &mut run);
        // The batches still queued run out before anything else is timed.
        context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
        result.energy = measured?;
        result.benchmark_s += clock.elapsed().as_secs_f64();
        sampled
    }

    /// Samples the kernel `launch` runs into `result`, after settling the clocks if this is
    /// the worker's first configuration, and reports the clocks where NVML reads them.
    fn sample(
        &mut self,
        context: &Context,
        request: &EvaluateRequest,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        result: &mut EvaluateResult,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let bench_start = Instant::now();
        if !self.clocks_settled {
            self.clocks_settled = true;
            self.settle_clocks(context, launch, pointers, result.verify_kernel_ms, waiting)?;
        }
        let timing = self.timing.clone();
        let sampling = Sampling::new(&timing, request.early_stop);
        // With `[timing] graph`, one graph of many launches is captured once and each
        // sample is its time over its launches. The flush comes before each graph, so
        // only its first launch starts from a cold L2, as in an application that runs a
        // kernel of a few µs many times over. The checked run's time sizes the graph (it
        // ran once, cold: an upper bound).
        let graph = if timing.graph {
            let launches = graph_launches(result.verify_kernel_ms);
            Some((self.capture(context, launch, pointers, launches)?, launches))
        } else {
            None
        };
        let mut watch = ClockWatch::default();
        loop {
            let before = self.gauge.as_ref().map(Gauge::read);
            let sampled =
                self.take_samples(context, &sampling, launch, pointers, graph.as_ref(), &mut result.samples, waiting);
            result.benchmark_s = bench_start.elapsed().as_secs_f64();
            let (Some(before), Some(gauge)) = (before, &self.gauge) else { return sampled };
            let verdict = watch.judge(before, gauge.read(), median(&result.samples));
            result.clocks = Some(watch.report());
            // A configuration stopped early may only have looked slow because the clocks
            // dropped: it is measured again too. A failure is not.
            let failed = sampled.as_ref().is_err_and(|ended| ended.status != Status::EarlyStopped);
            if verdict != ClockVerdict::Remeasure || failed {
                return sampled;
            }
            result.samples.clear();
        }
    }

    /// Times launches, or replays of `graph` (with its launches), each after an L2 flush,
    /// as [`Sampling`] asks, until it has enough or finds the kernel clearly slower than
    /// the best.
    #[allow(clippy::too_many_arguments)]
    fn take_samples(
        &mut self,
        context: &Context,
        sampling: &Sampling<'_>,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        graph: Option<&(Graph, usize)>,
        samples: &mut Vec<f64>,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        loop {
            let chunk = match sampling.next(samples) {
                Step::Take(chunk) => chunk,
                Step::Enough => return Ok(()),
                Step::ClearlySlower(bar) => {
                    return Err(Ended {
                        status: Status::EarlyStopped,
                        reason: format!(
                            "every one of {} samples (fastest {:.4} ms) exceeds {:.3} x the best median {:.4} ms",
                            samples.len(),
                            samples.iter().copied().fold(f64::INFINITY, f64::min),
                            bar.factor,
                            bar.best_ms
                        ),
                        context_lost: false,
                    })
                }
            };
            self.ensure_events(context, chunk).map_err(|e| Ended::cuda(FailureKind::Device, "creating events", e))?;
            for i in 0..chunk {
                self.flush(context).map_err(|e| Ended::cuda(FailureKind::Device, "flushing L2", e))?;
                self.reset_buffers(context)
                    .map_err(|e| Ended::cuda(FailureKind::Device, "zeroing reset_to_zero buffers", e))?;
                let (start, stop) = &self.events[i];
                start.record(context).map_err(|e| Ended::cuda(FailureKind::Device, "recording an event", e))?;
                match graph {
                    Some((graph, _)) => graph.launch(context),
                    None => launch(pointers),
                }
                .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "launching", e))?;
                stop.record(context).map_err(|e| Ended::cuda(FailureKind::Device, "recording an event", e))?;
            }
            let per_sample = graph.map_or(1, |(_, launches)| *launches);
            waiting(chunk * per_sample);
            context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
            for (start, stop) in &self.events[..chunk] {
                let elapsed =
                    start.elapsed_ms(stop).map_err(|e| Ended::cuda(FailureKind::Device, "reading an event", e))?;
                samples.push(elapsed / per_sample as f64);
            }
        }
    }

    /// A graph of `launches` launches of the kernel, each after the `reset_to_zero` buffers
    /// are zeroed.
    fn capture(
        &self,
        context: &Context,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        launches: usize,
    ) -> Result<Graph, Ended> {
        context
            .capture(&mut || {
                for _ in 0..launches {
                    self.reset_buffers(context)?;
                    launch(pointers)?;
                }
                Ok(())
            })
            .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "capturing a CUDA graph", e))
    }

    /// Runs the kernel in batches of about 20 ms until two SM clock readings agree or
    /// 200 ms have passed ([`Settling`]), so that the first configuration's samples do not
    /// see the clocks climb from idle. Without NVML it does nothing.
    fn settle_clocks(
        &self,
        context: &Context,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        kernel_ms: f64,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let Some(gauge) = &self.gauge else { return Ok(()) };
        let mut settling = Settling::default();
        let batch = Settling::batch(kernel_ms);
        let start = Instant::now();
        while !settling.settled(gauge.read().sm_mhz, start.elapsed()) {
            self.back_to_back(context, launch, pointers, batch, waiting)?;
        }
        Ok(())
    }

    /// Queues a batch of `launches` back to back and waits only for the batch queued
    /// [`QUEUED_BATCHES`] - 1 before it, so that the GPU never idles while the host reads
    /// the energy counter and queues the next (a wait after each batch left an H100 idle
    /// half the time, and the idle power in the energy per launch). `batches` counts the
    /// batches queued so far.
    fn queued(
        &self,
        context: &Context,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        launches: usize,
        batches: &mut usize,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        self.launch_batch(context, launch, pointers, launches)?;
        let events = &self.events[..QUEUED_BATCHES];
        events[*batches % QUEUED_BATCHES]
            .1
            .record(context)
            .map_err(|e| Ended::cuda(FailureKind::Device, "recording an event", e))?;
        waiting(launches * QUEUED_BATCHES);
        *batches += 1;
        if *batches >= QUEUED_BATCHES {
            events[*batches % QUEUED_BATCHES]
                .1
                .synchronize()
                .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
        }
        Ok(())
    }

    /// Queues `launches` launches of the kernel back to back, the `reset_to_zero` buffers
    /// zeroed before each.
    fn launch_batch(
        &self,
        context: &Context,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        launches: usize,
    ) -> Result<(), Ended> {
        for _ in 0..launches {
            self.reset_buffers(context)
                .map_err(|e| Ended::cuda(FailureKind::Device, "zeroing reset_to_zero buffers", e))?;
            launch(pointers).map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "launching", e))?;
        }
        Ok(())
    }

    /// Runs the kernel `launches` times back to back (no flush; the `reset_to_zero`
    /// buffers zeroed before each launch) and waits for them.
    fn back_to_back(
        &self,
        context: &Context,
        launch: &Launch<'_>,
        pointers: &mut [*mut c_void],
        launches: usize,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        self.launch_batch(context, launch, pointers, launches)?;
        waiting(launches);
        context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))
    }
}

#[cfg(test)]
mod tests {
    use super::graph_launches;

    #[test]
    fn a_graph_covers_about_a_millisecond_within_its_bounds() {
        assert_eq!(graph_launches(0.002), 500);
        assert_eq!(graph_launches(0.5), 20, "at least 20 launches, however long the kernel");
        assert_eq!(graph_launches(0.0), 2000, "an unknown time takes the most");
    }
}
