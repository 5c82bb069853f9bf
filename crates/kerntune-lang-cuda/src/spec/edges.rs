//! `[verify] sizes`: other problem sizes at which every configuration is also checked,
//! sizes that are no multiple of its tiles, where its bounds checks matter. Each is a table
//! of the problem variables that differ from `[problem]` (`sizes = [{ n = 4095 }]`); the
//! arguments, the launch geometry, the reference and the restrictions are evaluated with
//! those values. A configuration whose restrictions exclude it at an edge size is not
//! checked there (its `verified_sets` says so). An edge size where a restriction over the
//! problem alone fails (no configuration could apply) is refused, as is one where the
//! reference config is excluded.

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
        let table = entry
            .as_object()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("{key}: give a table of the problem variables that differ, e.g. {{ n = 4095 }}"))?;
        if let Some(unknown) = table.keys().find(|k| !problem_names.contains(&k.as_str())) {
            let known =
                if problem_names.is_empty() { "the spec has no [problem]".into() } else { problem_names.join(", ") };
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use kerntune_space::Value;

    use crate::spec::KernelSpec;

    /// A vector kernel of n elements, tiled by block_size_x * tile, with a reference config.
    fn spec(extra: &str, verify: &str) -> Result<KernelSpec, String> {
        let text = format!(
            r#"{extra}
[kernel]
name = "vector_add"
source = "vector_add.cu"
[problem]
n = 4096
rows = 2
[params]
block_size_x = [32, 64]
tile = [1, 4]
[launch]
problem_size = ["n"]
grid_div_x = ["block_size_x", "tile"]
[[args]]
name = "c"
dtype = "f32"
size = "n * rows"
output = true
[verify]
reference = {{ config = {{ block_size_x = 32, tile = 1 }} }}
{verify}
"#
        );
        let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
        KernelSpec::parse(&text, &folder.join("edges.toml")).map_err(|e| e.to_string())
    }

    fn error(extra: &str, verify: &str) -> String {
        let message = spec(extra, verify).expect_err("refused");
        assert!(!message.contains('\n'), "one line: {message}");
        message
    }

    #[test]
    fn an_edge_size_changes_the_named_variables_and_keeps_the_others() {
        let spec = spec("", "sizes = [{ n = 4095 }, { n = 100, rows = 3 }]").expect("parses");
        let sizes = &spec.verify.as_ref().expect("verify").sizes;
        let labels: Vec<&str> = sizes.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["n = 4095", "n = 100, rows = 3"]);
        assert_eq!(sizes[0].values(), [Value::Int(4095), Value::Int(2)]);
        assert_eq!(sizes[1].values(), [Value::Int(100), Value::Int(3)]);
    }

    #[test]
    fn without_sizes_nothing_is_checked_at_other_sizes() {
        assert!(spec("", "").expect("parses").verify.expect("verify").sizes.is_empty());
    }

    #[test]
    fn edge_sizes_are_part_of_the_results_identity() {
        let plain = spec("", "").expect("parses");
        let edged = spec("", "sizes = [{ n = 4095 }]").expect("parses");
        assert_ne!(plain.fingerprint, edged.fingerprint, "results checked at 4095 are not those of a run that was not");
    }

    #[test]
    fn restrictions_at_an_edge_size_decide_which_configurations_are_checked_there() {
        let restriction = "restrictions = [\"n % (block_size_x * tile) == 0 or tile == 1\"]";
        let spec = spec(restriction, "sizes = [{ n = 4095 }]").expect("parses");
        let edge = &spec.verify.as_ref().expect("verify").sizes[0];
        assert!(edge.admits(&[Value::Int(64), Value::Int(1)]));
        assert!(!edge.admits(&[Value::Int(64), Value::Int(4)]), "4095 is no multiple of 256");
    }

    #[test]
    fn an_unknown_variable_is_refused_with_the_known_ones() {
        let message = error("", "sizes = [{ m = 4095 }]");
        assert!(message.ends_with("[verify] sizes #1: 'm' is not a problem variable (n, rows)"), "{message}");
    }

    #[test]
    fn sizes_must_be_a_list_of_non_empty_tables() {
        let message = error("", "sizes = 4095");
        assert!(message.contains("[verify] sizes: give a list of tables of problem variables"), "{message}");
        let message = error("", "sizes = [{}]");
        assert!(message.contains("[verify] sizes #1: give a table of the problem variables that differ"), "{message}");
        let message = error("", "sizes = [4095]");
        assert!(message.contains("[verify] sizes #1: give a table"), "{message}");
    }

    #[test]
    fn a_value_of_another_kind_than_the_problems_is_refused() {
        let message = error("", "sizes = [{ n = 4095.5 }]");
        assert!(message.contains("[verify] sizes #1: n = 4095.5: the spec's n is an integer"), "{message}");
        let message = error("", "sizes = [{ n = \"big\" }]");
        assert!(message.contains("the spec's n is an integer"), "{message}");
    }

    #[test]
    fn the_specs_own_size_or_a_size_listed_twice_is_refused() {
        let message = error("", "sizes = [{ n = 4096 }]");
        assert!(message.contains("[verify] sizes #1: these are the spec's own [problem] values"), "{message}");
        let message = error("", "sizes = [{ n = 4095 }, { n = 4095, rows = 2 }]");
        assert!(message.contains("[verify] sizes #2: n = 4095 is listed twice"), "{message}");
    }

    #[test]
    fn a_size_that_breaks_a_restriction_over_the_problem_alone_is_refused() {
        let message = error("restrictions = [\"n % 32 == 0\"]", "sizes = [{ n = 4095 }]");
        assert!(
            message.contains("[verify] sizes #1: the restriction 'n % 32 == 0' does not hold at n = 4095"),
            "{message}"
        );
    }

    #[test]
    fn a_reference_config_excluded_at_an_edge_size_is_refused() {
        let message = error("restrictions = [\"block_size_x * tile <= n\"]", "sizes = [{ n = 16 }]");
        assert!(
            message.contains(
                "the reference config { block_size_x = 32, tile = 1 } is excluded by the restrictions at n = 16"
            ),
            "{message}"
        );
    }

    #[test]
    fn expected_outputs_as_files_refuse_edge_sizes() {
        let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
        let example = std::fs::read_to_string(folder.join("spec.toml")).expect("the example");
        let outputs = example.replace(
            "reference = { config = { block_size_x = 256, tile = 1 } }",
            "reference = { outputs = { c = \"c.npy\" } }\nsizes = [{ n = 4095 }]",
        );
        assert_ne!(outputs, example);
        let message = KernelSpec::parse(&outputs, &folder.join("x.toml")).expect_err("refused").to_string();
        assert!(
            message.contains("[verify] sizes: expected outputs given as files fit the spec's own sizes"),
            "{message}"
        );
    }
}
