//! When a configuration's first samples may stop it: the bar ([`Bar`]) the benchmark
//! worker compares them with, and the factor of that bar in `auto` mode, taken from the
//! noise this run's own samples show ([`Noise`]) rather than from a constant.
//!
//! A configuration is stopped when every one of its first samples exceeds `factor` × the
//! best median so far. A configuration as fast as the best is stopped wrongly only when its
//! first samples all sit more than `factor − 1` above its own median, so the factor must
//! stand clear of how far first samples sit above their medians in this run, on this GPU,
//! for this kernel. [`Noise`] records that lead for every configuration measured in full
//! and sets the factor at twice the lead that 9 in 10 of them stay under, and never below
//! 1.05, for the drift between when the best was measured and now.

use kerntune_engine::stats::{median, quantile};
use serde::{Deserialize, Serialize};

use crate::timing::EarlyStop;

/// The bar an evaluation's first samples are compared with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// The best median so far.
    pub best_ms: f64,
    /// Every sample must exceed this many times `best_ms` to stop the configuration.
    pub factor: f64,
}

/// Configurations measured in full before `auto` trusts its own estimate.
pub(crate) const AUTO_AFTER: usize = 8;
/// The factor of `auto` until then: wide enough for the ±5% swings seen between runs.
pub(crate) const AUTO_START: f64 = 1.25;
/// The narrowest and widest factors `auto` sets. The first samples' lead does not show
/// drift between configurations measured minutes apart (the best's median was taken under
/// other clocks and temperature), and medians of one kernel swung by ±5% between rounds on
/// an H200: the factor never goes below that.
pub(crate) const AUTO_RANGE: (f64, f64) = (1.05, 1.5);
/// The share of configurations whose lead the factor's margin is built on.
const LEAD_QUANTILE: f64 = 0.9;

/// How far the first samples of this run's fully measured configurations sat above their
/// own medians.
#[derive(Debug, Clone, Default)]
pub(crate) struct Noise {
    /// min(first `early_stop_samples` samples) / median of all, per configuration.
    leads: Vec<f64>,
}

impl Noise {
    /// Records a configuration measured in full (not stopped early: those are a biased
    /// sample), whose first `first` samples are the ones an early stop looks at.
    pub(crate) fn observe(&mut self, samples: &[f64], first: usize) {
        if samples.len() <= first || first == 0 {
            return;
        }
        let middle = median(samples);
        let lowest_first = samples[..first].iter().copied().fold(f64::INFINITY, f64::min);
        if middle > 0.0 && lowest_first.is_finite() {
            self.leads.push(lowest_first / middle);
        }
    }

    /// The factor under `setting`, or `None` when early stopping is off.
    pub(crate) fn factor(&self, setting: EarlyStop) -> Option<f64> {
        match setting {
            EarlyStop::Off => None,
            EarlyStop::Fixed(factor) => Some(factor),
            EarlyStop::Auto if self.leads.len() < AUTO_AFTER => Some(AUTO_START),
            EarlyStop::Auto => {
                // Nearest rank: with 8 to 10 configurations this is the largest lead.
                let lead = quantile(&self.leads, LEAD_QUANTILE) - 1.0;
                Some((1.0 + 2.0 * lead.max(0.0)).clamp(AUTO_RANGE.0, AUTO_RANGE.1))
            }
        }
    }

    /// The bar for the next evaluation, when there is a best to compare with.
    pub(crate) fn bar(&self, setting: EarlyStop, best_ms: Option<f64>) -> Option<Bar> {
        Some(Bar { best_ms: best_ms?, factor: self.factor(setting)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose configurations' first two samples sit `lead` above a median of 1.
    fn run_with_leads(leads: &[f64]) -> Noise {
        let mut noise = Noise::default();
        for &lead in leads {
            noise.observe(&[1.0 + lead, 1.0 + lead, 1.0, 1.0, 1.0, 1.0, 1.0], 2);
        }
        noise
    }

    #[test]
    fn auto_starts_wide_until_enough_configurations_were_measured() {
        let noise = run_with_leads(&[0.01; AUTO_AFTER - 1]);
        assert_eq!(noise.factor(EarlyStop::Auto), Some(AUTO_START));
    }

    #[test]
    fn auto_doubles_the_lead_nine_in_ten_configurations_stay_under() {
        // Nine leads of 1% to 9% and one outlier of 40%: the 90th percentile is 9%.
        let mut leads: Vec<f64> = (1..=9).map(|i| f64::from(i) / 100.0).collect();
        leads.push(0.40);
        let factor = run_with_leads(&leads).factor(EarlyStop::Auto).unwrap();
        assert!((factor - 1.18).abs() < 1e-9, "{factor}");
    }

    #[test]
    fn a_quiet_run_gets_a_narrow_factor_and_a_noisy_one_a_wide_one() {
        let quiet = run_with_leads(&[0.0; 20]).factor(EarlyStop::Auto).unwrap();
        let noisy = run_with_leads(&[0.6; 20]).factor(EarlyStop::Auto).unwrap();
        assert_eq!((quiet, noisy), AUTO_RANGE);
    }

    #[test]
    fn first_samples_below_the_median_count_as_no_lead() {
        let factor = run_with_leads(&[-0.05; 10]).factor(EarlyStop::Auto).unwrap();
        assert_eq!(factor, AUTO_RANGE.0);
    }

    #[test]
    fn configurations_with_too_few_samples_are_not_counted() {
        let mut noise = Noise::default();
        for _ in 0..20 {
            noise.observe(&[2.0, 2.0], 2);
        }
        assert_eq!(noise.factor(EarlyStop::Auto), Some(AUTO_START));
    }

    #[test]
    fn fixed_and_off_ignore_the_noise() {
        let noise = run_with_leads(&[0.3; 20]);
        assert_eq!(noise.factor(EarlyStop::Fixed(1.1)), Some(1.1));
        assert_eq!(noise.bar(EarlyStop::Off, Some(1.0)), None);
        assert_eq!(noise.bar(EarlyStop::Fixed(1.1), None), None);
        assert_eq!(noise.bar(EarlyStop::Fixed(1.1), Some(2.0)), Some(Bar { best_ms: 2.0, factor: 1.1 }));
    }
}
