//! Kernel Tuner's cache file: `{device_name, kernel_name, problem_size, tune_params_keys,
//! tune_params, objective, cache: {"v1,v2,...": {param values, objective, times,
//! compile_time, ...}}}`, where a failed entry holds a string such as
//! `"CompilationFailedConfig"` in place of the objective. Times are in milliseconds.

use serde_json::{json, Map, Value as Json};

use kerntune_space::{params_from_json, Value};

use super::{config_indexes, ms, seconds};
use crate::{Costs, Evaluation, Objective, Status, StoreError, StoredEvaluation, TuningInfo};
use crate::{Format, Landscape, Record};

/// kerntune's mark on an entry whose time was measured from the few samples taken before
/// the early stop (`true`): Kernel Tuner reads the time, kerntune the status too.
const EARLY_STOPPED: &str = "early_stopped";

/// Fields of an entry that are neither parameters nor metrics (`status`, `reason` and
/// `verified_sets` are kerntune's, in `tune_kernel`'s results). The time is a metric where
/// it is not the objective.
const KNOWN_FIELDS: [&str; 10] = [
    "times",
    "compile_time",
    "verification_time",
    "benchmark_time",
    "framework_time",
    "strategy_time",
    "timestamp",
    "status",
    "reason",
    "verified_sets",
];

/// The cache document in `text`, also when Kernel Tuner left the file open for appending (a
/// run it did not finish: no closing braces, a trailing comma), which reads as if closed.
pub fn document(text: &str, origin: &str) -> Result<Map<String, Json>, StoreError> {
    let text = text.trim();
    let closed = match text.is_empty() || text.ends_with("}\n}") || text.ends_with("}}}") {
        true => text.to_string(),
        false => format!("{}}}\n}}", text.trim_end_matches(',')),
    };
    let json: Json = serde_json::from_str(&closed)
        .or_else(|_| serde_json::from_str(text))
        .map_err(|e| StoreError::Json { path: origin.to_string(), message: e.to_string() })?;
    match json {
        Json::Object(document) if document.get("cache").is_some_and(Json::is_object) => Ok(document),
        _ => Err(StoreError::format(origin, "not a Kernel Tuner cache file (no \"cache\" object)")),
    }
}

pub(crate) fn parse(document: &Map<String, Json>, origin: &str) -> Result<Landscape, StoreError> {
    let Some(Json::Object(tune_params)) = document.get("tune_params") else {
        return Err(StoreError::format(origin, "a Kernel Tuner cache file needs a \"tune_params\" object"));
    };
    // `tune_params_keys` fixes the parameter order where JSON object order was lost.
    let ordered: Map<String, Json> = match document.get("tune_params_keys").and_then(Json::as_array) {
        Some(keys) => keys
            .iter()
            .filter_map(Json::as_str)
            .filter_map(|k| tune_params.get(k).map(|v| (k.to_string(), v.clone())))
            .collect(),
        None => tune_params.clone(),
    };
    let params = params_from_json(&ordered).map_err(|source| StoreError::Space { path: origin.to_string(), source })?;
    let objective_name = document.get("objective").and_then(Json::as_str).unwrap_or("time");
    let Some(Json::Object(cache)) = document.get("cache") else {
        return Err(StoreError::format(origin, "\"cache\" must be an object"));
    };
    let mut records = Vec::with_capacity(cache.len());
    for (key, entry) in cache {
        let what = format!("cache entry \"{key}\"");
        let Json::Object(entry) = entry else {
            return Err(StoreError::format(origin, format!("{what} is not an object")));
        };
        let config = config_indexes(&params, entry, origin, &what)?;
        let is_param = |name: &str| params.iter().any(|p| p.name() == name);
        let evaluation = entry_evaluation(entry, objective_name, is_param)
            .ok_or_else(|| StoreError::format(origin, format!("{what} has no \"{objective_name}\"")))?;
        let timestamp = entry.get("timestamp").and_then(Json::as_str).map(str::to_string);
        records.push(Record { config, evaluation, timestamp });
    }
    Ok(Landscape {
        kernel_name: document.get("kernel_name").and_then(Json::as_str).unwrap_or("kernel").to_string(),
        device_name: document.get("device_name").and_then(Json::as_str).unwrap_or("unknown device").to_string(),
        problem_size: document.get("problem_size").cloned().unwrap_or(Json::Null),
        params,
        objective: Objective::named(objective_name),
        records,
        format: Format::KernelTunerCache,
    })
}

