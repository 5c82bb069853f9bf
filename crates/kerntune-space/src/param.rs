//! A tuning parameter: a name and the values it may take, in the user's order.

use crate::{SpaceError, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    name: String,
    values: Vec<Value>,
}

impl Param {
    /// A parameter with at least one value and no value twice.
    pub fn new(name: impl Into<String>, values: Vec<Value>) -> Result<Param, SpaceError> {
        let name = name.into();
        let problem = |problem: String| SpaceError::Param { name: name.clone(), problem };
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(problem("a parameter name must be an identifier".into()));
        }
        if values.is_empty() {
            return Err(problem("it has no values".into()));
        }
        if values.len() > u32::MAX as usize {
            return Err(problem("it has too many values".into()));
        }
        for (i, value) in values.iter().enumerate() {
            if values[..i].iter().any(|earlier| earlier.python_eq(value)) {
                return Err(problem(format!("the value {value} is listed twice")));
            }
        }
        Ok(Param { name, values })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn values(&self) -> &[Value] {
        &self.values
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The index of `value`, compared as Python's `==` would (so `16.0` finds `16`).
    pub fn index_of(&self, value: &Value) -> Option<usize> {
        self.values.iter().position(|v| v.python_eq(value))
    }

    /// True when every value is a number, so that the parameter has a natural order.
    pub fn is_numeric(&self) -> bool {
        self.values.iter().all(|v| v.as_number().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_and_repeated_values() {
        assert!(Param::new("x", vec![]).is_err());
        assert!(Param::new("x", vec![Value::Int(1), Value::Float(1.0)]).is_err());
        assert!(Param::new("bad name", vec![Value::Int(1)]).is_err());
        assert!(Param::new("x", vec![Value::Int(1), Value::Int(2)]).is_ok());
    }

    #[test]
    fn finds_values_by_python_equality() {
        let p = Param::new("x", vec![Value::Int(16), Value::Int(32)]).expect("valid");
        assert_eq!(p.index_of(&Value::Float(32.0)), Some(1));
        assert_eq!(p.index_of(&Value::Str("16".into())), None);
    }
}
