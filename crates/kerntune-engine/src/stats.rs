//! Statistics of timing samples: the median, a distribution-free confidence interval for
//! it, and the decisions the timing protocol takes from them.

/// The median of the samples (mean of the two middle ones for an even count).
pub fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// A 95% confidence interval of the median from order statistics (no assumption about the
/// distribution): ranks n/2 ∓ 1.96·√n/2, clamped to the sample. With 7 samples it is
/// [min, max].
pub fn median_interval(samples: &[f64]) -> (f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let half_width = 1.96 * (n as f64).sqrt() / 2.0;
    let low = ((n as f64 / 2.0 - half_width).floor().max(1.0) as usize).min(n) - 1;
    let high = ((n as f64 / 2.0 + half_width).ceil().max(1.0) as usize).min(n) - 1;
    (sorted[low], sorted[high])
}

/// Half-width of the median's interval relative to the median.
pub fn relative_half_width(samples: &[f64]) -> f64 {
    let (low, high) = median_interval(samples);
    (high - low) / 2.0 / median(samples)
}

/// Whether a configuration is clearly slower than the best so far: every sample (the
/// smallest is a lower bound of its median with confidence 1 − 2⁻ⁿ) exceeds `factor`
/// times the best median, after at least `min_samples` samples.
pub fn clearly_slower(samples: &[f64], best_median: f64, factor: f64, min_samples: usize) -> bool {
    samples.len() >= min_samples && samples.iter().copied().fold(f64::INFINITY, f64::min) > factor * best_median
}

/// The nearest-rank `q` quantile of `values` (0 < q <= 1): the smallest value that at
/// least a share `q` of them do not exceed. NaN when there are none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median of each of `blocks` consecutive blocks of `samples`, which are split as the
/// bench worker splits interleaved rounds: the first `len % blocks` blocks one longer.
pub fn block_medians(samples: &[f64], blocks: usize) -> Vec<f64> {
    let blocks = blocks.clamp(1, samples.len().max(1));
    let mut medians = Vec::with_capacity(blocks);
    let mut start = 0;
    for block in 0..blocks {
        let length = samples.len() / blocks + usize::from(block < samples.len() % blocks);
        medians.push(median(&samples[start..start + length]));
        start += length;
    }
    medians
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_medians_split_like_the_bench_worker() {
        let samples = [1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 7.0];
        assert_eq!(block_medians(&samples, 3), vec![2.0, 15.0, 18.5], "blocks of 3, 2 and 2");
        assert_eq!(block_medians(&samples, 1), vec![7.0]);
        assert_eq!(block_medians(&samples[..2], 5), vec![1.0, 2.0]);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn interval_is_min_max_for_seven_and_narrows_with_more() {
        let seven = [5.0, 1.0, 7.0, 3.0, 2.0, 6.0, 4.0];
        assert_eq!(median_interval(&seven), (1.0, 7.0));
        let many: Vec<f64> = (1..=100).map(f64::from).collect();
        let (low, high) = median_interval(&many);
        assert_eq!((low, high), (40.0, 60.0));
    }

    #[test]
    fn interval_covers_the_median_about_95_percent_of_the_time() {
        // Samples of a skewed distribution with a known median: ln 2 for Exp(1).
        let mut rng = kerntune_space::Rng::seeded(3);
        let trials = 4000;
        let covered = (0..trials)
            .filter(|_| {
                let samples: Vec<f64> = (0..25).map(|_| -(1.0 - rng.unit()).ln()).collect();
                let (low, high) = median_interval(&samples);
                low <= std::f64::consts::LN_2 && std::f64::consts::LN_2 <= high
            })
            .count();
        let rate = covered as f64 / trials as f64;
        assert!((0.93..0.995).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(quantile(&values, 0.9), 9.0);
        assert_eq!(quantile(&values, 1.0), 10.0);
        assert_eq!(quantile(&values[..8], 0.9), 10.0, "with 8 values the 90th percentile is the largest");
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn early_stop_needs_every_sample_above_the_bar() {
        assert!(clearly_slower(&[2.3, 2.4], 2.0, 1.1, 2));
        assert!(!clearly_slower(&[2.3, 2.1], 2.0, 1.1, 2));
        assert!(!clearly_slower(&[9.0], 2.0, 1.1, 2), "too few samples");
    }
}
