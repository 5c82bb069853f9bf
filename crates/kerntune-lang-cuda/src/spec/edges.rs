//! `[verify] sizes`: other problem sizes at which every configuration is also checked,
//! sizes that are no multiple of its tiles, where its bounds checks matter. Each is a table
//! of the problem variables that differ from `[problem]` (`sizes = [{ n = 4095 }]`); the
//! arguments, the launch geometry, the reference and the restrictions are evaluated with
//! those values. A configuration whose restrictions exclude it at an edge size is not
//! checked there (its `verified_sets` says so); an edge size that no configuration could
//! apply at is refused, as is one where the reference config is excluded.

use kerntune_space::{Expression, Param, Value};
use serde_json::Value as Json;

use super::substitute;

/// One edge size: the spec's problem with some variables changed.
#[derive(Debug, Clone)]
pub struct EdgeSize {
    /// The changed variables as written in reasons and results: `n = 4095`.
    pub label: String,
    /// Every problem variable, in the spec's order, with this size's values.
    pub problem: Vec<(String, Value)>,
    /// The spec's restrictions with this size's values, over the parameters.
    restrictions: Vec<Expression>,
}

impl EdgeSize {
    /// Whether a configuration (values in parameter order) applies at this size: every
    /// restriction holds there (one that raises excludes it, as in the space).
    pub fn admits(&self, config: &[Value]) -> bool {
        self.restrictions.iter().all(|r| r.holds_with(config).unwrap_or(false))
    }

    /// The values of the spec's problem variables at this size, in their order.
    pub fn values(&self) -> Vec<Value> {
        self.problem.iter().map(|(_, v)| v.clone()).collect()
    }
}

/// Reads `[verify] sizes` against the spec's `problem`, `params` and `restrictions` (as
/// written, over problem variables and parameters). `reference_config` is the reference
/// configuration's values, when the reference is one: it must apply at every size.
pub(super) fn parse(
    sizes: &Json,
    problem: &[(String, Value)],
    params: &[Param],
    restrictions: &[String],
    reference_config: Option<&[Value]>,
) -> Result<Vec<EdgeSize>, String> {
    const KEY: &str = "[verify] sizes";
    let Some(entries) = sizes.as_array() else {
        return Err(format!("{KEY}: give a list of tables of problem variables, e.g. sizes = [{{ n = 4095 }}]"));
    };
    let problem_names: Vec<&str> = problem.iter().map(|(n, _)| n.as_str()).collect();
    let param_names: Vec<&str> = params.iter().map(Param::name).collect();
    let mut edges: Vec<EdgeSize> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let key = format!("{KEY} #{}", index + 1);
        let table = entry.as_object().filter(|t| !t.is_empty()).ok_or_else(|| {
            format!("{key}: give a table of the problem variables that differ, e.g. {{ n = 4095 }}")
        })?;
        if let Some(unknown) = table.keys().find(|k| !problem_names.contains(&k.as_str())) {
            let known = if problem_names.is_empty() { "the spec has no [problem]".into() } else { problem_names.join(", ") };
            return Err(format!("{key}: '{unknown}' is not a problem variable ({known})"));
        }
        let mut values = problem.to_vec();
        for (name, value) in &mut values {
            let Some(json) = table.get(name.as_str()) else { continue };
            *value = Value::from_json(json)
                .filter(|v| same_kind(v, value))
                .ok_or_else(|| format!("{key}: {name} = {json}: the spec's {name} is {}", kind(value)))?;
        }
        let changed: Vec<String> = values
            .iter()
            .zip(problem)
            .filter(|((_, edge), (_, own))| !edge.python_eq(own))
            .map(|((name, value), _)| format!("{name} = {}", value.to_json()))
            .collect();
        if changed.is_empty() {
            return Err(format!("{key}: these are the spec's own [problem] values; give another size"));
        }
        let label = changed.join(", ");
        if edges.iter().any(|e| e.label == label) {
            return Err(format!("{key}: {label} is listed twice"));
        }
        let mut admitted = Vec::new();
        for restriction in restrictions {
            let text = substitute(restriction, &values);
            // A restriction over problem variables alone says which sizes the kernel takes.
            if let Ok(fixed) = Expression::parse(&text, &[]) {
                if !fixed.holds_with(&[]).unwrap_or(false) {
                    return Err(format!(
                        "{key}: the restriction '{restriction}' does not hold at {label}, so no configuration \
                         applies there; give a size the kernel takes"
                    ));
                }
            }
            admitted.push(Expression::parse(&text, &param_names).map_err(|e| format!("{key}: restriction {e}"))?);
        }
        let edge = EdgeSize { label, problem: values, restrictions: admitted };
        if let Some(reference) = reference_config.filter(|r| !edge.admits(r)) {
            let described: Vec<String> =
                param_names.iter().zip(reference).map(|(n, v)| format!("{n} = {}", v.to_json())).collect();
            return Err(format!(
                "{key}: the reference config {{ {} }} is excluded by the restrictions at {}, so it cannot \
                 give the outputs there",
                described.join(", "),
                edge.label
            ));
        }
        edges.push(edge);
    }
    Ok(edges)
}

/// Whether an edge size's value may stand for the spec's: numbers for numbers (an
/// integer for an integer), otherwise the same type.
fn same_kind(edge: &Value, own: &Value) -> bool {
    matches!(
        (edge, own),
        (Value::Int(_), Value::Int(_) | Value::Float(_))
            | (Value::Float(_), Value::Float(_))
            | (Value::Bool(_), Value::Bool(_))
            | (Value::Str(_), Value::Str(_))
    )
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Int(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Str(_) => "a string",
    }
}
