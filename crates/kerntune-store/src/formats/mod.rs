//! Files other tools read and write: Kernel Tuner's cache JSON and the T4 format of the
//! autotuning community's benchmark hub. Reading either, plain or gzipped, gives a
//! [`Landscape`] ([`Landscape::read`] tells the formats apart). [`deploy`] writes results
//! for deployment: a C/C++ header, and Triton configs. [`dispatch`] holds the tables of
//! a configuration per key (size) and their exports: vLLM's fused-MoE file and a C/C++
//! header with a lookup function.

pub mod deploy;
pub mod dispatch;
pub mod kernel_tuner;
pub mod t4;

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;
use kerntune_space::Param;
use serde_json::{Map, Value as Json};

use crate::{Landscape, StoreError, StoredEvaluation, TuningInfo};

/// The files a stored tuning is exported as, by `kerntune export` and `kerntune.export`
/// alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// Kernel Tuner's cache file, in the layout Kernel Tuner appends to.
    KernelTuner,
    /// The T4 results file, indented.
    T4,
}

impl Exchange {
    /// The file's text, ending with a newline.
    pub fn text(self, tuning: &TuningInfo, rows: &[StoredEvaluation]) -> String {
        match self {
            Exchange::KernelTuner => kernel_tuner::text(&kernel_tuner::write(tuning, rows)) + "\n",
            Exchange::T4 => {
                let document = t4::write(tuning, rows);
                serde_json::to_string_pretty(&document).unwrap_or_else(|_| document.to_string()) + "\n"
            }
        }
    }
}

