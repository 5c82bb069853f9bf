//! Parameter values: the four kinds a tuning parameter can take.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One value of a tuning parameter, as a user writes it in JSON, TOML or Python.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl Value {
    /// Python's `==` between two parameter values: numbers compare by value across kinds
    /// (`1 == 1.0 == True`), strings only equal strings.
    pub fn python_eq(&self, other: &Value) -> bool {
        match (self.as_number(), other.as_number()) {
            (Some(a), Some(b)) => a == b,
            _ => matches!((self, other), (Value::Str(a), Value::Str(b)) if a == b),
        }
    }

    /// The value as a number, for the kinds that Python treats as numbers.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Str(_) => None,
        }
    }

    /// The value as an integer, when it is one (bools count, as in Python).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            Value::Float(_) | Value::Str(_) => None,
        }
    }

    /// The value as text, when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a truth value, when it is a bool or 0 or 1.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
    }

    /// The text that goes into generated source code (`#define NAME text`) and cache keys.
    pub fn source_text(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(f) => python_float_repr(*f),
            Value::Bool(b) => u8::from(*b).to_string(),
            Value::Str(s) => s.clone(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
            }
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Str(s) => serde_json::Value::String(s.clone()),
        }
    }

    /// Reads a JSON scalar; arrays, objects and null are not parameter values.
    pub fn from_json(json: &serde_json::Value) -> Option<Value> {
        match json {
            serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Some(Value::Int(i)),
                None => n.as_f64().map(Value::Float),
            },
            serde_json::Value::String(s) => Some(Value::Str(s.clone())),
            _ => None,
        }
    }
}

/// Python's `repr` of a float for the common cases: `1.0`, `0.5`, `1e-05`.
fn python_float_repr(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            other => f.write_str(&other.source_text()),
        }
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(i) => serializer.serialize_i64(*i),
            Value::Float(f) => serializer.serialize_f64(*f),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = serde_json::Value::deserialize(deserializer)?;
        Value::from_json(&json).ok_or_else(|| {
            serde::de::Error::custom(format!("a parameter value must be a number, a bool or a string, not {json}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_different_kinds_are_python_equal() {
        assert!(Value::Int(1).python_eq(&Value::Float(1.0)));
        assert!(Value::Bool(true).python_eq(&Value::Int(1)));
        assert!(!Value::Str("1".into()).python_eq(&Value::Int(1)));
    }

    #[test]
    fn source_text_follows_python_spelling_for_floats() {
        assert_eq!(Value::Float(2.0).source_text(), "2.0");
        assert_eq!(Value::Float(0.25).source_text(), "0.25");
        assert_eq!(Value::Bool(true).source_text(), "1");
    }

    #[test]
    fn json_round_trip_keeps_the_kind() {
        for v in [Value::Int(-3), Value::Float(1.5), Value::Bool(false), Value::Str("ca".into())] {
            assert_eq!(Value::from_json(&v.to_json()), Some(v));
        }
    }
}
