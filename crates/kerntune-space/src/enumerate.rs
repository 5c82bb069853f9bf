//! Enumeration of the valid configurations: a depth-first walk over the parameters in an
//! order that binds restrictions early, checking each restriction as soon as its last
//! name is bound, so that a failing prefix cuts off its whole subtree.
//!
//! A restriction over a small product of values is evaluated once per combination up front
//! into a truth table, so the walk checks it with one lookup instead of an evaluation.

use crate::{Expression, Param, Value};

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
/// configuration that satisfies all `restrictions`, in no particular order.
pub(crate) fn valid_keys(params: &[Param], restrictions: &[Expression], strides: &[u64]) -> Vec<u64> {
    let mut constant_checks = restrictions.iter().filter(|r| r.variables().is_empty());
    if constant_checks.any(|r| !r.holds(&[]).unwrap_or(false)) {
        return Vec::new();
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
    let mut walk = Walk {
        params,
        order: &order,
        strides,
        checks_at: &checks_at,
        current: vec![0; params.len()],
        keys: Vec::new(),
    };
    walk.visit(0, 0);
    walk.keys
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
}

impl Walk<'_> {
    fn visit(&mut self, depth: usize, key: u64) {
        if depth == self.order.len() {
            self.keys.push(key);
            return;
        }
        let p = self.order[depth];
        for index in 0..self.params[p].len() {
            self.current[p] = index;
            let ok = self.checks_at[depth].iter().all(|check| check.holds(&self.current, self.params));
            if ok {
                self.visit(depth + 1, key + index as u64 * self.strides[p]);
            }
        }
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