impl Landscape {
    pub fn read(path: &Path) -> Result<Landscape, StoreError> {
        let origin = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| StoreError::Io { path: origin.clone(), source })?;
        let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("landscape");
        let stem = stem.trim_end_matches(".gz").trim_end_matches(".json");
        Landscape::parse(&bytes, &origin, stem)
    }

    /// Parses file contents; `origin` names the file in errors and `name_hint` stands in
    /// for the kernel name where the format has none (T4).
    pub fn parse(bytes: &[u8], origin: &str, name_hint: &str) -> Result<Landscape, StoreError> {
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut text = String::new();
            GzDecoder::new(bytes)
                .read_to_string(&mut text)
                .map_err(|e| StoreError::format(origin, format!("not a valid gzip file ({e})")))?;
            text
        } else {
            String::from_utf8(bytes.to_vec()).map_err(|_| StoreError::format(origin, "not a text file"))?
        };
        let json: Json = match serde_json::from_str(&text) {
            Ok(json) => json,
            // A Kernel Tuner cache that its run left open for appending; anything else that
            // is not JSON is said to be so.
            Err(error) => match kernel_tuner::document(&text, origin) {
                Ok(document) if document.contains_key("tune_params") => Json::Object(document),
                _ => return Err(StoreError::Json { path: origin.to_string(), message: error.to_string() }),
            },
        };
        let Json::Object(document) = json else {
            return Err(StoreError::format(origin, "expected a JSON object"));
        };
        let landscape = if document.contains_key("cache") {
            kernel_tuner::parse(&document, origin)?
        } else if document.contains_key("results") {
            t4::parse(&document, origin, name_hint)?
        } else {
            return Err(StoreError::format(
                origin,
                "neither a Kernel Tuner cache file (no \"cache\") nor a T4 file (no \"results\")",
            ));
        };
        landscape.check_times(origin)?;
        Ok(landscape)
    }

    /// Refuses a recorded time that cannot be one (zero or negative): replayed, it would
    /// be reported as the best build (`Best: -1.000 ms`) and draw every strategy to it.
    /// Samples are times whatever the objective; the objective is one when it is `time`.
    fn check_times(&self, origin: &str) -> Result<(), StoreError> {
        let objective_is_time = self.objective.name.eq_ignore_ascii_case("time");
        for record in &self.records {
            let evaluation = &record.evaluation;
            let objective = evaluation.valid_objective().filter(|_| objective_is_time);
            let times = objective.into_iter().chain(evaluation.samples.iter().copied());
            if let Some(time) = times.into_iter().find(|time| *time <= 0.0) {
                let config: Vec<String> = self
                    .params
                    .iter()
                    .zip(&record.config)
                    .map(|(param, index)| format!("{}={}", param.name(), param.values()[*index].source_text()))
                    .collect();
                return Err(StoreError::format(
                    origin,
                    format!(
                        "configuration {{{}}} records a time of {time} ms; times must be positive",
                        config.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A JSON number in milliseconds from a cost in seconds.
pub(crate) fn ms(seconds: f64) -> Json {
    serde_json::Number::from_f64(seconds * 1e3).map_or(Json::Null, Json::Number)
}

/// A cost in seconds from a field holding milliseconds, 0 when absent.
pub(crate) fn seconds(object: &Map<String, Json>, key: &str) -> f64 {
    object.get(key).and_then(Json::as_f64).unwrap_or(0.0) / 1e3
}

/// A config's value indexes from a JSON object of `name: value`.
pub(crate) fn config_indexes(
    params: &[Param],
    config: &Map<String, Json>,
    origin: &str,
    what: &str,
) -> Result<Vec<usize>, StoreError> {
    params
        .iter()
        .map(|param| {
            let json = config
                .get(param.name())
                .ok_or_else(|| StoreError::format(origin, format!("{what} has no value for '{}'", param.name())))?;
            kerntune_space::Value::from_json(json).and_then(|v| param.index_of(&v)).ok_or_else(|| {
                StoreError::format(origin, format!("{what}: {json} is not a listed value of '{}'", param.name()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neither_format_is_an_error_naming_the_file() {
        let error = Landscape::parse(b"{\"x\": 1}", "f.json", "f").unwrap_err();
        assert!(error.to_string().starts_with("f.json: neither"), "{error}");
        let error = Landscape::parse(b"{\"cache\": ", "g.json", "g").unwrap_err();
        assert!(error.to_string().starts_with("g.json: not valid JSON"), "{error}");
        let error = Landscape::parse(&[0x1f, 0x8b, 0, 1], "h.json.gz", "h").unwrap_err();
        assert!(error.to_string().contains("gzip"), "{error}");
    }

    fn kernel_tuner_cache(entry: &str) -> String {
        format!(
            r#"{{"tune_params_keys": ["a", "b"], "tune_params": {{"a": [1, 2], "b": [8]}}, "objective": "time",
                 "cache": {{"1,8": {{"a": 1, "b": 8, "time": 0.5, "times": [0.5]}}, "2,8": {entry}}}}}"#
        )
    }

    #[test]
    fn zero_or_negative_times_are_refused_naming_the_configuration() {
        let cases = [
            (r#"{"a": 2, "b": 8, "time": -1.0, "times": [1.0]}"#, "a time of -1 ms"),
            (r#"{"a": 2, "b": 8, "time": 0, "times": [1.0]}"#, "a time of 0 ms"),
            (r#"{"a": 2, "b": 8, "time": 1.0, "times": [1.0, -2.5]}"#, "a time of -2.5 ms"),
        ];
        for (entry, expected) in cases {
            let error = Landscape::parse(kernel_tuner_cache(entry).as_bytes(), "k.json", "k").unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("k.json: configuration {a=2, b=8} records"), "{message}");
            assert!(message.contains(expected), "{message}");
        }
        let t4 = r#"{"schema_version": "1.0.0", "results": [{"configuration": {"a": 1}, "invalidity": "correct",
            "measurements": [{"name": "time", "value": -3, "unit": "ms"}], "times": {"runtimes": [1.0]}}]}"#;
        let error = Landscape::parse(t4.as_bytes(), "t.json", "t").unwrap_err();
        assert!(error.to_string().contains("configuration {a=1} records a time of -3 ms"), "{error}");
    }

    #[test]
    fn positive_times_and_failed_entries_are_accepted() {
        let failed = r#"{"a": 2, "b": 8, "time": "CompilationFailedConfig", "times": []}"#;
        let landscape = Landscape::parse(kernel_tuner_cache(failed).as_bytes(), "k.json", "k").expect("parses");
        assert_eq!(landscape.optimum(), Some(0.5));
    }
}
