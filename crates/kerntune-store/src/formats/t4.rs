//! The T4 format: `{"schema_version", "metadata": {"timeunit"}, "results": [{"timestamp",
//! "configuration", "times": {"compilation", "framework", "search_algorithm",
//! "validation", "runtimes": [...]}, "invalidity", "correctness", "measurements":
//! [{"name", "value", "unit"}], "objectives": [...]}]}`.

use serde_json::{json, Map, Value as Json};

use kerntune_space::{Param, Value};

use super::{config_indexes, kernel_tuner, ms, seconds};
use crate::{Costs, Evaluation, Objective, Status, StoreError, StoredEvaluation, TuningInfo};
use crate::{Format, Landscape, Record};

pub(crate) fn parse(document: &Map<String, Json>, origin: &str, name_hint: &str) -> Result<Landscape, StoreError> {
    let Some(Json::Array(results)) = document.get("results") else {
        return Err(StoreError::format(origin, "\"results\" must be a list"));
    };
    let metadata = document.get("metadata").and_then(Json::as_object);
    // Times are milliseconds unless the metadata says seconds.
    let unit_to_ms = match metadata.and_then(|m| m.get("timeunit")).and_then(Json::as_str) {
        Some("seconds" | "s") => 1e3,
        Some("microseconds" | "us") => 1e-3,
        _ => 1.0,
    };
    let configurations = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.get("configuration")
                .and_then(Json::as_object)
                .ok_or_else(|| StoreError::format(origin, format!("result {i} has no \"configuration\" object")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let params = params_of(&configurations, origin)?;
    let objective_name =
        results.iter().find_map(|r| r.get("objectives")?.as_array()?.first()?.as_str()).unwrap_or("time").to_string();
    let mut records = Vec::with_capacity(results.len());
    for (i, (result, configuration)) in results.iter().zip(&configurations).enumerate() {
        let what = format!("result {i}");
        let config = config_indexes(&params, configuration, origin, &what)?;
        let empty = Map::new();
        let times = result.get("times").and_then(Json::as_object).unwrap_or(&empty);
        let runtimes: Vec<f64> = times
            .get("runtimes")
            .and_then(Json::as_array)
            .map_or_else(Vec::new, |r| r.iter().filter_map(Json::as_f64).map(|t| t * unit_to_ms).collect());
        let benchmark_ms =
            times.get("benchmark").and_then(Json::as_f64).map_or_else(|| runtimes.iter().sum(), |b| b * unit_to_ms);
        let costs = Costs {
            compile_s: seconds(times, "compilation") * unit_to_ms,
            verify_s: seconds(times, "validation") * unit_to_ms,
            benchmark_s: benchmark_ms / 1e3,
            framework_s: seconds(times, "framework") * unit_to_ms,
            strategy_s: seconds(times, "search_algorithm") * unit_to_ms,
        };
        let invalidity = result.get("invalidity").and_then(Json::as_str).unwrap_or("correct");
        let measured = result
            .get("measurements")
            .and_then(Json::as_array)
            .and_then(|ms| ms.iter().find(|m| m.get("name").and_then(Json::as_str) == Some(objective_name.as_str())))
            .and_then(|m| m.get("value"));
        let evaluation = match (invalidity, measured) {
            ("correct", Some(Json::Number(value))) => Evaluation::ok(
                value.as_f64().unwrap_or(f64::NAN) * time_scale(&objective_name, unit_to_ms),
                runtimes,
                costs,
            ),
            ("correct", _) => {
                return Err(StoreError::format(
                    origin,
                    format!("{what} is correct but has no \"{objective_name}\" measurement"),
                ))
            }
            (other, _) => Evaluation::failed(failure_status(other), format!("invalidity: {other}"), costs),
        };
        let timestamp = result.get("timestamp").and_then(Json::as_str).map(str::to_string);
        records.push(Record { config, evaluation, timestamp });
    }
    let string = |key: &str| metadata.and_then(|m| m.get(key)).and_then(Json::as_str).map(str::to_string);
    Ok(Landscape {
        kernel_name: string("kernel_name").unwrap_or_else(|| name_hint.to_string()),
        device_name: string("device_name").or_else(|| string("device")).unwrap_or_else(|| "unknown device".to_string()),
        problem_size: metadata.and_then(|m| m.get("problem_size")).cloned().unwrap_or(Json::Null),
        params,
        objective: Objective::named(&objective_name),
        records,
        format: Format::T4,
    })
}

/// A time objective is converted to milliseconds like the runtimes; other objectives keep their unit.
fn time_scale(objective: &str, unit_to_ms: f64) -> f64 {
    if objective == "time" {
        unit_to_ms
    } else {
        1.0
    }
}

/// T4 lists no parameter values, so they are gathered from the configurations: numbers in
/// ascending order (so that neighbouring values are neighbours), anything else in order of
/// first appearance.
fn params_of(configurations: &[&Map<String, Json>], origin: &str) -> Result<Vec<Param>, StoreError> {
    let Some(first) = configurations.first() else {
        return Ok(Vec::new());
    };
    first
        .keys()
        .map(|name| {
            let mut values: Vec<Value> = Vec::new();
            for configuration in configurations {
                let value = configuration.get(name).and_then(Value::from_json).ok_or_else(|| {
                    StoreError::format(origin, format!("a configuration lacks a scalar value for '{name}'"))
                })?;
                if !values.iter().any(|v| v.python_eq(&value)) {
                    values.push(value);
                }
            }
            if values.iter().all(|v| v.as_number().is_some()) {
                values.sort_by(|a, b| a.as_number().unwrap_or(0.0).total_cmp(&b.as_number().unwrap_or(0.0)));
            }
            Param::new(name.clone(), values).map_err(|source| StoreError::Space { path: origin.to_string(), source })
        })
        .collect()
}

fn failure_status(invalidity: &str) -> Status {
    match invalidity {
        "compile" => Status::CompileFailed,
        "constraints" => Status::InvalidConfig,
        "correctness" => Status::InvalidOutput,
        "timeout" => Status::Timeout,
        _ => Status::RuntimeFailed,
    }
}

fn invalidity(status: Status) -> &'static str {
    match status {
        Status::Ok | Status::EarlyStopped => "correct",
        Status::CompileFailed => "compile",
        Status::InvalidConfig => "constraints",
        Status::InvalidOutput => "correctness",
        Status::Timeout => "timeout",
        Status::RuntimeFailed => "runtime",
    }
}

/// The T4 document of a tuning's stored evaluations, its metadata naming the kernel, the
/// device and the problem.
pub fn write(tuning: &TuningInfo, rows: &[StoredEvaluation]) -> Json {
    let problem: Json = serde_json::from_str(&tuning.problem).unwrap_or(Json::String(tuning.problem.clone()));
    let metadata = json!({"kernel_name": tuning.kernel_name, "device_name": tuning.device, "problem_size": problem});
    document(&tuning.objective.name, rows, metadata)
}

/// The T4 document of evaluations that belong to no stored tuning (`tune_kernel`'s results
/// list, as Kernel Tuner's `store_output_file` writes it): its metadata holds the time unit
/// alone.
pub fn results_document(objective: &str, rows: &[StoredEvaluation]) -> Json {
    document(objective, rows, json!({}))
}

fn document(objective: &str, rows: &[StoredEvaluation], metadata: Json) -> Json {
    let mut described = Map::from_iter([("timeunit".to_string(), json!("milliseconds"))]);
    described.extend(metadata.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
    json!({
        "schema_version": "1.0.0",
        "metadata": described,
        "results": rows.iter().map(|row| result(objective, row)).collect::<Vec<_>>(),
    })
}

/// One result: the objective's measurement first, then every metric; a failure's
/// `invalidity` as the schema names it (`correctness` for a wrong output, `timeout`).
fn result(objective: &str, row: &StoredEvaluation) -> Json {
    let evaluation = &row.evaluation;
    let value =
        evaluation.objective.map_or_else(|| json!(kernel_tuner::failure_marker(evaluation.status)), |v| json!(v));
    let unit = |name: &str| if name == "time" { "ms" } else { "" };
    let mut measurements = vec![json!({"name": objective, "value": value, "unit": unit(objective)})];
    measurements.extend(
        evaluation.metrics.iter().map(|(name, value)| json!({"name": name, "value": value, "unit": unit(name)})),
    );
    let mut result = Map::new();
    if !row.created.is_empty() {
        result.insert("timestamp".into(), json!(row.created));
    }
    result.insert("configuration".into(), Json::Object(row.config.clone()));
    result.insert(
        "times".into(),
        json!({
            "compilation": ms(evaluation.costs.compile_s),
            "framework": ms(evaluation.costs.framework_s),
            "search_algorithm": ms(evaluation.costs.strategy_s),
            "validation": ms(evaluation.costs.verify_s),
            "benchmark": ms(evaluation.costs.benchmark_s),
            "runtimes": evaluation.samples,
        }),
    );
    result.insert("invalidity".into(), json!(invalidity(evaluation.status)));
    result.insert("correctness".into(), json!(u8::from(!evaluation.status.is_failure())));
    result.insert("measurements".into(), Json::Array(measurements));
    result.insert("objectives".into(), json!([objective]));
    Json::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: Status, objective: Option<f64>) -> StoredEvaluation {
        let mut evaluation = Evaluation::failed(status, "why", Costs::default());
        evaluation.objective = objective;
        evaluation.metrics.insert("GFLOP/s".into(), json!(12.5));
        StoredEvaluation { config: Map::from_iter([("bx".to_string(), json!(64))]), evaluation, created: String::new() }
    }

    #[test]
    fn failures_are_named_as_the_schema_names_them() {
        let cases = [
            (Status::InvalidOutput, "correctness"),
            (Status::Timeout, "timeout"),
            (Status::RuntimeFailed, "runtime"),
            (Status::CompileFailed, "compile"),
            (Status::InvalidConfig, "constraints"),
        ];
        for (status, expected) in cases {
            let document = results_document("time", &[row(status, None)]);
            assert_eq!(document["results"][0]["invalidity"], json!(expected), "{status}");
            assert_eq!(document["results"][0]["correctness"], json!(0), "{status}");
        }
    }

    #[test]
    fn every_metric_is_a_measurement_after_the_objective_and_no_timestamp_is_made_up() {
        let document = results_document("time", &[row(Status::Ok, Some(0.5))]);
        let result = &document["results"][0];
        assert_eq!(result["measurements"][0], json!({"name": "time", "value": 0.5, "unit": "ms"}));
        assert_eq!(result["measurements"][1], json!({"name": "GFLOP/s", "value": 12.5, "unit": ""}));
        assert!(result.get("timestamp").is_none());
        assert_eq!(document["metadata"], json!({"timeunit": "milliseconds"}));
    }
}
