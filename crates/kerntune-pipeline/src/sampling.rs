//! The decisions of the benchmark worker's timing, apart from the GPU: how many samples to
//! take next and when to stop ([`Sampling`]), whether the clocks moved enough during the
//! samples to take them again ([`ClockWatch`]), and when the clocks have settled before
//! the first configuration is timed ([`Settling`]). The worker's loop in [`crate::bench`]
//! calls these and nothing else to decide, so tests of recorded sequences cover what runs
//! on the GPU.

use std::time::Duration;

use kerntune_device::nvml::{ClockReading, ThrottleReasons};
use kerntune_engine::stats::{clearly_slower, median, relative_half_width};
use serde::{Deserialize, Serialize};

use crate::early_stop::Bar;
use crate::timing::Timing;

/// What the sampling loop does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// Time this many more launches.
    Take(usize),
    /// The samples answer: the interval is tight, or the time cap or `max_samples` is reached.
    Enough,
    /// Every sample exceeds the bar's factor times the best median so far.
    ClearlySlower(Bar),
}

/// The stopping rule of one configuration's samples under a [`Timing`].
#[derive(Debug, Clone)]
pub(crate) struct Sampling<'a> {
    timing: &'a Timing,
    /// The early-stop bar, where the pipeline sent one.
    early_stop: Option<Bar>,
}

impl<'a> Sampling<'a> {
    pub(crate) fn new(timing: &'a Timing, early_stop: Option<Bar>) -> Sampling<'a> {
        Sampling { timing, early_stop }
    }

    /// The next step after `samples` (milliseconds, in the order taken).
    pub(crate) fn next(&self, samples: &[f64]) -> Step {
        let timing = self.timing;
        if let Some(bar) = self.early_stop {
            if !samples.is_empty() && clearly_slower(samples, bar.best_ms, bar.factor, timing.early_stop_samples) {
                return Step::ClearlySlower(bar);
            }
        }
        let taken = samples.len();
        let spent_ms: f64 = samples.iter().sum();
        let cap_ms = timing.time_cap.as_secs_f64() * 1e3;
        if taken >= timing.min_samples.max(1)
            && (relative_half_width(samples) <= timing.ci_target || spent_ms >= cap_ms || taken >= timing.max_samples)
        {
            return Step::Enough;
        }
        Step::Take(if taken == 0 {
            // A few first, so that a clearly slower configuration costs only those.
            if self.early_stop.is_some() {
                timing.early_stop_samples.min(timing.min_samples)
            } else {
                timing.min_samples
            }
        } else if taken < timing.min_samples {
            timing.min_samples - taken
        } else {
            // Enough to move the interval, within what the time cap leaves.
            let affordable = ((cap_ms - spent_ms) / median(samples).max(1e-6)).floor().max(1.0) as usize;
            (taken / 2).max(4).min(affordable).min(timing.max_samples.saturating_sub(taken).max(1))
        })
    }
}

/// A change of the SM clock by more than this fraction during the samples takes them again.
pub(crate) const CLOCK_TOLERANCE: f64 = 0.05;

/// What the clocks did while one configuration was timed, as the evaluation reports it
/// (each field lands in the evaluation's metrics under its own name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Clocks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_before: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_after: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c_before: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c_after: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_mw: Option<u32>,
    /// Every throttle reason read before or after any attempt.
    #[serde(default)]
    pub throttle_reasons: Vec<String>,
    /// The samples were taken again because the clocks moved the first time.
    #[serde(default)]
    pub remeasured: bool,
    /// Why the first samples were discarded, and their median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded_median_ms: Option<f64>,
    /// The clocks moved during the second attempt too; its samples are kept.
    #[serde(default, rename = "clocks_unsteady")]
    pub unsteady: bool,
}

