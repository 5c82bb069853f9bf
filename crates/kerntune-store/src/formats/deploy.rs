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

/// A header with the best configuration of each of several tunings of one kernel (other
/// problems, other GPUs) as a table that compiles as C and as C++: a struct of the device,
/// the problem and one field per parameter, and one row per tuning, for a program to pick
/// the row of its problem at run time. Tunings without a successful configuration have no
/// row; `None` when none has one. A parameter whose values are not all numbers (or all
/// booleans) is a string column. Returns the header and its number of rows.
pub fn header_table(tunings: &[(&TuningInfo, &[StoredEvaluation])]) -> Option<(String, usize)> {
    let rows: Vec<(&TuningInfo, &StoredEvaluation)> =
        tunings.iter().filter_map(|(info, rows)| Some((*info, *ranked(info, rows, 1).first()?))).collect();
    let (first, _) = *rows.first()?;
    let prefix = identifier(&first.kernel_name);
    let guard = format!("KERNTUNE_{prefix}_H");
    let mut names: Vec<&str> = Vec::new();
    for (info, _) in &rows {
        for param in &info.params {
            if !names.contains(&param.name()) {
                names.push(param.name());
            }
        }
    }
    let column_type = |name: &str| -> &'static str {
        let values: Vec<&Json> = rows.iter().filter_map(|(_, best)| best.config.get(name)).collect();
        if values.iter().all(|v| v.is_i64() || v.is_u64()) {
            "long long"
        } else if values.iter().all(|v| v.is_number()) {
            "double"
        } else if values.iter().all(|v| v.is_boolean()) {
            "int"
        } else {
            "const char *"
        }
    };
    let mut out = String::new();
    let _ =
        writeln!(out, "/* The best configuration of {} for each problem kerntune tuned,", comment(&first.kernel_name));
    let _ = writeln!(out, " * one row per tuning (device and problem as the store names them).");
    let _ = writeln!(out, " * Written by `kerntune export --format header`. */");
    let _ = writeln!(
        out,
        "#ifndef {guard}
#define {guard}
"
    );
    let _ = writeln!(
        out,
        "typedef struct {{
    const char *device;
    const char *problem;"
    );
    for name in &names {
        let kind = column_type(name);
        let space = if kind.ends_with('*') { "" } else { " " };
        let _ = writeln!(out, "    {kind}{space}{};", identifier(name).to_lowercase());
    }
    let _ = writeln!(
        out,
        "}} {}_config;
",
        prefix.to_lowercase()
    );
    let _ = writeln!(out, "static const {}_config {prefix}_CONFIGS[] = {{", prefix.to_lowercase());
    for (info, best) in &rows {
        let mut fields =
            vec![literal(&Json::String(info.device.clone())), literal(&Json::String(info.problem.clone()))];
        for name in &names {
            let value = best.config.get(*name).cloned().unwrap_or(Json::Null);
            fields.push(match (column_type(name), &value) {
                ("const char *", Json::String(_)) => literal(&value),
                ("const char *", other) => literal(&Json::String(other.to_string())),
                (_, Json::Null) => "0".to_string(),
                _ => literal(&value),
            });
        }
        let _ = writeln!(out, "    {{{}}},", fields.join(", "));
    }
    let _ = writeln!(
        out,
        "}};
#define {prefix}_CONFIG_COUNT {}
",
        rows.len()
    );
    let _ = writeln!(out, "#endif /* {guard} */");
    Some((out, rows.len()))
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
pub(crate) fn identifier(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A value as a C literal: integers and floats as numbers, booleans as 1 or 0, strings
/// quoted and escaped.
pub(crate) fn literal(value: &Json) -> String {
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
pub(crate) fn comment(text: &str) -> String {
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

    fn tuning(problem: &str, params: &[(&str, Json)]) -> (TuningInfo, Vec<StoredEvaluation>) {
        let info = TuningInfo {
            kernel: "k".into(),
            kernel_name: "matmul".into(),
            device: "NVIDIA H100".into(),
            problem: problem.into(),
            params: params
                .iter()
                .map(|(name, value)| kerntune_space::Param::new(*name, vec![value_of(value)]).expect("a parameter"))
                .collect(),
            objective: crate::Objective::time(),
        };
        let mut evaluation = crate::Evaluation::failed(crate::Status::Ok, String::new(), Default::default());
        evaluation.objective = Some(1.0);
        let config = params.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
        (info, vec![StoredEvaluation { config, evaluation, created: String::new() }])
    }

    fn value_of(json: &Json) -> kerntune_space::Value {
        match json {
            Json::Bool(b) => kerntune_space::Value::Bool(*b),
            Json::String(s) => kerntune_space::Value::Str(s.clone()),
            n if n.is_i64() => kerntune_space::Value::Int(n.as_i64().unwrap_or(0)),
            n => kerntune_space::Value::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    #[test]
    fn several_problems_make_one_table_that_compiles_as_c_and_cpp() {
        let a = tuning(r#"{"N": 4096}"#, &[("block", json!(64)), ("scale", json!(0.5)), ("opts", json!("-O3"))]);
        let b = tuning(r#"{"N": 8192}"#, &[("block", json!(128)), ("scale", json!(2)), ("opts", json!(1))]);
        let (header, rows) = header_table(&[(&a.0, &a.1), (&b.0, &b.1)]).expect("a table");
        assert_eq!(rows, 2);
        assert!(header.contains("    long long block;\n    double scale;\n    const char *opts;"), "{header}");
        assert!(header.contains(r#"{"NVIDIA H100", "{\"N\": 8192}", 128, 2, "1"},"#), "{header}");
        assert!(header.contains("#define MATMUL_CONFIG_COUNT 2"), "{header}");
        let folder = std::env::temp_dir().join(format!("kerntune-header-{}", std::process::id()));
        std::fs::create_dir_all(&folder).expect("a folder");
        std::fs::write(folder.join("tuned.h"), &header).expect("writes");
        let source = folder.join("use.c");
        std::fs::write(
            &source,
            "#include \"tuned.h\"\nint main(void) { return (int)MATMUL_CONFIGS[1].block - 128; }\n",
        )
        .expect("writes");
        for (compiler, language) in [("cc", "c"), ("c++", "c++")] {
            let Ok(output) = std::process::Command::new(compiler)
                .args(["-fsyntax-only", "-Wall", "-Werror", "-x", language])
                .arg(&source)
                .output()
            else {
                eprintln!("skipped: no {compiler} on this machine");
                continue;
            };
            assert!(output.status.success(), "{compiler}: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::fs::remove_dir_all(&folder).ok();
    }
}
