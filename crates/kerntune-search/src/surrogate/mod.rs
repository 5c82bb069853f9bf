//! Surrogate models of the objective, fitted to what a run has observed: a random
//! [`forest`] over value indexes and a Gaussian process ([`gp`]) over unit-cube coordinates,
//! with the pieces both share: turning observations into training targets and
//! scoring candidates by expected improvement.

pub(crate) mod chance;
pub(crate) mod forest;
pub(crate) mod gp;

use kerntune_space::{ConfigId, Space};

use crate::History;

/// Training targets from a history: one per observed configuration, in observation order.
///
/// Scores are modelled on a log scale when they share a sign (kernel times, or negated
/// throughputs), because a kernel twice as slow is as far off whether it takes 2 ms or
/// 2 s. A failed configuration is information: it gets the worst target observed, so the
/// model learns to keep away from where builds fail rather than ignoring those regions.
pub(crate) fn targets(history: &History) -> (Vec<ConfigId>, Vec<f64>) {
    let observations = history.observations();
    let valid = || observations.iter().filter_map(|o| o.score);
    let log_scale = log_scale(history);
    let transform = |score: f64| if log_scale { score.signum() * score.abs().ln() } else { score };
    let worst = valid().map(transform).fold(f64::NEG_INFINITY, f64::max);
    let worst = if worst.is_finite() { worst } else { 0.0 };
    let ids = observations.iter().map(|o| o.id).collect();
    let targets = observations.iter().map(|o| o.score.map_or(worst, transform)).collect();
    (ids, targets)
}

/// A forest's features of configuration `id`: its value indexes, then `size` (the problem
/// size's columns of a run that learns from other sizes, empty otherwise).
pub(crate) fn features(space: &Space, id: ConfigId, size: &[u32]) -> Vec<u32> {
    space.indexes(id).into_iter().map(|i| i as u32).chain(size.iter().copied()).collect()
}

/// Whether [`targets`] models the scores on a log scale: when they all share a sign.
pub(crate) fn log_scale(history: &History) -> bool {
    let valid = || history.observations().iter().filter_map(|o| o.score);
    valid().all(|s| s > 0.0) || valid().all(|s| s < 0.0)
}

/// Expected improvement below `best` of a normal prediction (`mean`, `deviation`): the
/// mean gain over `best` counting only outcomes that beat it.
pub(crate) fn expected_improvement(best: f64, mean: f64, deviation: f64) -> f64 {
    if deviation <= 1e-12 {
        return (best - mean).max(0.0);
    }
    let z = (best - mean) / deviation;
    (best - mean) * normal_cdf(z) + deviation * normal_pdf(z)
}

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal distribution function, through an erfc approximation accurate to
/// about 1e-7 (Numerical Recipes' `erfcc`), plenty for ranking candidates.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let polynomial = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * polynomial.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    0.5 * erfc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Observation;

    #[test]
    fn normal_cdf_matches_known_values() {
        for (z, expected) in [(0.0, 0.5), (1.0, 0.841_344_75), (-1.96, 0.024_997_9), (3.0, 0.998_650_1)] {
            assert!((normal_cdf(z) - expected).abs() < 1e-6, "{z}: {}", normal_cdf(z));
        }
    }

    #[test]
    fn expected_improvement_grows_with_mean_gain_and_with_uncertainty() {
        assert!(expected_improvement(1.0, 0.5, 0.1) > expected_improvement(1.0, 0.9, 0.1));
        assert!(expected_improvement(1.0, 1.2, 0.5) > expected_improvement(1.0, 1.2, 0.1));
        assert_eq!(expected_improvement(1.0, 2.0, 0.0), 0.0);
    }

    #[test]
    fn failures_train_as_the_worst_observation_on_a_log_scale() {
        let mut history = History::new();
        for (id, score) in [(0, Some(2.0)), (1, None), (2, Some(8.0))] {
            history.observe(Observation { id: ConfigId(id), score });
        }
        let (ids, targets) = targets(&history);
        assert_eq!(ids, vec![ConfigId(0), ConfigId(1), ConfigId(2)]);
        assert!((targets[0] - 2f64.ln()).abs() < 1e-12);
        assert_eq!(targets[1], targets[2]);
    }
}
