//! Energy and power per launch, from NVML's energy counter, apart from the GPU: the
//! benchmark worker hands [`measure`] a way to run launches and a [`Meter`], so tests of
//! a fake counter cover the arithmetic that runs on the GPU.
//!
//! Why an extra block of launches, and why this long: NVML's total-energy counter
//! (`nvmlDeviceGetTotalEnergyConsumption`, millijoules) is updated by the driver only
//! every few tens of milliseconds (about 20 to 100 ms depending on the GPU), so the
//! difference of two readings around the timed samples (often a few milliseconds of
//! kernel time) is mostly zero or one whole update. Instead the kernel runs back to back
//! in short batches, and the block starts and ends at counter updates: the worker waits
//! for the counter to move once (the GPU already under the kernel's load), counts
//! launches from there for at least [`ENERGY_BLOCK`] and [`MIN_BATCHES`] batches, and
//! stops at the next update. The energy between two updates is then exact up to the
//! counter's own accuracy, and the launches counted differ from those inside it by less
//! than one batch in all (the two ends' errors have opposite signs): a batch is
//! [`ENERGY_BATCH_MS`] of kernel time or one launch, so at most 2% of a 500 ms block, or
//! 2% of a longer kernel's block of 50 launches. The block runs only when an energy
//! objective or an observer asks for it.
//!
//! The block has no L2 flush between launches (each one sees what the previous left in
//! L2), as a kernel run back to back in an application does, and as the long run of
//! `bench/energy_timing.py` does when it checks these figures against the counter.

use std::time::Duration;

use kerntune_device::nvml::{ClockReading, Gauge};
use serde::{Deserialize, Serialize};

/// The shortest span of counter updates an energy figure is taken over.
pub(crate) const ENERGY_BLOCK: Duration = Duration::from_millis(500);
/// Kernel time launched between two counter readings.
pub(crate) const ENERGY_BATCH_MS: f64 = 10.0;
/// The fewest batches a block counts, so that one batch (one launch of a long kernel) is
/// a small share of it.
pub(crate) const MIN_BATCHES: u64 = 50;
/// How long to wait for the counter to move before concluding it does not.
pub(crate) const COUNTER_PATIENCE: Duration = Duration::from_millis(500);

/// What reads the GPU's energy counter and clocks: NVML's [`Gauge`], or a test's fake.
pub(crate) trait Meter {
    /// Energy since the driver loaded, in millijoules; `None` where it is not reported.
    fn energy_mj(&self) -> Option<u64>;
    fn read(&self) -> ClockReading;
}

impl Meter for Gauge {
    fn energy_mj(&self) -> Option<u64> {
        Gauge::energy_mj(self)
    }

    fn read(&self) -> ClockReading {
        Gauge::read(self)
    }
}

/// Energy and power of one configuration, per launch, with the clocks at the end of the
/// block; each field lands in the evaluation's metrics under its own name.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    /// Joules per launch: the counter's difference over the block / launches in it.
    pub energy_J: f64,
    /// Mean power over the block, watts.
    pub power_W: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_MHz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_MHz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_C: Option<u32>,
    /// Launches and wall time of the block the figures come from.
    pub energy_launches: u64,
    pub energy_block_ms: f64,
}

/// Launches per batch for a kernel of `kernel_ms`.
pub(crate) fn batch(kernel_ms: f64) -> usize {
    (ENERGY_BATCH_MS / kernel_ms.max(1e-4)).ceil().clamp(1.0, 100_000.0) as usize
}

