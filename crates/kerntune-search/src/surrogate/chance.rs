//! How likely more evaluations are to pay: the estimate a run that stops by itself stops on.
//!
//! Under a fitted forest each unevaluated configuration `c` has a predicted target, normal
//! with the forest's mean and deviation, so a chance `p(c) = Φ((best - margin - mean) /
//! deviation)` of beating the best target by more than the noise (`margin`). Those chances
//! are the model's opinion, and a forest's deviations are not calibrated: on a landscape
//! whose optimum has been found, it keeps giving hundreds of configurations a chance of 10
//! to 20% for as long as the run lasts. So the strategy checks the model against its own
//! record ([`Calibration`]): every proposal carried a chance, and the chances given since
//! the last improvement by more than the noise all failed. Their sum `P` is how many
//! improvements the model promised and did not deliver; `1 / (1 + P)` scales its chances
//! down accordingly (with one improvement as the prior, so a fresh model is taken at its
//! word). The estimate is the calibrated sum of the chances of the [`MOST_PROMISING`]
//! configurations the model rates highest: about the expected number of improvements in
//! the next few batches of proposals, which bounds the chance that it brings one.
//!
//! The configurations rated are the unevaluated neighbours of the best few (where the
//! search concentrates) and a uniform sample of the rest of the space, drawn with its own
//! generator seeded from the history's length, so estimating changes nothing in the search.

use std::collections::{HashMap, HashSet};

use kerntune_space::{ConfigId, Neighbourhood, Rng, Space};

use super::forest::Forest;
use super::{features, normal_cdf};
use crate::History;

/// Configurations of the rest of the space the estimate samples.
const SAMPLE: usize = 256;

/// Best configurations whose unevaluated neighbours are rated.
const PARENTS: usize = 4;

/// Configurations whose chances the estimate sums: four batches of the GPU pipeline.
pub(crate) const MOST_PROMISING: usize = 64;

/// The chance, under `forest`, that the configuration with value indexes `features` beats
/// the target `best` by more than `margin`.
pub(crate) fn chance(forest: &Forest, features: &[u32], best: f64, margin: f64) -> f64 {
    let (mean, deviation) = forest.predict(features);
    match deviation > 1e-12 {
        true => normal_cdf((best - margin - mean) / deviation),
        false => f64::from(u8::from(mean < best - margin)),
    }
}

/// The sum of the [`MOST_PROMISING`] largest chances among unevaluated configurations
/// (`ranked` holds the valid observations, best first); `size` is appended to each one's value
/// indexes, as the forest was fitted.
pub(crate) fn most_promising(
    forest: &Forest,
    space: &Space,
    size: &[u32],
    history: &History,
    ranked: &[ConfigId],
    best: f64,
    margin: f64,
) -> f64 {
    let rate = |id: ConfigId| chance(forest, &features(space, id, size), best, margin);
    let mut rated = HashSet::new();
    for parent in ranked.iter().take(PARENTS) {
        rated.extend(space.neighbours(*parent, Neighbourhood::Hamming).into_iter().filter(|id| !history.is_known(*id)));
    }
    let mut rng = Rng::seeded(0x5709_u64 ^ (history.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let wanted = rated.len() + SAMPLE;
    for _ in 0..SAMPLE * 4 {
        let id = ConfigId::from(rng.below(space.len().max(1)));
        if !history.is_known(id) {
            rated.insert(id);
        }
        if rated.len() >= wanted {
            break;
        }
    }
    let mut chances: Vec<f64> = rated.into_iter().map(rate).collect();
    chances.sort_by(|a, b| b.total_cmp(a));
    chances.iter().take(MOST_PROMISING).sum()
}

/// The model's record on this run: the chance each proposal in flight was given, and the
/// sum of the chances given since the last improvement by more than the noise.
#[derive(Debug, Default)]
pub(crate) struct Calibration {
    given: HashMap<ConfigId, f64>,
    /// Chances given since the last improvement, all of which failed.
    failed: f64,
}

impl Calibration {
    pub(crate) fn proposed(&mut self, id: ConfigId, chance: f64) {
        self.given.insert(id, chance);
    }

    /// The outcome of a proposal: `improved` when it beat the best before it by more than
    /// the noise.
    pub(crate) fn observed(&mut self, id: ConfigId, improved: bool) {
        let given = self.given.remove(&id).unwrap_or(0.0);
        self.failed = if improved { 0.0 } else { self.failed + given };
    }

    /// `promised` (a sum of the model's chances) scaled by the model's record, capped at 1.
    pub(crate) fn calibrate(&self, promised: f64) -> f64 {
        (promised / (1.0 + self.failed)).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chances_that_kept_failing_are_scaled_down_and_an_improvement_restores_them() {
        let mut calibration = Calibration::default();
        assert_eq!(calibration.calibrate(0.5), 0.5, "a fresh model is taken at its word");
        for index in 0..40 {
            calibration.proposed(ConfigId(index), 0.2);
            calibration.observed(ConfigId(index), false);
        }
        assert!((calibration.calibrate(2.0) - 2.0 / 9.0).abs() < 1e-9);
        calibration.proposed(ConfigId(99), 0.2);
        calibration.observed(ConfigId(99), true);
        assert_eq!(calibration.calibrate(0.5), 0.5);
        assert_eq!(calibration.calibrate(3.0), 1.0, "capped: it reads as a chance");
    }
}
