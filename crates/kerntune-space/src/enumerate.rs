//! Enumeration of the valid configurations: a depth-first walk over the parameters in an
//! order that binds restrictions early, checking each restriction as soon as its last
//! name is bound, so that a failing prefix cuts off its whole subtree.
//!
//! A restriction over a small product of values is evaluated once per combination up front
//! into a truth table, so the walk checks it with one lookup instead of an evaluation.
//!
//! Memory is bounded by a [`MemoryCap`]: when the product of the value counts could exceed
//! it, a few thousand random configurations estimate how many are valid, and a space
//! estimated over the cap is refused before the walk starts; the walk itself stops at the
//! cap, so an estimate that falls short still cannot run the machine out of memory.

use crate::memory::{MemoryCap, SpaceEstimate, BYTES_PER_CONFIG, ESTIMATE_SAMPLES};
use crate::{Expression, Param, Rng, SpaceError, Value};

/// Restrictions over at most this many value combinations are turned into tables.
const TABLE_LIMIT: usize = 1 << 20;

enum Check<'a> {
    Table { truth: Vec<bool>, terms: Vec<(usize, usize)> },
    Direct { expression: &'a Expression },
}

impl Check<'_> {
    fn holds(&self, current: &[usize], params: &[Param]) -> bool {
        match self {
            Check::Table { truth, terms } => truth[terms.iter().map(|(p, stride)| current[*p] * stride).sum::<usize>()],
            Check::Direct { expression } => {
                let values: Vec<&Value> =
                    expression.variables().iter().map(|p| &params[*p].values()[current[*p]]).collect();
                // An error (division by zero, a type mismatch) makes the configuration invalid.
                expression.holds(&values).unwrap_or(false)
            }
        }
    }
}

/// Keys (mixed-radix numbers with `strides`, in the parameters' declared order) of every
/// configuration that satisfies all `restrictions`, in no particular order; refused when
/// they would take more than `cap`. `progress` is told the share of the walk done (0 to 1)
/// as each value of the first two parameters of the walk is finished.
pub(crate) fn valid_keys(
    params: &[Param],
    restrictions: &[Expression],
    strides: &[u64],
    cap: MemoryCap,
    progress: &mut dyn FnMut(f64),
) -> Result<Vec<u64>, SpaceError> {
    let mut constant_checks = restrictions.iter().filter(|r| r.variables().is_empty());
    if constant_checks.any(|r| !r.holds(&[]).unwrap_or(false)) {
        return Ok(Vec::new());
    }
    let order = binding_order(params, restrictions);
    let mut depth_of = vec![0; params.len()];
    for (depth, p) in order.iter().enumerate() {
        depth_of[*p] = depth;
    }
    let mut checks_at: Vec<Vec<Check>> = (0..params.len()).map(|_| Vec::new()).collect();
    for restriction in restrictions.iter().filter(|r| !r.variables().is_empty()) {
        let last = restriction.variables().iter().map(|p| depth_of[*p]).max().unwrap_or(0);
        checks_at[last].push(check_for(restriction, params));
    }
    // `strides_of` has checked that the product fits in 64 bits.
    let product: u64 = params.iter().map(|p| p.len() as u64).product();
    if product > cap.max_configs() {
        let estimate = estimate(params, &checks_at, product);
        if estimate.surely_over(cap.max_configs()) {
            return Err(SpaceError::TooMuchMemory { estimate, cap });
        }
    }
    let mut walk = Walk {
        params,
        order: &order,
        strides,
        checks_at: &checks_at,
        current: vec![0; params.len()],
        keys: Vec::new(),
        max_keys: usize::try_from(cap.max_configs()).unwrap_or(usize::MAX),
        over_cap: false,
        out_of_memory: false,
        progress,
    };
    walk.visit(0, 0);
    if walk.out_of_memory {
        return Err(SpaceError::OutOfMemory { configs: walk.keys.len() });
    }
    if walk.over_cap {
        return Err(SpaceError::MemoryCapReached { configs: walk.keys.len(), cap });
    }
    Ok(walk.keys)
}

/// The share of uniformly random configurations that pass every check, scaled to the product.
/// The seed is fixed so that the same space gets the same answer every time.
fn estimate(params: &[Param], checks_at: &[Vec<Check>], product: u64) -> SpaceEstimate {
    let mut rng = Rng::seeded(0x5eed_e571);
    let mut current = vec![0; params.len()];
    let mut accepted = 0;
    for _ in 0..ESTIMATE_SAMPLES {
        for (index, param) in current.iter_mut().zip(params) {
            *index = rng.below(param.len());
        }
        if checks_at.iter().flatten().all(|check| check.holds(&current, params)) {
            accepted += 1;
        }
    }
    let valid_configs = product as f64 * accepted as f64 / ESTIMATE_SAMPLES as f64;
    SpaceEstimate {
        product,
        sampled: ESTIMATE_SAMPLES,
        accepted,
        valid_configs,
        bytes: valid_configs * BYTES_PER_CONFIG as f64,
    }
}

