//! A small seeded random generator (xoshiro256**, seeded through splitmix64).
//!
//! Owned here rather than taken from `rand` so that a seed gives the same search on every
//! platform and every future version of kerntune: traces recorded today stay reproducible.

/// Deterministic pseudo-random numbers for strategies and sampling.
#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { state: [next(), next(), next(), next()] }
    }

    /// An independent generator derived from this one (for a sub-search or a restart).
    pub fn fork(&mut self) -> Rng {
        Rng::seeded(self.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-and-reject, so there is no modulo bias).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below(0)");
        let n = n as u64;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(n);
            let low = product as u64;
            if low >= n || low >= n.wrapping_neg() % n {
                return (product >> 64) as usize;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len())])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::seeded(7);
        let mut b = Rng::seeded(7);
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(Rng::seeded(7).next_u64(), Rng::seeded(8).next_u64());
    }

    #[test]
    fn below_covers_the_range_evenly() {
        let mut rng = Rng::seeded(1);
        let mut counts = [0usize; 5];
        for _ in 0..50_000 {
            counts[rng.below(5)] += 1;
        }
        assert!(counts.iter().all(|c| (9_000..11_000).contains(c)), "{counts:?}");
    }

    #[test]
    fn unit_and_normal_have_the_right_moments() {
        let mut rng = Rng::seeded(2);
        let n = 100_000;
        let mean_unit = (0..n).map(|_| rng.unit()).sum::<f64>() / n as f64;
        let normals: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = normals.iter().sum::<f64>() / n as f64;
        let variance = normals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean_unit - 0.5).abs() < 0.01);
        assert!(mean.abs() < 0.02 && (variance - 1.0).abs() < 0.03, "{mean} {variance}");
    }
}