/// Runs one energy block: `run(n)` launches the kernel `n` times back to back and waits
/// for them; `now` is a monotonic clock. `Ok(None)` when the counter is not read or does
/// not move (then there is no energy figure, rather than a wrong one).
pub(crate) fn measure<E>(
    meter: &dyn Meter,
    kernel_ms: f64,
    now: &mut dyn FnMut() -> Duration,
    run: &mut dyn FnMut(usize) -> Result<(), E>,
) -> Result<Option<Energy>, E> {
    let batch = batch(kernel_ms);
    let Some(mut last) = meter.energy_mj() else { return Ok(None) };
    // Up to the first update, under load.
    let waiting_since = now();
    loop {
        run(batch)?;
        let Some(reading) = meter.energy_mj() else { return Ok(None) };
        if reading != last {
            last = reading;
            break;
        }
        if now().saturating_sub(waiting_since) > COUNTER_PATIENCE {
            return Ok(None);
        }
    }
    let (start_mj, started) = (last, now());
    let (mut launches, mut batches) = (0u64, 0u64);
    let mut moved_at = Duration::ZERO;
    let ended = loop {
        run(batch)?;
        launches += batch as u64;
        batches += 1;
        let Some(reading) = meter.energy_mj() else { return Ok(None) };
        let elapsed = now().saturating_sub(started);
        if reading != last {
            last = reading;
            moved_at = elapsed;
            if elapsed >= ENERGY_BLOCK && batches >= MIN_BATCHES {
                break elapsed;
            }
        }
        if elapsed.saturating_sub(moved_at) > COUNTER_PATIENCE {
            return Ok(None);
        }
    };
    let joules = last.saturating_sub(start_mj) as f64 / 1e3;
    let clocks = meter.read();
    Ok(Some(Energy {
        energy_J: joules / launches as f64,
        power_W: joules / ended.as_secs_f64(),
        clock_MHz: clocks.sm_mhz,
        memory_clock_MHz: clocks.memory_mhz,
        temperature_C: clocks.temperature_c,
        energy_launches: launches,
        energy_block_ms: ended.as_secs_f64() * 1e3,
    }))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A GPU drawing `watts` while a kernel of `kernel_ms` runs, whose energy counter the
    /// driver updates every `period_ms`, first at `phase_ms`; simulated time advances by
    /// the kernel time of each launch and `overhead_ms` per batch (launch and sync).
    struct FakeGpu {
        watts: f64,
        kernel_ms: f64,
        period_ms: f64,
        phase_ms: f64,
        overhead_ms: f64,
        now_ms: Cell<f64>,
        /// Energy actually used, in joules, and launches actually run.
        used_j: Cell<f64>,
        launches: Cell<u64>,
    }

    impl FakeGpu {
        fn new(watts: f64, kernel_ms: f64, period_ms: f64, phase_ms: f64) -> FakeGpu {
            FakeGpu {
                watts,
                kernel_ms,
                period_ms,
                phase_ms,
                overhead_ms: 0.0,
                now_ms: Cell::new(0.0),
                used_j: Cell::new(0.0),
                launches: Cell::new(0),
            }
        }

        fn run(&self, launches: usize) -> Result<(), String> {
            let busy_ms = launches as f64 * self.kernel_ms + self.overhead_ms;
            self.now_ms.set(self.now_ms.get() + busy_ms);
            self.used_j.set(self.used_j.get() + self.watts * busy_ms / 1e3);
            self.launches.set(self.launches.get() + launches as u64);
            Ok(())
        }

        fn now(&self) -> Duration {
            Duration::from_secs_f64(self.now_ms.get() / 1e3)
        }
    }

    impl Meter for FakeGpu {
        fn energy_mj(&self) -> Option<u64> {
            // The energy at the last update: the counter holds still between updates.
            let t = self.now_ms.get();
            let updates = ((t - self.phase_ms) / self.period_ms).floor().max(0.0);
            let updated_at = if t < self.phase_ms { 0.0 } else { self.phase_ms + updates * self.period_ms };
            Some((self.watts * updated_at).round() as u64)
        }

        fn read(&self) -> ClockReading {
            ClockReading { sm_mhz: Some(1980), memory_mhz: Some(2619), temperature_c: Some(45), ..Default::default() }
        }
    }

    fn run_block(gpu: &FakeGpu) -> Option<Energy> {
        let measured = measure(gpu, gpu.kernel_ms, &mut || gpu.now(), &mut |n| gpu.run(n));
        measured.expect("the fake never fails")
    }

    #[test]
    fn energy_per_launch_is_within_two_percent_whatever_the_counters_period_and_phase() {
        for (kernel_ms, period_ms, phase_ms) in
            [(0.01, 20.0, 3.0), (0.5, 100.0, 70.0), (1.3, 50.0, 0.0), (7.0, 33.0, 12.5), (0.003, 25.0, 24.9)]
        {
            let gpu = FakeGpu::new(300.0, kernel_ms, period_ms, phase_ms);
            let energy = run_block(&gpu).expect("the counter moves");
            let truth = 300.0 * kernel_ms / 1e3;
            let error = (energy.energy_J - truth).abs() / truth;
            assert!(error < 0.02, "kernel {kernel_ms} ms, period {period_ms} ms: {} J vs {truth} J", energy.energy_J);
            assert!((energy.power_W - 300.0).abs() / 300.0 < 0.02, "{} W", energy.power_W);
            let block_ms = 200f64.max(50.0 * kernel_ms * batch(kernel_ms) as f64);
            assert!(
                energy.energy_block_ms >= block_ms && energy.energy_block_ms < block_ms + period_ms + kernel_ms + 3.0
            );
            assert_eq!((energy.clock_MHz, energy.temperature_C), (Some(1980), Some(45)));
        }
    }

    #[test]
    fn a_block_shorter_than_the_update_period_would_be_wrong_which_is_why_blocks_are_long() {
        // The same arithmetic over only two batches, without waiting for updates: the
        // counter's difference is zero or a whole update, far from the truth.
        let gpu = FakeGpu::new(300.0, 0.5, 100.0, 70.0);
        let before = gpu.energy_mj().unwrap_or(0);
        gpu.run(2 * batch(0.5)).expect("runs");
        let naive = (gpu.energy_mj().unwrap_or(0) - before) as f64 / 1e3 / (2 * batch(0.5)) as f64;
        assert!((naive - 0.15e-3).abs() / 0.15e-3 > 0.5, "{naive}");
    }

    #[test]
    fn per_launch_figures_summed_over_a_long_run_match_the_counter() {
        // Blocks back to back, as in a long run of evaluations (with launch overhead, so
        // the GPU idles a little between batches): each block's figure times every launch
        // made while it ran adds up to the counter's difference over the whole run, within
        // one counter update at the start (the run's end is at an update).
        let gpu = FakeGpu { overhead_ms: 0.02, ..FakeGpu::new(250.0, 0.2, 40.0, 5.0) };
        gpu.run(3).expect("runs");
        let counter_before = gpu.energy_mj().unwrap_or(0);
        let mut summed_j = 0.0;
        for _ in 0..20 {
            let launches_before = gpu.launches.get();
            let energy = run_block(&gpu).expect("the counter moves");
            summed_j += energy.energy_J * (gpu.launches.get() - launches_before) as f64;
        }
        let counter_j = (gpu.energy_mj().unwrap_or(0) - counter_before) as f64 / 1e3;
        assert!(counter_j > 4.0, "a long run: {counter_j} J");
        let ratio = summed_j / counter_j;
        assert!((ratio - 1.0).abs() < 0.02, "summed {summed_j} J, counter {counter_j} J");
    }

    #[test]
    fn no_counter_or_one_that_never_moves_gives_no_figure() {
        struct Stuck(Option<u64>);
        impl Meter for Stuck {
            fn energy_mj(&self) -> Option<u64> {
                self.0
            }
            fn read(&self) -> ClockReading {
                ClockReading::default()
            }
        }
        let clock = Cell::new(0.0);
        let mut now = || Duration::from_secs_f64(clock.get());
        let mut run = |_| -> Result<(), ()> {
            clock.set(clock.get() + 0.01);
            Ok(())
        };
        assert_eq!(measure(&Stuck(Some(5)), 1.0, &mut now, &mut run), Ok(None));
        assert_eq!(measure(&Stuck(None), 1.0, &mut now, &mut run), Ok(None));
    }

    #[test]
    fn a_failed_launch_ends_the_block_with_its_error() {
        let gpu = FakeGpu::new(300.0, 1.0, 20.0, 0.0);
        let outcome = measure(&gpu, 1.0, &mut || gpu.now(), &mut |_| Err::<(), _>("launch failed"));
        assert_eq!(outcome, Err("launch failed"));
    }

    #[test]
    fn a_batch_covers_about_ten_milliseconds() {
        assert_eq!(batch(0.001), 10_000);
        assert_eq!(batch(20.0), 1);
        assert_eq!(batch(0.0), 100_000);
    }
}
