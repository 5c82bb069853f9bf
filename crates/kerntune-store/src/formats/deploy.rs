//! Results as deployed: a C/C++ header of `#define`s for the best configuration, and a
//! JSON list of the best configurations from which Triton's `triton.Config`s are built
//! (`kerntune.load_configs`).

use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use crate::{StoredEvaluation, TuningInfo};

/// The `top` best successful evaluations of a tuning, best first.
pub fn ranked<'a>(tuning: &TuningInfo, rows: &'a [StoredEvaluation], top: usize) -> Vec<&'a StoredEvaluation> {
    let objective = &tuning.objective;
    let mut ok: Vec<(f64, &StoredEvaluation)> =
        rows.iter().filter_map(|r| r.evaluation.valid_objective().map(|o| (objective.score(o), r))).collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    ok.into_iter().take(top).map(|(_, r)| r).collect()
}

/// A header that compiles as C and as C++: the best configuration's parameters as
/// `#define KERNEL_PARAM value`, with where it was measured in a comment; `None` when no
/// configuration succeeded.
pub fn header(tuning: &TuningInfo, rows: &[StoredEvaluation]) -> Option<String> {
    let best = *ranked(tuning, rows, 1).first()?;
    let prefix = identifier(&tuning.kernel_name);
    let guard = format!("KERNTUNE_{prefix}_H");
    let mut out = String::new();
    let objective = &tuning.objective;
    let direction = if objective.higher_is_better { "higher" } else { "lower" };
    let value = best.evaluation.objective.unwrap_or(f64::NAN);
    let _ = writeln!(out, "/* The best configuration of {} found by kerntune.", comment(&tuning.kernel_name));
    let _ = writeln!(out, " * Device: {}", comment(&tuning.device));
    let _ = writeln!(out, " * Problem: {}", comment(&tuning.problem));
    let _ = writeln!(out, " * {} = {value} ({direction} is better)", comment(&objective.name));
    let _ = writeln!(out, " * Written by `kerntune export --format header`. */");
    let _ = writeln!(out, "#ifndef {guard}\n#define {guard}\n");
    for param in &tuning.params {
        if let Some(value) = best.config.get(param.name()) {
            let _ = writeln!(out, "#define {prefix}_{} {}", identifier(param.name()), literal(value));
        }
    }
    let _ = writeln!(out, "\n#endif /* {guard} */");
    Some(out)
}

/// The `top` best configurations, best first, as flat objects of parameter values with
/// their objective, for `kerntune.load_configs` to turn into `triton.Config`s.
pub fn configs(tuning: &TuningInfo, rows: &[StoredEvaluation], top: usize) -> Json {
    let configs: Vec<Json> = ranked(tuning, rows, top)
        .into_iter()
        .map(|row| json!({"config": row.config, "objective": row.evaluation.objective}))
        .collect();
    json!({
        "kernel": tuning.kernel_name,
        "device": tuning.device,
        "problem": tuning.problem,
        "objective": tuning.objective,
        "configs": configs,
    })
}

/// An upper-case C identifier made of `name` (other characters become `_`).
fn identifier(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A value as a C literal: integers and floats as numbers, booleans as 1 or 0, strings
/// quoted and escaped.
fn literal(value: &Json) -> String {
    match value {
        Json::Bool(b) => u8::from(*b).to_string(),
        Json::Number(n) if n.is_f64() => {
            let text = n.to_string();
            if text.contains(['.', 'e', 'E']) {
                text
            } else {
                format!("{text}.0")
            }
        }
        Json::Number(n) => n.to_string(),
        Json::String(s) => {
            let escaped: String = s
                .chars()
                .flat_map(|c| match c {
                    '"' => vec!['\\', '"'],
                    '\\' => vec!['\\', '\\'],
                    '\n' => vec!['\\', 'n'],
                    c => vec![c],
                })
                .collect();
            format!("\"{escaped}\"")
        }
        other => format!("\"{}\"", other.to_string().replace('"', "'")),
    }
}

/// Text safe inside a C comment.
fn comment(text: &str) -> String {
    text.replace("*/", "* /")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_become_c() {
        assert_eq!(identifier("block_size_x"), "BLOCK_SIZE_X");
        assert_eq!(identifier("matmul<float, 4>"), "MATMUL_FLOAT__4_");
        assert_eq!(identifier("2d"), "_2D");
        assert_eq!(literal(&json!(64)), "64");
        assert_eq!(literal(&json!(-3)), "-3");
        assert_eq!(literal(&json!(0.5)), "0.5");
        assert_eq!(literal(&json!(2.0)), "2.0");
        assert_eq!(literal(&json!(true)), "1");
        assert_eq!(literal(&json!("-O3 \"x\"")), "\"-O3 \\\"x\\\"\"");
        assert_eq!(comment("a */ b"), "a * / b");
    }
}
