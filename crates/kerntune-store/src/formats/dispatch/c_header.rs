//! A dispatch table as a C/C++ header: a struct of the configuration's integer fields, the
//! tuned entries, and a lookup function that takes the key's numbers and returns the
//! nearest tuned entry by kerntune's own rule ([`super::nearest`]), for an engine written
//! in C or C++ to launch each size with its tuned configuration.

use std::fmt::Write as _;

use serde_json::Value as Json;

use super::{compare_numbers, numbers, DispatchTable, TableEntry};
use crate::formats::deploy::{comment, identifier, literal};
use crate::StoreError;

/// One leaf of a key: its name (the key's name, with `_0`, `_1`... inside a tensor's
/// `(dtype, shape)`) and its value.
type Leaf<'a> = (String, &'a Json);

/// The header's text; `origin` names the table in errors. Refuses a table whose entries
/// differ in a key part that is not a number (the lookup takes numbers only: export a
/// table per value), or lack an integer field that others have.
pub fn text(table: &DispatchTable, origin: &str) -> Result<String, StoreError> {
    let Some(first) = table.entries.first() else {
        return Err(StoreError::format(origin, "no entries: tune some keys first"));
    };
    let first_leaves = leaves(table, first);
    let arguments: Vec<String> = first_leaves
        .iter()
        .filter(|(_, value)| value.is_number())
        .map(|(name, _)| identifier(name).to_lowercase())
        .collect();
    let fixed: Vec<String> = first_leaves
        .iter()
        .filter(|(_, value)| !value.is_number())
        .map(|(name, value)| format!("{name} = {value}"))
        .collect();
    for entry in &table.entries {
        let entry_leaves = leaves(table, entry);
        let differs = |((name, value), (first_name, first_value)): &(&Leaf, &Leaf)| {
            name != first_name
                || value.is_number() != first_value.is_number()
                || (!value.is_number() && value != first_value)
        };
        let longer = if entry_leaves.len() > first_leaves.len() { &entry_leaves } else { &first_leaves };
        let mismatch = entry_leaves.iter().zip(&first_leaves).find(differs).map(|((name, _), _)| name).or_else(|| {
            (entry_leaves.len() != first_leaves.len()).then(|| &longer[entry_leaves.len().min(first_leaves.len())].0)
        });
        if let Some(name) = mismatch {
            return Err(StoreError::format(
                origin,
                format!(
                    "the keys {} and {} differ in {name}, which the header's lookup cannot take (it takes numbers): export a table per {name}",
                    Json::from(first.key.clone()),
                    Json::from(entry.key.clone())
                ),
            ));
        }
    }
    let fields = integer_fields(table, origin)?;
    let left_out: Vec<&str> =
        first.config.keys().map(String::as_str).filter(|name| !fields.iter().any(|field| field == name)).collect();
    let mut entries: Vec<&TableEntry> = table.entries.iter().collect();
    entries.sort_by(|a, b| compare_numbers(&numbers(&Json::from(a.key.clone())), &numbers(&Json::from(b.key.clone()))));

    let prefix = identifier(&table.kernel);
    let lower = prefix.to_lowercase();
    let guard = format!("KERNTUNE_{prefix}_TABLE_H");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* The dispatch table of {} keyed by {}, written by kerntune",
        comment(&table.kernel),
        comment(&table.key.join(", "))
    );
    let _ = writeln!(out, " * (`kerntune table export TABLE c-header`, `kerntune.export_table`).");
    let _ = writeln!(out, " * {lower}_lookup({}) returns the configuration of the nearest tuned", arguments.join(", "));
    let _ = writeln!(out, " * key: numbers near on a log2 scale (those below 1 counting as 1), ties to");
    let _ = writeln!(out, " * the smaller key, as kerntune's own rule.");
    if !fixed.is_empty() {
        let _ = writeln!(out, " * The same in every entry: {}.", comment(&fixed.join(", ")));
    }
    if !left_out.is_empty() {
        let _ = writeln!(out, " * Left out, not integers: {}.", comment(&left_out.join(", ")));
    }
    let _ = writeln!(out, " * C programs link with -lm. */");
    let _ = writeln!(out, "#ifndef {guard}\n#define {guard}\n\n#include <math.h>\n#include <stddef.h>\n");
    let _ = writeln!(out, "typedef struct {{");
    for field in &fields {
        let _ = writeln!(out, "    long long {};", identifier(field).to_lowercase());
    }
    let _ = writeln!(out, "}} {lower}_config;\n");
    let _ = writeln!(
        out,
        "typedef struct {{\n    double key[{}];\n    {lower}_config config;\n}} {lower}_entry;\n",
        arguments.len().max(1)
    );
    let _ = writeln!(out, "#define {prefix}_TABLE_SIZE {}\n", entries.len());
    let _ = writeln!(out, "static const {lower}_entry {prefix}_TABLE[{prefix}_TABLE_SIZE] = {{");
    for entry in &entries {
        let key: Vec<String> = leaves(table, entry)
            .into_iter()
            .filter(|(_, value)| value.is_number())
            .map(|(_, value)| literal(value))
            .collect();
        let config: Vec<String> = fields.iter().map(|field| literal(&entry.config[field.as_str()])).collect();
        let key = if key.is_empty() { "0".to_string() } else { key.join(", ") };
        let _ = writeln!(out, "    {{{{{key}}}, {{{}}}}},", config.join(", "));
    }
    let _ = writeln!(out, "}};\n");
    let parameters: Vec<String> = arguments.iter().map(|name| format!("double {name}")).collect();
    let parameters = if parameters.is_empty() { "void".to_string() } else { parameters.join(", ") };
    let _ = writeln!(out, "static inline const {lower}_config *{lower}_lookup({parameters}) {{");
    let query = if arguments.is_empty() { "0".to_string() } else { arguments.join(", ") };
    let _ = writeln!(out, "    const double kt_query[] = {{{query}}};");
    let _ = writeln!(out, "    size_t kt_best = 0;\n    double kt_best_distance = HUGE_VAL;");
    let _ = writeln!(out, "    for (size_t kt_i = 0; kt_i < {prefix}_TABLE_SIZE; ++kt_i) {{");
    let _ = writeln!(out, "        double kt_distance = 0.0;");
    let _ = writeln!(out, "        for (size_t kt_j = 0; kt_j < {}; ++kt_j) {{", arguments.len());
    let _ = writeln!(out, "            double kt_a = kt_query[kt_j] > 1.0 ? kt_query[kt_j] : 1.0;");
    let _ = writeln!(
        out,
        "            double kt_b = {prefix}_TABLE[kt_i].key[kt_j] > 1.0 ? {prefix}_TABLE[kt_i].key[kt_j] : 1.0;"
    );
    let _ = writeln!(out, "            kt_distance += fabs(log2(kt_a) - log2(kt_b));\n        }}");
    let _ = writeln!(out, "        if (kt_distance < kt_best_distance) {{\n            kt_best = kt_i;\n            kt_best_distance = kt_distance;\n        }}\n    }}");
    let _ = writeln!(out, "    (void)kt_query;\n    return &{prefix}_TABLE[kt_best].config;\n}}\n");
    let _ = writeln!(out, "#endif /* {guard} */");
    Ok(out)
}

