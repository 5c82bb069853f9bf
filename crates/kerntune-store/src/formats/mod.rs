//! Files other tools read and write: Kernel Tuner's cache JSON and the T4 format of the
//! autotuning community's benchmark hub.

pub mod kernel_tuner;
pub mod t4;

use serde_json::{Map, Value as Json};

/// A JSON number in milliseconds from a cost in seconds.
pub(crate) fn ms(seconds: f64) -> Json {
    serde_json::Number::from_f64(seconds * 1e3).map_or(Json::Null, Json::Number)
}

/// A cost in seconds from a field holding milliseconds, 0 when absent.
pub(crate) fn seconds(object: &Map<String, Json>, key: &str) -> f64 {
    object.get(key).and_then(Json::as_f64).unwrap_or(0.0) / 1e3
}