/// `count` uniformly random valid configurations (value indexes, drawn with replacement),
/// found by rejection: random configurations are drawn until `count` pass, giving up after
/// `max_attempts`. Nothing is enumerated, so any space can be sampled whose restrictions keep
/// a reasonable share of it.
pub(crate) fn sample_valid(
    params: &[Param],
    restrictions: &[Expression],
    count: usize,
    rng: &mut Rng,
    max_attempts: u64,
) -> Result<Vec<Vec<usize>>, SpaceError> {
    let constant_false =
        restrictions.iter().filter(|r| r.variables().is_empty()).any(|r| !r.holds(&[]).unwrap_or(false));
    let checks: Vec<Check> =
        restrictions.iter().filter(|r| !r.variables().is_empty()).map(|r| check_for(r, params)).collect();
    let mut configs = Vec::with_capacity(count.min(1 << 20));
    let mut current = vec![0; params.len()];
    let mut attempts = 0;
    while configs.len() < count {
        if constant_false || attempts == max_attempts {
            return Err(SpaceError::TooRareToSample { wanted: count, found: configs.len(), attempts });
        }
        attempts += 1;
        for (index, param) in current.iter_mut().zip(params) {
            *index = rng.below(param.len());
        }
        if checks.iter().all(|check| check.holds(&current, params)) {
            configs.push(current.clone());
        }
    }
    Ok(configs)
}

fn check_for<'a>(restriction: &'a Expression, params: &[Param]) -> Check<'a> {
    let variables = restriction.variables();
    let combinations = variables.iter().try_fold(1usize, |acc, p| acc.checked_mul(params[*p].len()));
    match combinations {
        Some(count) if count <= TABLE_LIMIT => {
            let mut terms = Vec::with_capacity(variables.len());
            let mut stride = 1;
            for p in variables.iter().rev() {
                terms.push((*p, stride));
                stride *= params[*p].len();
            }
            terms.reverse();
            let mut truth = Vec::with_capacity(count);
            let mut digits = vec![0usize; variables.len()];
            for _ in 0..count {
                let values: Vec<&Value> =
                    variables.iter().zip(&digits).map(|(p, i)| &params[*p].values()[*i]).collect();
                truth.push(restriction.holds(&values).unwrap_or(false));
                for (digit, p) in digits.iter_mut().zip(variables).rev() {
                    *digit += 1;
                    if *digit < params[*p].len() {
                        break;
                    }
                    *digit = 0;
                }
            }
            Check::Table { truth, terms }
        }
        _ => Check::Direct { expression: restriction },
    }
}

struct Walk<'a> {
    params: &'a [Param],
    order: &'a [usize],
    strides: &'a [u64],
    checks_at: &'a [Vec<Check<'a>>],
    current: Vec<usize>,
    keys: Vec<u64>,
    /// The walk stops, setting `over_cap`, rather than keep more keys than this.
    max_keys: usize,
    over_cap: bool,
    /// The machine refused to grow `keys`: the cap was raised past what it can give, and
    /// an abort would lose the user's one-line answer.
    out_of_memory: bool,
    progress: &'a mut dyn FnMut(f64),
}

impl Walk<'_> {
    fn visit(&mut self, depth: usize, key: u64) {
        if depth == self.order.len() {
            if self.keys.len() == self.max_keys {
                self.over_cap = true;
            } else if self.keys.len() == self.keys.capacity()
                && self.keys.try_reserve(self.keys.len().max(1024)).is_err()
            {
                self.out_of_memory = true;
            } else {
                self.keys.push(key);
            }
            return;
        }
        let p = self.order[depth];
        for index in 0..self.params[p].len() {
            if self.over_cap || self.out_of_memory {
                return;
            }
            self.current[p] = index;
            let ok = self.checks_at[depth].iter().all(|check| check.holds(&self.current, self.params));
            if ok {
                self.visit(depth + 1, key + index as u64 * self.strides[p]);
            }
            if depth <= 1 {
                self.report(depth, index);
            }
        }
    }

    /// The share of the walk done once `index` of the parameter at `depth` (0 or 1) is done.
    fn report(&mut self, depth: usize, index: usize) {
        let first = self.params[self.order[0]].len() as f64;
        let done = match depth {
            0 => (index + 1) as f64 / first,
            _ => {
                let second = self.params[self.order[1]].len() as f64;
                (self.current[self.order[0]] as f64 + (index + 1) as f64 / second) / first
            }
        };
        (self.progress)(done);
    }
}

/// Parameter order for the walk: repeatedly complete the restriction whose unbound names
/// span the fewest combinations, then append the parameters no restriction mentions.
fn binding_order(params: &[Param], restrictions: &[Expression]) -> Vec<usize> {
    let mut bound = vec![false; params.len()];
    let mut order = Vec::with_capacity(params.len());
    loop {
        let cheapest = restrictions
            .iter()
            .map(|r| r.variables().iter().copied().filter(|p| !bound[*p]).collect::<Vec<_>>())
            .filter(|unbound| !unbound.is_empty())
            .min_by_key(|unbound| unbound.iter().map(|p| params[*p].len() as u128).product::<u128>());
        let Some(mut unbound) = cheapest else { break };
        unbound.sort_by_key(|p| (params[*p].len(), *p));
        for p in unbound {
            bound[p] = true;
            order.push(p);
        }
    }
    order.extend((0..params.len()).filter(|p| !bound[*p]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, values: &[i64]) -> Param {
        Param::new(name, values.iter().map(|v| Value::Int(*v)).collect()).expect("valid")
    }

    #[test]
    fn binding_order_completes_cheap_restrictions_first() {
        let params =
            vec![param("a", &[1, 2, 3, 4]), param("b", &[1, 2]), param("c", &[1, 2, 3]), param("free", &[1, 2])];
        let names = ["a", "b", "c", "free"];
        let restrictions = vec![
            Expression::parse("a * c < 10", &names).expect("parses"),
            Expression::parse("b < 2", &names).expect("parses"),
        ];
        assert_eq!(binding_order(&params, &restrictions), vec![1, 2, 0, 3]);
    }
}