/// The leaves of an entry's key, named after the table's key names.
fn leaves<'a>(table: &DispatchTable, entry: &'a TableEntry) -> Vec<Leaf<'a>> {
    fn walk<'a>(name: String, value: &'a Json, out: &mut Vec<Leaf<'a>>) {
        match value {
            Json::Array(parts) => parts.iter().enumerate().for_each(|(i, part)| walk(format!("{name}_{i}"), part, out)),
            _ => out.push((name, value)),
        }
    }
    let mut out = Vec::new();
    for (index, value) in entry.key.iter().enumerate() {
        let name = table.key.get(index).cloned().unwrap_or_else(|| format!("part{index}"));
        walk(name, value, &mut out);
    }
    out
}

/// The configuration fields that are integers (or booleans) in the first entry; refuses
/// an entry where one of them is missing or not an integer.
fn integer_fields(table: &DispatchTable, origin: &str) -> Result<Vec<String>, StoreError> {
    let is_integer = |value: &Json| value.is_i64() || value.is_u64() || value.is_boolean();
    let fields: Vec<String> =
        table.entries[0].config.iter().filter(|(_, value)| is_integer(value)).map(|(name, _)| name.clone()).collect();
    for entry in &table.entries {
        if let Some(field) = fields.iter().find(|field| !entry.config.get(field.as_str()).is_some_and(is_integer)) {
            return Err(StoreError::format(
                origin,
                format!("the entry of {} has no integer {field}, which others have", Json::from(entry.key.clone())),
            ));
        }
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(entries: Json) -> DispatchTable {
        serde_json::from_value(json!({"kernel": "fused_moe", "key": ["M", "K"], "entries": entries})).expect("a table")
    }

    #[test]
    fn the_lookup_compiles_as_c_and_cpp_and_answers_as_kerntunes_nearest() {
        let entries = json!([
            {"key": [256, 4096, "torch.float16"], "config": {"BLOCK_SIZE_M": 64, "num_warps": 8, "ptx_options": "-O3"}},
            {"key": [16, 4096, "torch.float16"], "config": {"BLOCK_SIZE_M": 16, "num_warps": 4, "ptx_options": "-O3"}},
            {"key": [64, 4096, "torch.float16"], "config": {"BLOCK_SIZE_M": 32, "num_warps": 4, "ptx_options": "-O3"}},
        ]);
        let table = table(entries);
        let header = text(&table, "t.json").expect("a header");
        assert!(
            header.contains(
                "typedef struct {\n    long long block_size_m;\n    long long num_warps;\n} fused_moe_config;"
            ),
            "{header}"
        );
        assert!(header.contains("The same in every entry: part2 = \"torch.float16\"."), "{header}");
        assert!(header.contains("Left out, not integers: ptx_options."), "{header}");
        let queries = [1.0, 16.0, 20.0, 32.0, 48.0, 64.0, 100.0, 128.0, 256.0, 5000.0];
        let expected: Vec<String> = queries
            .iter()
            .map(|m| {
                let entry = table.nearest(&[json!(m), json!(4096), json!("torch.float16")]).expect("a neighbour");
                entry.config["BLOCK_SIZE_M"].to_string()
            })
            .collect();
        let calls: String = queries
            .iter()
            .map(|m| format!("printf(\"%lld\\n\", fused_moe_lookup({m:.1}, 4096.0)->block_size_m);\n"))
            .collect();
        let folder = tempfile::tempdir().expect("a folder");
        std::fs::write(folder.path().join("table.h"), &header).expect("writes");
        let program = format!("#include <stdio.h>\n#include \"table.h\"\nint main(void) {{\n{calls}return 0;\n}}\n");
        for (compiler, language) in [("cc", "c"), ("c++", "c++")] {
            let source = folder.path().join(format!("use.{}", if language == "c" { "c" } else { "cpp" }));
            std::fs::write(&source, &program).expect("writes");
            let binary = folder.path().join(format!("use-{language}"));
            let Ok(output) = std::process::Command::new(compiler)
                .args(["-Wall", "-Wextra", "-Werror", "-x", language])
                .arg(&source)
                .arg("-o")
                .arg(&binary)
                .arg("-lm")
                .output()
            else {
                eprintln!("skipped: no {compiler} on this machine to compile the header with");
                continue;
            };
            assert!(output.status.success(), "{compiler}: {}", String::from_utf8_lossy(&output.stderr));
            let run = std::process::Command::new(&binary).output().expect("the program runs");
            let answers: Vec<String> = String::from_utf8_lossy(&run.stdout).lines().map(str::to_string).collect();
            assert_eq!(answers, expected, "{compiler}: for M in {queries:?}");
        }
        assert_eq!(
            expected,
            ["16", "16", "16", "16", "32", "32", "32", "32", "64", "64"],
            "20 and 32 go to 16, 128 to 64"
        );
    }

    #[test]
    fn keys_the_lookup_cannot_take_and_missing_fields_are_refused_in_one_line() {
        let dtypes = table(json!([
            {"key": [16, 4096, "torch.float16"], "config": {"num_warps": 4}},
            {"key": [16, 4096, "torch.bfloat16"], "config": {"num_warps": 4}},
        ]));
        assert_eq!(
            text(&dtypes, "t.json").unwrap_err().to_string(),
            r#"t.json: the keys [16,4096,"torch.float16"] and [16,4096,"torch.bfloat16"] differ in part2, which the header's lookup cannot take (it takes numbers): export a table per part2"#
        );
        let missing = table(
            json!([{"key": [16, 1], "config": {"num_warps": 4}}, {"key": [32, 1], "config": {"num_warps": "4"}}]),
        );
        assert_eq!(
            text(&missing, "t.json").unwrap_err().to_string(),
            "t.json: the entry of [32,1] has no integer num_warps, which others have"
        );
        assert_eq!(
            text(&table(json!([])), "t.json").unwrap_err().to_string(),
            "t.json: no entries: tune some keys first"
        );
    }
}
