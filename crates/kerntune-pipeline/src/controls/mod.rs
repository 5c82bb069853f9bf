//! Compiler controls as tunable values: parameters whose values change how ptxas builds the
//! binary rather than the source. Both languages read a configuration's controls here and
//! hand ptxas the same arguments: CUDA C through a chosen ptxas after NVRTC's PTX, Triton
//! through its `ptx_options`.
//!
//! | parameter | values | ptxas argument |
//! |---|---|---|
//! | `acf` | ACF file paths, `"none"` | `--apply-controls=FILE` |
//! | `ptxas_options` | option strings, `""` | each word |
//! | `maxrregcount` | ints, 0 = ptxas's choice | `--maxrregcount=N` |
//! | `opt_level` | 0 to 3 | `-O N` |
//! | `cutlass_name` | bools | (the kernel's entry renamed to contain "cutlass") |
//!
//! [`tune_controls`] is the stage after the search where CompileIQ proposes ACF files for
//! the best configuration ([`search`]), from a worker process of its own ([`ProposerWorker`]).

mod propose;
mod search;

use std::path::Path;

use kerntune_space::{Param, Value};

pub use propose::{Candidate, FromProposer, Propose, ProposerWorker, Score, ToProposer};
pub use search::{
    search, tune_controls, with_acf, ControlsOptions, ControlsReport, Generation, Outcome, DEFAULT_BUDGET,
    DEFAULT_POOL_SIZE,
};

/// The names of the control parameters, in the order their arguments are given.
pub const CONTROL_NAMES: [&str; 5] = ["acf", "ptxas_options", "maxrregcount", "opt_level", "cutlass_name"];

/// The `acf` value that applies no file.
pub const NO_ACF: &str = "none";

/// The prefix a `cutlass_name` configuration gives the kernel's entry.
pub const CUTLASS_PREFIX: &str = "cutlass_";

/// Whether `name` is a control parameter.
pub fn is_control(name: &str) -> bool {
    CONTROL_NAMES.contains(&name)
}

/// What a configuration's controls ask of ptxas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controls {
    /// ptxas arguments (`-arch` excluded).
    pub args: Vec<String>,
    /// Rename the kernel's entry to contain "cutlass".
    pub cutlass_name: bool,
}

impl Controls {
    /// The controls of one configuration, from its values of the parameters that
    /// `is_control_param` says are controls (`params` and `config` in parameter order);
    /// ACF paths are relative to `base`.
    pub fn of(
        params: &[Param],
        config: &[Value],
        is_control_param: impl Fn(&str) -> bool,
        base: &Path,
    ) -> Result<Controls, String> {
        let mut controls = Controls::default();
        for name in CONTROL_NAMES.into_iter().filter(|name| is_control_param(name)) {
            let Some(position) = params.iter().position(|p| p.name() == name) else { continue };
            let value = config.get(position).ok_or_else(|| format!("no value for '{name}'"))?;
            controls.add(name, value, base)?;
        }
        Ok(controls)
    }

    fn add(&mut self, name: &str, value: &Value, base: &Path) -> Result<(), String> {
        let bad = || format!("{name} = {value}: {}", expected(name));
        match name {
            "acf" => {
                let file = value.as_str().ok_or_else(bad)?;
                if !file.is_empty() && file != NO_ACF {
                    self.args.push(format!("--apply-controls={}", base.join(file).display()));
                }
            }
            "ptxas_options" => {
                let text = value.as_str().ok_or_else(bad)?;
                self.args.extend(text.split_whitespace().map(str::to_string));
            }
            "maxrregcount" => match value.as_int().ok_or_else(bad)? {
                0 => {}
                n if n > 0 => self.args.push(format!("--maxrregcount={n}")),
                _ => return Err(bad()),
            },
            "opt_level" => match value.as_int().ok_or_else(bad)? {
                level @ 0..=3 => self.args.push(format!("-O{level}")),
                _ => return Err(bad()),
            },
            "cutlass_name" => self.cutlass_name = value.as_bool().ok_or_else(bad)?,
            _ => return Err(format!("'{name}' is not a compiler control")),
        }
        Ok(())
    }
}

/// What values a control takes, for messages.
fn expected(name: &str) -> &'static str {
    match name {
        "acf" => "give ACF file paths, or \"none\"",
        "ptxas_options" => "give ptxas options as strings",
        "maxrregcount" => "give register counts (0 = ptxas's choice)",
        "opt_level" => "give ptxas optimisation levels 0 to 3",
        _ => "give true or false",
    }
}

/// Checks every value of the control parameters among `params` (ACF files must exist,
/// relative to `base`): the first problem, with the parameter's name.
pub fn check_values(params: &[Param], is_control_param: impl Fn(&str) -> bool, base: &Path) -> Result<(), String> {
    for param in params.iter().filter(|p| is_control(p.name()) && is_control_param(p.name())) {
        for value in param.values() {
            let mut controls = Controls::default();
            controls.add(param.name(), value, base)?;
            if param.name() == "acf" {
                let file = value.as_str().unwrap_or_default();
                if !file.is_empty() && file != NO_ACF && !base.join(file).is_file() {
                    return Err(format!("acf = \"{file}\": no such file ({})", base.join(file).display()));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerntune_space::params_from_json;

    fn params(json: &str) -> Vec<Param> {
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json).expect("json");
        params_from_json(&map).expect("params")
    }

    #[test]
    fn ptxas_knobs_become_ptxas_arguments_in_a_fixed_order() {
        let params = params(
            r#"{"tile": [1], "cutlass_name": [true], "opt_level": [1], "maxrregcount": [128],
                "acf": ["a.acf"], "ptxas_options": ["-dlcm=cg"]}"#,
        );
        let config: Vec<Value> = params.iter().map(|p| p.values()[0].clone()).collect();
        let controls = Controls::of(&params, &config, is_control, Path::new("/specs")).expect("controls");
        assert_eq!(controls.args, ["--apply-controls=/specs/a.acf", "-dlcm=cg", "--maxrregcount=128", "-O1"]);
        assert!(controls.cutlass_name);
    }

    #[test]
    fn neutral_ptxas_control_values_ask_nothing() {
        let params =
            params(r#"{"acf": ["none"], "ptxas_options": [""], "maxrregcount": [0], "cutlass_name": [false]}"#);
        let config: Vec<Value> = params.iter().map(|p| p.values()[0].clone()).collect();
        assert_eq!(Controls::of(&params, &config, is_control, Path::new(".")).expect("controls"), Controls::default());
    }

    #[test]
    fn ptxas_control_values_of_the_wrong_kind_and_missing_acf_files_are_named() {
        let error = check_values(&params(r#"{"opt_level": [3, 7]}"#), is_control, Path::new(".")).expect_err("level 7");
        assert_eq!(error, "opt_level = 7: give ptxas optimisation levels 0 to 3");
        let error = check_values(&params(r#"{"acf": ["none", "gone.acf"]}"#), is_control, Path::new("/nowhere"))
            .expect_err("file");
        assert_eq!(error, "acf = \"gone.acf\": no such file (/nowhere/gone.acf)");
    }
}