/// The range the clocks kept over longer timed work (the interleaved rounds of re-timing
/// and the schedule's A/B), read before each block and after the last. Interleaving puts
/// both kernels under the same clocks, so a move does not bias their ratio; it is reported
/// so that a reader sees under what conditions the ratio was taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockSpan {
    pub sm_mhz_low: Option<u32>,
    pub sm_mhz_high: Option<u32>,
    pub temperature_c_high: Option<u32>,
    /// Every throttle reason that slows the GPU, read at any reading.
    #[serde(default)]
    pub throttle_reasons: Vec<String>,
}

impl ClockSpan {
    /// Widens the span by one reading.
    pub(crate) fn add(&mut self, reading: &ClockReading) {
        self.sm_mhz_low = either(self.sm_mhz_low, reading.sm_mhz, u32::min);
        self.sm_mhz_high = either(self.sm_mhz_high, reading.sm_mhz, u32::max);
        self.temperature_c_high = either(self.temperature_c_high, reading.temperature_c, u32::max);
        let slowing = reading.reasons.map(ThrottleReasons::slowing).unwrap_or_default();
        self.add_reasons(&slowing.names());
    }

    /// Both spans in one.
    pub fn merge(mut self, other: &ClockSpan) -> ClockSpan {
        self.sm_mhz_low = either(self.sm_mhz_low, other.sm_mhz_low, u32::min);
        self.sm_mhz_high = either(self.sm_mhz_high, other.sm_mhz_high, u32::max);
        self.temperature_c_high = either(self.temperature_c_high, other.temperature_c_high, u32::max);
        self.add_reasons(&other.throttle_reasons);
        self
    }

    fn add_reasons(&mut self, names: &[String]) {
        for name in names {
            if !self.throttle_reasons.contains(name) {
                self.throttle_reasons.push(name.clone());
            }
        }
    }

    /// Whether the SM clock moved by more than the tolerance that has samples taken again.
    pub fn moved(&self) -> bool {
        self.sm_spread().is_some_and(|spread| spread > CLOCK_TOLERANCE)
    }

    /// How far the SM clock moved, as a fraction of its highest reading.
    pub fn sm_spread(&self) -> Option<f64> {
        let (low, high) = (self.sm_mhz_low?, self.sm_mhz_high?);
        (high > 0).then(|| f64::from(high - low) / f64::from(high))
    }
}

/// `pick` of both values where both exist, else whichever does.
fn either(a: Option<u32>, b: Option<u32>, pick: fn(u32, u32) -> u32) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

/// What to do with samples after comparing the readings around them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockVerdict {
    Keep,
    /// Discard the samples and take them again (once per configuration).
    Remeasure,
    /// The clocks moved again: keep the samples, marked unsteady.
    KeepUnsteady,
}

/// Judges the readings around each attempt at one configuration's samples and keeps the
/// report.
#[derive(Debug, Default)]
pub(crate) struct ClockWatch {
    report: Clocks,
    seen: ThrottleReasons,
    attempts: usize,
}

impl ClockWatch {
    /// The verdict on samples taken between `before` and `after`, whose median is `median_ms`.
    pub(crate) fn judge(&mut self, before: ClockReading, after: ClockReading, median_ms: f64) -> ClockVerdict {
        self.attempts += 1;
        for reasons in [before.reasons, after.reasons].into_iter().flatten() {
            self.seen.0 |= reasons.0;
        }
        self.report = Clocks {
            sm_mhz_before: before.sm_mhz,
            sm_mhz_after: after.sm_mhz,
            memory_mhz: after.memory_mhz,
            temperature_c_before: before.temperature_c,
            temperature_c_after: after.temperature_c,
            power_mw: after.power_mw,
            throttle_reasons: self.seen.names(),
            ..std::mem::take(&mut self.report)
        };
        let Some(change) = clock_change(&before, &after) else { return ClockVerdict::Keep };
        if self.attempts == 1 {
            self.report.remeasured = true;
            self.report.remeasure_reason = Some(change);
            self.report.discarded_median_ms = Some(median_ms).filter(|m| m.is_finite());
            ClockVerdict::Remeasure
        } else {
            self.report.unsteady = true;
            ClockVerdict::KeepUnsteady
        }
    }