/// The evaluation an entry records: its objective (or the failure's marker), samples, costs
/// and metrics (the other numbers that are not parameters); `None` without the objective.
/// An entry of `tune_kernel`'s results list also holds kerntune's `status` and `reason`, and
/// a failed one no value of an objective other than the time.
fn entry_evaluation(entry: &Map<String, Json>, objective: &str, is_param: impl Fn(&str) -> bool) -> Option<Evaluation> {
    let costs = Costs {
        compile_s: seconds(entry, "compile_time"),
        verify_s: seconds(entry, "verification_time"),
        benchmark_s: seconds(entry, "benchmark_time"),
        framework_s: seconds(entry, "framework_time"),
        strategy_s: seconds(entry, "strategy_time"),
    };
    let status = entry.get("status").and_then(Json::as_str).and_then(|s| s.parse::<Status>().ok());
    let mut evaluation = match (entry.get(objective), status) {
        (Some(Json::Number(n)), _) => {
            let samples = entry
                .get("times")
                .and_then(Json::as_array)
                .map_or_else(Vec::new, |times| times.iter().filter_map(Json::as_f64).collect());
            let mut evaluation = Evaluation::ok(n.as_f64().unwrap_or(f64::NAN), samples, costs);
            if entry.get(EARLY_STOPPED) == Some(&Json::Bool(true)) {
                evaluation.status = Status::EarlyStopped;
            }
            evaluation
        }
        (Some(Json::String(failure)), _) => Evaluation::failed(failure_status(failure), failure.clone(), costs),
        (None, Some(status)) if status.is_failure() => Evaluation::failed(status, status.as_str(), costs),
        _ => return None,
    };
    if let Some(status) = status {
        evaluation.status = status;
    }
    if let Some(reason) = entry.get("reason").and_then(Json::as_str) {
        evaluation.reason = Some(reason.to_string());
    }
    evaluation.metrics = entry
        .iter()
        .filter(|(k, v)| v.is_number() && !KNOWN_FIELDS.contains(&k.as_str()) && *k != objective && !is_param(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(evaluation)
}

/// Kernel Tuner's failure markers, and the status each stands for.
fn failure_status(marker: &str) -> Status {
    match marker {
        "CompilationFailedConfig" => Status::CompileFailed,
        "InvalidConfig" => Status::InvalidConfig,
        _ => Status::RuntimeFailed,
    }
}

pub(crate) fn failure_marker(status: Status) -> &'static str {
    match status {
        Status::CompileFailed => "CompilationFailedConfig",
        Status::InvalidConfig => "InvalidConfig",
        _ => "RuntimeFailedConfig",
    }
}

/// Python's `str()` of a value, which Kernel Tuner joins with commas into cache keys.
fn python_str(value: &Value) -> String {
    match value {
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        other => other.source_text(),
    }
}

/// The results list of `tune_kernel` (each result a cache entry, with kerntune's `status`
/// and `reason`) as stored evaluations of the parameters `names`; a result without a
/// `timestamp` has an empty one.
pub fn results(results: &[Json], names: &[String], objective: &str) -> Result<Vec<StoredEvaluation>, StoreError> {
    results
        .iter()
        .enumerate()
        .map(|(i, result)| {
            let what = || format!("result {i}");
            let entry = result
                .as_object()
                .ok_or_else(|| StoreError::format("results", format!("{} is not an object", what())))?;
            let evaluation = entry_evaluation(entry, objective, |name| names.iter().any(|n| n == name))
                .ok_or_else(|| StoreError::format("results", format!("{} has no \"{objective}\"", what())))?;
            let config = names.iter().filter_map(|name| Some((name.clone(), entry.get(name)?.clone()))).collect();
            let created = entry.get("timestamp").and_then(Json::as_str).unwrap_or_default().to_string();
            Ok(StoredEvaluation { config, evaluation, created })
        })
        .collect()
}

/// A cache entry's key: Python's `str()` of each value, in parameter order, joined with commas.
pub fn key(names: &[&str], config: &Map<String, Json>) -> String {
    let value = |name: &&str| config.get(*name).and_then(Value::from_json).unwrap_or(Value::Int(0));
    names.iter().map(|name| python_str(&value(name))).collect::<Vec<_>>().join(",")
}

/// The cache entry of an evaluation: the parameters, the objective (or the failure's
/// marker), the samples, the costs in ms, the metrics and the time it was stored.
fn entry(objective: &str, row: &StoredEvaluation) -> Json {
    let mut entry = row.config.clone();
    let evaluation = &row.evaluation;
    match evaluation.measured_objective() {
        Some(value) => {
            entry.insert(objective.to_string(), json!(value));
            if evaluation.status == Status::EarlyStopped {
                entry.insert(EARLY_STOPPED.into(), json!(true));
            }
        }
        None => {
            entry.insert(objective.to_string(), json!(failure_marker(evaluation.status)));
        }
    }
    entry.insert("times".into(), json!(evaluation.samples));
    entry.insert("compile_time".into(), ms(evaluation.costs.compile_s));
    entry.insert("verification_time".into(), ms(evaluation.costs.verify_s));
    entry.insert("benchmark_time".into(), ms(evaluation.costs.benchmark_s));
    entry.insert("strategy_time".into(), ms(evaluation.costs.strategy_s));
    entry.insert("framework_time".into(), ms(evaluation.costs.framework_s));
    for (name, value) in &evaluation.metrics {
        entry.insert(name.clone(), value.clone());
    }
    entry.insert("timestamp".into(), json!(row.created));
    Json::Object(entry)
}

/// A cache document Kernel Tuner can load with `cache=` or `simulation_mode=True`.
pub fn write(tuning: &TuningInfo, rows: &[StoredEvaluation]) -> Json {
    let problem: Json = serde_json::from_str(&tuning.problem).unwrap_or(Json::String(tuning.problem.clone()));
    let mut document = json!({
        "device_name": tuning.device,
        "kernel_name": tuning.kernel_name,
        "problem_size": problem,
        "tune_params_keys": tuning.params.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "tune_params": crate::params_json(&tuning.params),
        "objective": tuning.objective.name,
        "cache": {},
    });
    add(&mut document, rows);
    document
}

/// Adds `rows` to the cache of `document` (a cache file's header, with the entries it
/// already holds), each in place of an entry of the same configuration.
pub fn add(document: &mut Json, rows: &[StoredEvaluation]) {
    let (names, objective) = header(document);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    if !document["cache"].is_object() {
        document["cache"] = json!({});
    }
    if let Some(cache) = document["cache"].as_object_mut() {
        for row in rows {
            cache.insert(key(&names, &row.config), entry(&objective, row));
        }
    }
}

/// Adds `tune_kernel`'s results list to the cache of `document`, as [`add`] does.
pub fn add_results(document: &mut Json, listed: &[Json]) -> Result<(), StoreError> {
    let (names, objective) = header(document);
    add(document, &results(listed, &names, &objective)?);
    Ok(())
}

/// The parameters' names and the objective a cache file's header states.
fn header(document: &Json) -> (Vec<String>, String) {
    let names = document["tune_params_keys"]
        .as_array()
        .map_or_else(Vec::new, |keys| keys.iter().filter_map(Json::as_str).map(str::to_string).collect());
    (names, document["objective"].as_str().unwrap_or("time").to_string())
}

/// A cache document's text in the layout Kernel Tuner itself appends to: the header's keys
/// first, `"cache"` last with one entry per line, no closing braces until the end, so that
/// Kernel Tuner can resume from the file too. Values are written as Python's `json.dumps`
/// writes them, with a space after each comma and colon.
pub fn text(document: &Json) -> String {
    let empty = Map::new();
    let object = document.as_object().unwrap_or(&empty);
    let member =
        |name: &String, value: &Json| format!("{}: {}", python_json(&Json::String(name.clone())), python_json(value));
    let header =
        object.iter().filter(|(name, _)| name.as_str() != "cache").map(|(name, value)| member(name, value) + ",");
    let entries: Vec<String> =
        object.get("cache").and_then(Json::as_object).into_iter().flatten().map(|(k, v)| member(k, v)).collect();
    let mut lines: Vec<String> = std::iter::once("{".to_string()).chain(header).collect();
    lines.push(format!("\"cache\": {{\n{}}}\n}}", entries.join(",\n")));
    lines.join("\n")
}

/// JSON as Python's `json.dumps` writes it by default: `", "` between items, `": "` after keys.
fn python_json(value: &Json) -> String {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            writer.write_all(if first { b"" } else { b", " })
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
            writer.write_all(if first { b"" } else { b", " })
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
            writer.write_all(b": ")
        }
    }
    let mut bytes = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, Spaced);
    match serde::Serialize::serialize(value, &mut serializer) {
        Ok(()) => String::from_utf8(bytes).unwrap_or_else(|_| value.to_string()),
        Err(_) => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_header() -> Json {
        json!({"kernel_name": "k", "tune_params_keys": ["bx", "fast"], "tune_params": {"bx": [64, 128], "fast": [true, false]},
               "objective": "time", "cache": {"64,True": {"bx": 64, "fast": true, "time": 9.0, "times": [9.0]}}})
    }

    #[test]
    fn a_cache_its_run_left_open_for_appending_reads_as_closed_and_replays() {
        let closed = text(&cache_header());
        let open = format!("{},", closed.trim_end().trim_end_matches("}\n}"));
        let read = document(&open, "open.json").expect("an open cache reads");
        assert_eq!(Json::Object(read), cache_header());
        let landscape = Landscape::parse(open.as_bytes(), "open.json", "k").expect("and replays");
        assert_eq!(landscape.records.len(), 1);
        let other = document("{\"results\": []}", "t4.json").expect_err("not a cache");
        assert!(other.to_string().contains("no \"cache\" object"), "{other}");
    }

    #[test]
    fn a_cache_written_and_read_again_keeps_every_time_bit_for_bit() {
        // A time that JSON parsing without correct rounding reads one unit in the last
        // place off (0.009632000233978031): a resumed tuning then reported other times.
        let times: [f64; 5] = [0.009632000233978033, 0.1 + 0.2, 1.0 / 3.0, 5e-324, f64::MIN_POSITIVE / 3.0];
        let mut header = cache_header();
        header["cache"]["64,True"]["time"] = json!(times[0]);
        header["cache"]["64,True"]["times"] = json!(times);
        let read = document(&text(&header), "times.json").expect("reads");
        let entry = &read["cache"]["64,True"];
        assert_eq!(entry["time"].as_f64().map(f64::to_bits), Some(times[0].to_bits()));
        let read_times: Vec<u64> =
            entry["times"].as_array().expect("times").iter().filter_map(Json::as_f64).map(f64::to_bits).collect();
        assert_eq!(read_times, times.map(f64::to_bits));
    }

    #[test]
    fn results_keep_kerntunes_status_and_reason_and_no_metric_of_its_own_keys() {
        let names = ["bx".to_string(), "fast".to_string()];
        let listed = json!([{"bx": 128, "fast": false, "time": "RuntimeFailedConfig", "times": [], "status": "invalid_output",
                             "reason": "3 elements wrong", "verified_sets": 0, "compile_time": 20.0, "timestamp": "now"}]);
        let rows = results(listed.as_array().expect("a list"), &names, "time").expect("reads");
        let evaluation = &rows[0].evaluation;
        assert_eq!(
            (evaluation.status, evaluation.reason.as_deref()),
            (Status::InvalidOutput, Some("3 elements wrong"))
        );
        assert!(evaluation.metrics.is_empty(), "{:?}", evaluation.metrics);
        assert!((evaluation.costs.compile_s - 0.02).abs() < 1e-12);
        assert_eq!(rows[0].config, *json!({"bx": 128, "fast": false}).as_object().expect("an object"));
    }

    #[test]
    fn under_another_objective_the_time_is_kept_and_a_failed_result_needs_no_value_of_it() {
        let names = ["bx".to_string()];
        let listed = json!([{"bx": 64, "time": 2.0, "GFLOP/s": 40.0, "status": "ok"},
                            {"bx": 128, "time": "CompilationFailedConfig", "status": "compile_failed"}]);
        let rows = results(listed.as_array().expect("a list"), &names, "GFLOP/s").expect("reads");
        assert_eq!(rows[0].evaluation.objective, Some(40.0));
        assert_eq!(rows[0].evaluation.metrics.get("time"), Some(&json!(2.0)));
        assert_eq!(rows[1].evaluation.status, Status::CompileFailed);
    }

    #[test]
    fn added_results_replace_their_entries_and_the_text_has_one_entry_a_line_last() {
        let mut document = cache_header();
        let listed =
            json!([{"bx": 64, "fast": true, "time": 1.5, "times": [1.5]}, {"bx": 128, "fast": true, "time": 2.5}]);
        add_results(&mut document, listed.as_array().expect("a list")).expect("reads");
        let text = text(&document);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[lines.len() - 3].starts_with("\"64,True\": {"), "{text}");
        assert!(lines[lines.len() - 2].starts_with("\"128,True\": {"), "{text}");
        assert_eq!(lines[lines.len() - 1], "}");
        let again: Json = serde_json::from_str(&text).expect("JSON");
        assert_eq!(again["cache"]["64,True"]["time"], json!(1.5));
        assert_eq!(again["kernel_name"], json!("k"));
    }
}
