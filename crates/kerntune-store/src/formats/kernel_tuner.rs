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

const KNOWN_FIELDS: [&str; 8] = [
    "times",
    "compile_time",
    "verification_time",
    "benchmark_time",
    "framework_time",
    "strategy_time",
    "timestamp",
    "time",
];

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
        let costs = Costs {
            compile_s: seconds(entry, "compile_time"),
            verify_s: seconds(entry, "verification_time"),
            benchmark_s: seconds(entry, "benchmark_time"),
            framework_s: seconds(entry, "framework_time"),
            strategy_s: seconds(entry, "strategy_time"),
        };
        let mut evaluation = match entry.get(objective_name) {
            Some(Json::Number(n)) => {
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
            Some(Json::String(failure)) => Evaluation::failed(failure_status(failure), failure.clone(), costs),
            _ => return Err(StoreError::format(origin, format!("{what} has no \"{objective_name}\""))),
        };
        evaluation.metrics = entry
            .iter()
            .filter(|(k, v)| v.is_number() && !KNOWN_FIELDS.contains(&k.as_str()) && *k != objective_name)
            .filter(|(k, _)| params.iter().all(|p| p.name() != *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
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

/// Kernel Tuner's failure markers, and the status each stands for.
fn failure_status(marker: &str) -> Status {
    match marker {
        "CompilationFailedConfig" => Status::CompileFailed,
        "InvalidConfig" => Status::InvalidConfig,
        _ => Status::RuntimeFailed,
    }
}

fn failure_marker(status: Status) -> &'static str {
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

/// A cache document Kernel Tuner can load with `cache=` or `simulation_mode=True`.
pub fn write(tuning: &TuningInfo, rows: &[StoredEvaluation]) -> Json {
    let objective = tuning.objective.name.as_str();
    let mut cache = Map::new();
    for row in rows {
        let values: Vec<Value> = tuning
            .params
            .iter()
            .map(|p| row.config.get(p.name()).and_then(Value::from_json).unwrap_or(Value::Int(0)))
            .collect();
        let key = values.iter().map(python_str).collect::<Vec<_>>().join(",");
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
        cache.insert(key, Json::Object(entry));
    }
    let problem: Json = serde_json::from_str(&tuning.problem).unwrap_or(Json::String(tuning.problem.clone()));
    json!({
        "device_name": tuning.device,
        "kernel_name": tuning.kernel_name,
        "problem_size": problem,
        "tune_params_keys": tuning.params.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "tune_params": crate::params_json(&tuning.params),
        "objective": objective,
        "cache": cache,
    })
}