    pub(crate) fn report(&self) -> Clocks {
        self.report.clone()
    }
}

/// How the clocks moved between two readings, where it is enough to distrust the samples
/// between them: the SM clock changed by more than [`CLOCK_TOLERANCE`], or a power or
/// thermal throttle reason appeared.
pub(crate) fn clock_change(before: &ClockReading, after: &ClockReading) -> Option<String> {
    let mut changes = Vec::new();
    if let (Some(from), Some(to)) = (before.sm_mhz, after.sm_mhz) {
        if from > 0 && (f64::from(to) - f64::from(from)).abs() / f64::from(from) > CLOCK_TOLERANCE {
            changes.push(format!("SM clock {from} -> {to} MHz"));
        }
    }
    let slowing_before = before.reasons.unwrap_or_default().slowing();
    let appeared = ThrottleReasons(after.reasons.unwrap_or_default().slowing().0 & !slowing_before.0);
    if !appeared.is_empty() {
        changes.push(format!("{} appeared", appeared.names().join(", ")));
    }
    (!changes.is_empty()).then(|| changes.join("; "))
}

/// Two consecutive SM clock readings within this fraction of each other are steady.
pub(crate) const SETTLED_TOLERANCE: f64 = 0.01;
/// The longest the worker runs a kernel waiting for the clocks to settle.
pub(crate) const SETTLE_CAP: Duration = Duration::from_millis(200);
/// Kernel time launched between two readings while settling.
pub(crate) const SETTLE_BATCH_MS: f64 = 20.0;

/// Whether the clocks have settled, from successive SM clock readings taken while the
/// kernel runs in batches before the first configuration's samples.
#[derive(Debug, Default)]
pub(crate) struct Settling {
    previous: Option<u32>,
}

impl Settling {
    /// After a reading of `sm_mhz` taken `elapsed` after settling began: done or not. No
    /// reading (no NVML, or no clock) is done at once: there is nothing to wait for.
    pub(crate) fn settled(&mut self, sm_mhz: Option<u32>, elapsed: Duration) -> bool {
        let Some(now) = sm_mhz else { return true };
        let steady = self.previous.is_some_and(|previous| {
            previous > 0 && (f64::from(now) - f64::from(previous)).abs() / f64::from(previous) <= SETTLED_TOLERANCE
        });
        self.previous = Some(now);
        steady || elapsed >= SETTLE_CAP
    }

