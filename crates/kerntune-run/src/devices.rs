//! Which GPUs a tuning measures on: `--devices all|0,1,...` (and Python's `devices=`),
//! checked before any worker starts. GPUs of one model are one target, their results one
//! tuning's; GPUs of several models are refused, since no one answer fits them all.

use std::fmt;
use std::str::FromStr;

use kerntune_device::DeviceInfo;
use kerntune_pipeline::one_model;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{NoGpu, RunError};

/// The GPUs a user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// Every GPU the driver sees.
    All,
    /// These ordinals, in this order (the first serves the finalists and schedule stages).
    List(Vec<usize>),
}

impl Default for Devices {
    fn default() -> Self {
        Devices::List(vec![0])
    }
}

impl FromStr for Devices {
    type Err = String;

    /// `all`, or ordinals separated by commas (`0,1,3`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim() == "all" {
            return Ok(Devices::All);
        }
        let mut ordinals = Vec::new();
        for part in text.split(',') {
            let ordinal: usize = part.trim().parse().map_err(|_| {
                format!("{text:?} does not name GPUs: give `all` or their indices separated by commas (0,1)")
            })?;
            if ordinals.contains(&ordinal) {
                return Err(format!("GPU {ordinal} is named twice in {text:?}"));
            }
            ordinals.push(ordinal);
        }
        Ok(Devices::List(ordinals))
    }
}

/// As the user writes them: `all`, or the ordinals separated by commas.
impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Devices::All => f.write_str("all"),
            Devices::List(ordinals) => {
                let texts: Vec<String> = ordinals.iter().map(usize::to_string).collect();
                f.write_str(&texts.join(","))
            }
        }
    }
}

impl Serialize for Devices {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Devices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

impl Devices {
    /// The GPUs, probed: each must exist, and all must be of one model.
    pub fn probe(&self) -> Result<Vec<DeviceInfo>, RunError> {
        let count = kerntune_device::driver::device_count().map_err(NoGpu::Driver)?;
        let ordinals = match self {
            Devices::All => (0..count).collect(),
            Devices::List(ordinals) => ordinals.clone(),
        };
        if ordinals.is_empty() {
            return Err(NoGpu::NoneSeen.into());
        }
        let infos = ordinals
            .iter()
            .map(|&ordinal| match kerntune_device::driver::probe(ordinal) {
                Ok((_, info)) => Ok(info),
                Err(_) if ordinal >= count => Err(NoGpu::NoSuchGpu { ordinal, count }),
                Err(error) => Err(NoGpu::Unopenable { ordinal, error }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        one_model(&infos).map_err(NoGpu::MixedModels)?;
        Ok(infos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_all_or_a_list_of_distinct_indices() {
        assert_eq!("all".parse::<Devices>(), Ok(Devices::All));
        assert_eq!("0, 1,3".parse::<Devices>(), Ok(Devices::List(vec![0, 1, 3])));
        assert!("0,x".parse::<Devices>().unwrap_err().contains("give `all` or their indices"));
        assert!("".parse::<Devices>().is_err());
        assert_eq!("1,1".parse::<Devices>().unwrap_err(), "GPU 1 is named twice in \"1,1\"");
    }

    #[test]
    fn an_unknown_index_says_which_gpus_there_are() {
        let unknown = |ordinal, count| NoGpu::NoSuchGpu { ordinal, count }.to_string();
        assert_eq!(unknown(2, 2), "there is no GPU #2: this machine has 2 GPUs, #0 to #1");
        assert_eq!(unknown(1, 1), "there is no GPU #1: this machine has one GPU, #0");
        assert_eq!(unknown(0, 0), "there is no GPU #0: the driver sees no GPU");
    }
}
