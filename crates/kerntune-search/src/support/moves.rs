//! Moves in the space of value indexes (mutation, crossover, kicks) and the repair that
//! turns any vector of indexes into the nearest valid configuration.

use kerntune_space::{ConfigId, Rng, Space};

/// Unit-cube coordinates of a vector of value indexes, as [`Space::to_unit`] gives them
/// for valid configurations.
pub(crate) fn unit_of(space: &Space, indexes: &[usize]) -> Vec<f64> {
    space
        .params()
        .iter()
        .zip(indexes)
        .map(|(param, index)| if param.len() == 1 { 0.5 } else { *index as f64 / (param.len() - 1) as f64 })
        .collect()
}

/// The configuration with these value indexes if it is valid, else the valid one nearest
/// to it (restrictions make many combinations invalid; the nearest keeps most of them).
pub(crate) fn repair(space: &Space, indexes: &[usize]) -> Option<ConfigId> {
    space.id_of(indexes).or_else(|| space.snap(&unit_of(space, indexes)))
}

/// A random other value index of parameter `param`, when it has another value.
fn other_value(space: &Space, rng: &mut Rng, param: usize, current: usize) -> usize {
    let count = space.params()[param].len();
    if count < 2 {
        return current;
    }
    let pick = rng.below(count - 1);
    if pick >= current {
        pick + 1
    } else {
        pick
    }
}

/// Parameters with more than one value: the only ones a move can change.
pub(crate) fn free_params(space: &Space) -> Vec<usize> {
    (0..space.params().len()).filter(|p| space.params()[*p].len() > 1).collect()
}

/// Each free parameter changes to a random other value with probability `rate`, at least
/// one always does; the result is repaired to a valid configuration.
pub(crate) fn mutate(space: &Space, rng: &mut Rng, id: ConfigId, rate: f64) -> ConfigId {
    let free = free_params(space);
    let mut indexes = space.indexes(id);
    let mut changed = false;
    for &p in &free {
        if rng.chance(rate) {
            indexes[p] = other_value(space, rng, p, indexes[p]);
            changed = true;
        }
    }
    if !changed {
        if let Some(&p) = rng.choose(&free) {
            indexes[p] = other_value(space, rng, p, indexes[p]);
        }
    }
    repair(space, &indexes).unwrap_or(id)
}

/// `changes` distinct free parameters take random other values; repaired to a valid
/// configuration. A kick of a few parameters leaves a basin that single steps cannot.
pub(crate) fn kick(space: &Space, rng: &mut Rng, id: ConfigId, changes: usize) -> ConfigId {
    let mut free = free_params(space);
    rng.shuffle(&mut free);
    let mut indexes = space.indexes(id);
    for &p in free.iter().take(changes.max(1)) {
        indexes[p] = other_value(space, rng, p, indexes[p]);
    }
    repair(space, &indexes).unwrap_or(id)
}

/// A random configuration one step away in each of several parameters: every free
/// parameter moves one step up or down with probability `rate` (at least one moves).
/// `None` when that lands on an invalid combination. Drawing these beats listing the
/// whole neighbourhood, which has up to 3^d members.
pub(crate) fn adjacent_step(space: &Space, rng: &mut Rng, id: ConfigId, rate: f64) -> Option<ConfigId> {
    let free = free_params(space);
    let mut indexes = space.indexes(id);
    let forced = *rng.choose(&free)?;
    for &p in &free {
        if p == forced || rng.chance(rate) {
            let last = space.params()[p].len() - 1;
            indexes[p] = match indexes[p] {
                0 => 1,
                i if i == last => i - 1,
                i if rng.chance(0.5) => i - 1,
                i => i + 1,
            };
        }
    }
    space.id_of(&indexes)
}

/// Each parameter from either parent with equal chance; repaired to a valid configuration.
pub(crate) fn uniform_crossover(space: &Space, rng: &mut Rng, a: ConfigId, b: ConfigId) -> ConfigId {
    let (first, second) = (space.indexes(a), space.indexes(b));
    let child: Vec<usize> = first.iter().zip(&second).map(|(x, y)| if rng.chance(0.5) { *x } else { *y }).collect();
    repair(space, &child).unwrap_or(a)
}

#[cfg(test)]
mod tests {
    use kerntune_space::{Param, Value};

    use super::*;

    fn space() -> Space {
        let param = |name: &str, n: i64| Param::new(name, (0..n).map(Value::Int).collect()).expect("valid");
        Space::new(vec![param("a", 6), param("b", 5), param("c", 1)], &["a + b != 4"]).expect("builds")
    }

    #[test]
    fn repair_keeps_valid_configs_and_fixes_invalid_ones() {
        let space = space();
        assert_eq!(space.id_of(&[1, 3, 0]), None);
        let fixed = repair(&space, &[1, 3, 0]).expect("repaired");
        let steps: Vec<usize> = space.indexes(fixed).iter().zip([1, 3, 0]).map(|(i, j)| i.abs_diff(j)).collect();
        assert_eq!((steps.iter().sum::<usize>(), steps.iter().max()), (1, Some(&1)), "one step away: {steps:?}");
        for id in space.ids() {
            assert_eq!(repair(&space, &space.indexes(id)), Some(id));
        }
    }

    #[test]
    fn mutation_and_kicks_always_move_to_a_valid_config() {
        let space = space();
        let mut rng = Rng::seeded(5);
        for id in space.ids() {
            for _ in 0..20 {
                assert!(mutate(&space, &mut rng, id, 0.0).index() < space.len());
                let kicked = kick(&space, &mut rng, id, 2);
                assert!(kicked.index() < space.len());
            }
        }
        let moved = (0..50).filter(|_| mutate(&space, &mut rng, ConfigId(0), 0.0) != ConfigId(0)).count();
        assert!(moved > 40, "a mutation changes at least one parameter ({moved}/50 moved)");
    }

    #[test]
    fn adjacent_steps_move_each_parameter_at_most_one_step() {
        let space = space();
        let mut rng = Rng::seeded(7);
        let centre = space.id_of(&[2, 1, 0]).expect("valid");
        let mut moved = 0;
        for _ in 0..100 {
            if let Some(id) = adjacent_step(&space, &mut rng, centre, 0.5) {
                let steps: Vec<usize> = space.indexes(id).iter().zip([2, 1, 0]).map(|(i, j)| i.abs_diff(j)).collect();
                assert!(steps.iter().all(|s| *s <= 1) && steps.contains(&1), "{steps:?}");
                moved += 1;
            }
        }
        assert!(moved > 50, "{moved} of 100 steps were valid");
    }

    #[test]
    fn crossover_children_take_each_value_from_a_parent() {
        let space = space();
        let mut rng = Rng::seeded(6);
        let (a, b) = (space.id_of(&[0, 0, 0]).expect("valid"), space.id_of(&[5, 3, 0]).expect("valid"));
        for _ in 0..50 {
            let child = space.indexes(uniform_crossover(&space, &mut rng, a, b));
            assert!(child[0] == 0 || child[0] == 5);
            assert!(child[1] == 0 || child[1] == 3);
        }
    }
}
