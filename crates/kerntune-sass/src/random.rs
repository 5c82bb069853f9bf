//! The seeded generator behind random moves (splitmix64): small enough to own here, so
//! that rewriting cubins needs nothing from the search side of kerntune. The same seed
//! gives the same moves on every platform.

/// Deterministic pseudo-random draws from a seed.
#[derive(Debug, Clone)]
pub(crate) struct Random {
    state: u64,
}

impl Random {
    pub(crate) fn seeded(seed: u64) -> Random {
        Random { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mixed = (self.state ^ (self.state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// Uniform in `0..n` by multiply-shift; its bias, below `n / 2^64`, is far under
    /// anything a schedule search could notice.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(seed: u64) -> Vec<usize> {
        let mut random = Random::seeded(seed);
        (0..200).map(|_| random.below(10)).collect()
    }

    #[test]
    fn a_seed_repeats_its_draws_and_another_seed_does_not() {
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
    }

    #[test]
    fn draws_stay_in_range_and_reach_every_value() {
        let seen = draws(3);
        assert!((0..10).all(|value| seen.contains(&value)), "{seen:?}");
        let mut random = Random::seeded(3);
        let units: Vec<f64> = (0..1000).map(|_| random.unit()).collect();
        assert!(units.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = units.iter().sum::<f64>() / units.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "mean of unit draws: {mean}");
    }
}
