//! The space file format shared with Kernel Tuner users:
//! `{"tune_params": {"name": [values...]}, "restrictions": [...], "max_threads": 1024}`.

use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::{MemoryCap, Param, Rng, Space, SpaceError, Value};

/// Parameters and restrictions as a user writes them; `build` turns them into a [`Space`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceSpec {
    /// A label for reports; not used for anything else.
    #[serde(default)]
    pub name: Option<String>,
    /// Parameter names and their values, in the order the user declared them.
    pub tune_params: Map<String, Json>,
    /// One restriction or a list of them; every one must hold.
    #[serde(default)]
    pub restrictions: Restrictions,
    /// Kernel Tuner's thread limit: when `block_size_x/y/z` parameters exist, their product
    /// must not exceed it.
    #[serde(default)]
    pub max_threads: Option<u64>,
}

/// A single restriction string or a list of them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(untagged)]
pub enum Restrictions {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl Restrictions {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Restrictions::None => Vec::new(),
            Restrictions::One(r) => vec![r.clone()],
            Restrictions::Many(rs) => rs.clone(),
        }
    }
}

impl SpaceSpec {
    pub fn params(&self) -> Result<Vec<Param>, SpaceError> {
        params_from_json(&self.tune_params)
    }

    /// All restrictions, with Kernel Tuner's implicit thread limit added where it applies.
    pub fn all_restrictions(&self) -> Vec<String> {
        let mut restrictions = self.restrictions.to_vec();
        if let Some(max_threads) = self.max_threads {
            let block_names: Vec<&str> = ["block_size_x", "block_size_y", "block_size_z"]
                .into_iter()
                .filter(|n| self.tune_params.contains_key(*n))
                .collect();
            if !block_names.is_empty() {
                restrictions.push(format!("{} <= {max_threads}", block_names.join(" * ")));
            }
        }
        restrictions
    }

    pub fn build(&self) -> Result<Space, SpaceError> {
        Space::new(self.params()?, &self.all_restrictions())
    }

    /// `count` random valid configurations, as JSON objects, without enumerating the space
    /// (see [`Space::sample_without_enumerating`]).
    pub fn sample(&self, count: usize, rng: &mut Rng) -> Result<Vec<Map<String, Json>>, SpaceError> {
        let params = self.params()?;
        let configs = Space::sample_without_enumerating(&params, &self.all_restrictions(), count, rng)?;
        Ok(configs
            .iter()
            .map(|config| {
                params.iter().zip(config).map(|(p, i)| (p.name().to_string(), p.values()[*i].to_json())).collect()
            })
            .collect())
    }

    /// [`SpaceSpec::build`] under an explicit memory cap instead of the environment's.
    pub fn build_with_memory_cap(&self, cap: MemoryCap) -> Result<Space, SpaceError> {
        Space::with_memory_cap(self.params()?, &self.all_restrictions(), cap)
    }

    /// [`SpaceSpec::build_with_memory_cap`], telling `progress` the share done (0 to 1).
    pub fn build_with_progress(&self, cap: MemoryCap, progress: &mut dyn FnMut(f64)) -> Result<Space, SpaceError> {
        Space::with_progress(self.params()?, &self.all_restrictions(), cap, progress)
    }
}

/// Parameters from a JSON object of `name: [values]` (a scalar counts as a single value).
pub fn params_from_json(tune_params: &Map<String, Json>) -> Result<Vec<Param>, SpaceError> {
    tune_params
        .iter()
        .map(|(name, values)| {
            let problem = |problem: String| SpaceError::Param { name: name.clone(), problem };
            let items = match values {
                Json::Array(items) => items.clone(),
                scalar => vec![scalar.clone()],
            };
            let values = items
                .iter()
                .map(|item| {
                    Value::from_json(item).ok_or_else(|| problem(format!("{item} is not a number, a bool or a string")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Param::new(name.clone(), values)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kernel_tuner_space_files() {
        let spec: SpaceSpec = serde_json::from_str(
            r#"{"tune_params": {"block_size_x": [16, 32, 64], "block_size_y": [8, 16], "mode": ["a", "b"]},
                "restrictions": "mode == 'a' or block_size_x > 16", "max_threads": 512}"#,
        )
        .expect("parses");
        assert_eq!(spec.all_restrictions().last().map(String::as_str), Some("block_size_x * block_size_y <= 512"));
        let space = spec.build().expect("builds");
        // 6 block shapes minus 64x16 (over 512 threads), times 2 modes, minus mode b with x == 16.
        assert_eq!(space.len(), 5 * 2 - 2);
    }

    #[test]
    fn unknown_fields_are_rejected() {
        assert!(serde_json::from_str::<SpaceSpec>(r#"{"tune_params": {}, "restriction": []}"#).is_err());
    }

    #[test]
    fn non_scalar_values_are_rejected_with_the_parameter_name() {
        let spec: SpaceSpec = serde_json::from_str(r#"{"tune_params": {"x": [[1]]}}"#).expect("parses");
        assert!(spec.params().unwrap_err().to_string().contains("parameter 'x'"));
    }
}
