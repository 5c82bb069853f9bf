//! Neighbourhoods for local search and the snap from a continuous point to a valid
//! configuration, for strategies that think in `[0, 1]^d` (particle swarm, differential
//! evolution, surrogate models). Both walk the parameters in declared order and skip every
//! prefix that no valid configuration has, so they stay cheap on spaces of millions.

use crate::{ConfigId, Space};

/// Which configurations count as neighbours of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neighbourhood {
    /// Exactly one parameter differs, to any of its values (Hamming distance 1).
    Hamming,
    /// Exactly one parameter differs, by one step in its value list.
    StrictlyAdjacent,
    /// Any number of parameters differ, each by at most one step.
    Adjacent,
}

impl Space {
    /// The valid neighbours of `id`, in increasing id order.
    pub fn neighbours(&self, id: ConfigId, kind: Neighbourhood) -> Vec<ConfigId> {
        let key = self.key(id);
        let strides = self.strides();
        let mut found = Vec::new();
        match kind {
            Neighbourhood::Hamming | Neighbourhood::StrictlyAdjacent => {
                for (p, param) in self.params().iter().enumerate() {
                    let current = self.index(id, p);
                    let base = key - current as u64 * strides[p];
                    let candidates: Vec<usize> = match kind {
                        Neighbourhood::Hamming => (0..param.len()).filter(|i| *i != current).collect(),
                        _ => [current.wrapping_sub(1), current + 1].into_iter().filter(|i| *i < param.len()).collect(),
                    };
                    found.extend(candidates.into_iter().filter_map(|i| self.id_of_key(base + i as u64 * strides[p])));
                }
            }
            Neighbourhood::Adjacent => {
                let indexes = self.indexes(id);
                self.adjacent(&indexes, 0, 0, &mut found);
                found.retain(|n| *n != id);
            }
        }
        found.sort_unstable();
        found
    }

    fn adjacent(&self, centre: &[usize], param: usize, prefix: u64, found: &mut Vec<ConfigId>) {
        if param == centre.len() {
            found.extend(self.id_of_key(prefix));
            return;
        }
        let size = self.params()[param].len();
        let low = centre[param].saturating_sub(1);
        let high = (centre[param] + 1).min(size - 1);
        for index in low..=high {
            let key = prefix + index as u64 * self.strides()[param];
            if self.prefix_exists(key, param + 1) {
                self.adjacent(centre, param + 1, key, found);
            }
        }
    }

    /// The valid configuration nearest to `point` (one coordinate in `[0, 1]` per parameter,
    /// as [`Space::to_unit`] gives) by Euclidean distance; ties go to the lower id.
    /// `None` only for an empty space.
    pub fn snap(&self, point: &[f64]) -> Option<ConfigId> {
        assert_eq!(point.len(), self.params().len(), "one coordinate per parameter");
        let mut search = Snap { space: self, point, best_distance: f64::INFINITY, best_key: None };
        search.visit(0, 0, 0.0);
        search.best_key.and_then(|key| self.id_of_key(key))
    }
}

struct Snap<'a> {
    space: &'a Space,
    point: &'a [f64],
    best_distance: f64,
    best_key: Option<u64>,
}

impl Snap<'_> {
    /// Branch and bound: values nearest to the point first, and a subtree is cut as soon as
    /// its partial distance reaches the best complete one.
    fn visit(&mut self, param: usize, prefix: u64, distance: f64) {
        if param == self.point.len() {
            if distance < self.best_distance {
                self.best_distance = distance;
                self.best_key = Some(prefix);
            }
            return;
        }
        let size = self.space.params()[param].len();
        let coordinate = |index: usize| if size == 1 { 0.5 } else { index as f64 / (size - 1) as f64 };
        let target = self.point[param].clamp(0.0, 1.0);
        let mut order: Vec<usize> = (0..size).collect();
        order
            .sort_by(|a, b| (coordinate(*a) - target).abs().total_cmp(&(coordinate(*b) - target).abs()).then(a.cmp(b)));
        for index in order {
            let total = distance + (coordinate(index) - target).powi(2);
            if total >= self.best_distance {
                break;
            }
            let key = prefix + index as u64 * self.space.strides()[param];
            if self.space.prefix_exists(key, param + 1) {
                self.visit(param + 1, key, total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Param, Rng, Value};

    use super::*;

    fn space() -> Space {
        let param = |name: &str, n: i64| Param::new(name, (0..n).map(Value::Int).collect()).expect("valid");
        Space::new(vec![param("a", 5), param("b", 4), param("c", 3)], &["(a + b + c) % 3 != 0"]).expect("builds")
    }

    fn brute_neighbours(space: &Space, id: ConfigId, near: impl Fn(&[usize], &[usize]) -> bool) -> Vec<ConfigId> {
        let centre = space.indexes(id);
        space.ids().filter(|other| *other != id && near(&centre, &space.indexes(*other))).collect()
    }

    #[test]
    fn neighbourhoods_match_their_definitions() {
        let space = space();
        for id in space.ids() {
            let differing = |a: &[usize], b: &[usize]| a.iter().zip(b).filter(|(x, y)| x != y).count();
            let steps = |a: &[usize], b: &[usize]| a.iter().zip(b).all(|(x, y)| x.abs_diff(*y) <= 1);
            assert_eq!(
                space.neighbours(id, Neighbourhood::Hamming),
                brute_neighbours(&space, id, |a, b| differing(a, b) == 1)
            );
            assert_eq!(
                space.neighbours(id, Neighbourhood::StrictlyAdjacent),
                brute_neighbours(&space, id, |a, b| differing(a, b) == 1 && steps(a, b))
            );
            assert_eq!(space.neighbours(id, Neighbourhood::Adjacent), brute_neighbours(&space, id, steps));
        }
    }

    #[test]
    fn snap_finds_the_nearest_valid_config() {
        let space = space();
        let mut rng = Rng::seeded(11);
        for _ in 0..500 {
            let point: Vec<f64> = (0..3).map(|_| rng.unit()).collect();
            let distance =
                |id: ConfigId| space.to_unit(id).iter().zip(&point).map(|(x, p)| (x - p).powi(2)).sum::<f64>();
            let best = space.ids().min_by(|a, b| distance(*a).total_cmp(&distance(*b))).expect("non-empty");
            let snapped = space.snap(&point).expect("non-empty");
            assert!((distance(snapped) - distance(best)).abs() < 1e-12, "{point:?}");
        }
    }

    #[test]
    fn snapping_a_valid_config_returns_it() {
        let space = space();
        for id in space.ids() {
            assert_eq!(space.snap(&space.to_unit(id)), Some(id));
        }
    }
}