    /// Launches per batch for a kernel of `kernel_ms`.
    pub(crate) fn batch(kernel_ms: f64) -> usize {
        (SETTLE_BATCH_MS / kernel_ms.max(1e-3)).ceil().clamp(1.0, 10_000.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing { min_samples: 7, max_samples: 40, ci_target: 0.01, ..Timing::default() }
    }

    /// The bar of a best median of `best_ms` at a factor of 1.1.
    fn bar(best_ms: f64) -> Option<Bar> {
        Some(Bar { best_ms, factor: 1.1 })
    }

    /// Runs the sampling rule over a recorded sequence as the worker would: the samples of
    /// each `Take` come from `recorded` in order. Returns the samples taken and the last step.
    fn replay(sampling: &Sampling<'_>, recorded: impl IntoIterator<Item = f64>) -> (Vec<f64>, Step) {
        let mut recorded = recorded.into_iter();
        let mut samples = Vec::new();
        loop {
            match sampling.next(&samples) {
                Step::Take(count) => {
                    assert!(count > 0, "a step that takes nothing would loop forever");
                    samples.extend(recorded.by_ref().take(count));
                }
                step => return (samples, step),
            }
        }
    }

    #[test]
    fn a_steady_sequence_stops_at_min_samples() {
        let timing = timing();
        let (samples, step) = replay(&Sampling::new(&timing, None), std::iter::repeat(1.0));
        assert_eq!((samples.len(), step), (7, Step::Enough));
    }

    #[test]
    fn a_noisy_sequence_runs_to_max_samples() {
        let timing = timing();
        let noisy = (0..).map(|i| if i % 2 == 0 { 1.0 } else { 1.5 });
        let (samples, step) = replay(&Sampling::new(&timing, None), noisy);
        assert_eq!((samples.len(), step), (40, Step::Enough));
    }

    #[test]
    fn a_noisy_sequence_stops_at_the_time_cap() {
        let timing = Timing { time_cap: Duration::from_millis(20), ..timing() };
        let noisy = (0..).map(|i| if i % 2 == 0 { 1.0 } else { 1.5 });
        let (samples, step) = replay(&Sampling::new(&timing, None), noisy);
        assert_eq!(step, Step::Enough);
        assert!(samples.len() < 40 && samples.iter().sum::<f64>() >= 20.0, "{samples:?}");
    }

    #[test]
    fn a_clearly_slower_configuration_stops_after_the_early_stop_samples() {
        let timing = timing();
        let (samples, step) = replay(&Sampling::new(&timing, bar(1.0)), std::iter::repeat(1.5));
        assert_eq!((samples.len(), step), (2, Step::ClearlySlower(bar(1.0).unwrap())));
    }

    #[test]
    fn a_configuration_near_the_best_is_not_stopped_early() {
        let timing = timing();
        let (samples, step) = replay(&Sampling::new(&timing, bar(1.0)), std::iter::repeat(1.05));
        assert_eq!((samples.len(), step), (7, Step::Enough));
    }

    #[test]
    fn without_early_stop_the_first_step_takes_min_samples() {
        let timing = timing();
        assert_eq!(Sampling::new(&timing, None).next(&[]), Step::Take(7));
    }

    fn reading(sm_mhz: u32, reasons: u64) -> ClockReading {
        ClockReading {
            sm_mhz: Some(sm_mhz),
            memory_mhz: Some(2619),
            temperature_c: Some(40),
            power_mw: Some(300_000),
            reasons: Some(ThrottleReasons(reasons)),
        }
    }

    #[test]
    fn a_clock_span_keeps_the_range_and_the_slowing_reasons() {
        let mut span = ClockSpan::default();
        span.add(&reading(1980, 0x1));
        span.add(&reading(1755, 0x20));
        span.add(&reading(1890, 0x20));
        assert_eq!((span.sm_mhz_low, span.sm_mhz_high), (Some(1755), Some(1980)));
        assert_eq!(span.throttle_reasons.len(), 1, "gpu_idle does not slow a busy GPU: {:?}", span.throttle_reasons);
        assert!((span.sm_spread().unwrap() - 225.0 / 1980.0).abs() < 1e-12);
        assert!(span.moved());
        let mut other = ClockSpan::default();
        other.add(&reading(1600, 0));
        let merged = span.clone().merge(&other);
        assert_eq!((merged.sm_mhz_low, merged.sm_mhz_high), (Some(1600), Some(1980)));
        assert_eq!(merged.throttle_reasons, span.throttle_reasons);
        assert_eq!(ClockSpan::default().sm_spread(), None);
    }

    #[test]
    fn steady_clocks_keep_the_samples() {
        let mut watch = ClockWatch::default();
        assert_eq!(watch.judge(reading(1980, 0), reading(1965, 0x1), 1.0), ClockVerdict::Keep);
        let report = watch.report();
        assert!(!report.remeasured && !report.unsteady);
        assert_eq!((report.sm_mhz_before, report.sm_mhz_after), (Some(1980), Some(1965)));
        assert_eq!(report.throttle_reasons, ["gpu_idle"]);
    }

    #[test]
    fn a_clock_drop_triggers_one_remeasurement() {
        let mut watch = ClockWatch::default();
        assert_eq!(watch.judge(reading(1980, 0), reading(1755, 0), 1.2), ClockVerdict::Remeasure);
        assert_eq!(watch.judge(reading(1755, 0), reading(1750, 0), 1.25), ClockVerdict::Keep);
        let report = watch.report();
        assert!(report.remeasured && !report.unsteady);
        assert_eq!(report.remeasure_reason.as_deref(), Some("SM clock 1980 -> 1755 MHz"));
        assert_eq!(report.discarded_median_ms, Some(1.2));
        assert_eq!(report.sm_mhz_before, Some(1755));
    }

    #[test]
    fn clocks_that_move_twice_keep_the_second_samples_marked_unsteady() {
        let mut watch = ClockWatch::default();
        assert_eq!(watch.judge(reading(1980, 0), reading(1600, 0), 1.0), ClockVerdict::Remeasure);
        assert_eq!(watch.judge(reading(1600, 0), reading(1980, 0), 1.0), ClockVerdict::KeepUnsteady);
        let report = watch.report();
        assert!(report.remeasured && report.unsteady);
    }

    #[test]
    fn a_thermal_reason_that_appears_triggers_a_remeasurement() {
        let mut watch = ClockWatch::default();
        assert_eq!(watch.judge(reading(1980, 0x1), reading(1975, 0x20), 1.0), ClockVerdict::Remeasure);
        let report = watch.report();
        assert_eq!(report.remeasure_reason.as_deref(), Some("sw_thermal_slowdown appeared"));
        assert_eq!(report.throttle_reasons, ["gpu_idle", "sw_thermal_slowdown"]);
    }

    #[test]
    fn a_power_cap_present_throughout_or_an_idle_reason_is_no_change() {
        assert_eq!(clock_change(&reading(1980, 0x4), &reading(1980, 0x4)), None);
        assert_eq!(clock_change(&reading(1980, 0), &reading(1980, 0x1 | 0x10)), None);
    }

    #[test]
    fn no_clock_readings_keep_the_samples() {
        let mut watch = ClockWatch::default();
        let nothing = ClockReading::default();
        assert_eq!(watch.judge(nothing, nothing, 1.0), ClockVerdict::Keep);
        assert_eq!(watch.report(), Clocks::default());
    }

    #[test]
    fn the_report_names_the_metrics_as_they_are_stored() {
        let mut watch = ClockWatch::default();
        watch.judge(reading(1980, 0), reading(1600, 0), 1.0);
        watch.judge(reading(1600, 0), reading(1980, 0), 1.0);
        let json = serde_json::to_value(watch.report()).unwrap_or_default();
        assert_eq!(json["clocks_unsteady"], true);
        assert_eq!(json["remeasured"], true);
        assert_eq!(json["sm_mhz_after"], 1980);
    }

    #[test]
    fn settling_ends_at_two_readings_within_one_percent() {
        let mut settling = Settling::default();
        let at = Duration::from_millis;
        assert!(!settling.settled(Some(1410), at(20)));
        assert!(!settling.settled(Some(1755), at(40)));
        assert!(!settling.settled(Some(1950), at(60)));
        assert!(settling.settled(Some(1965), at(80)));
    }

    #[test]
    fn settling_ends_at_the_cap_while_clocks_still_climb() {
        let mut settling = Settling::default();
        assert!(!settling.settled(Some(1000), Duration::from_millis(100)));
        assert!(settling.settled(Some(1500), SETTLE_CAP));
    }

    #[test]
    fn settling_without_a_clock_reading_ends_at_once() {
        assert!(Settling::default().settled(None, Duration::ZERO));
    }

    #[test]
    fn a_settling_batch_covers_about_twenty_milliseconds() {
        assert_eq!(Settling::batch(0.01), 2000);
        assert_eq!(Settling::batch(50.0), 1);
        assert_eq!(Settling::batch(0.0), 10_000);
    }
}
