//! A setting of a run, named the way the user's front spells it: `--target` on the command
//! line, `target=` in Python. Errors of every crate that refuse a setting hold a
//! [`Setting`], never a flag's text; each front says once, as it starts, how its settings
//! are spelled ([`Spelling`]), and every message in that process follows. A process is one
//! front (the CLI binary, or the Python extension inside an interpreter), so the choice is
//! the process's; before any front chooses (tests, other Rust callers) a setting reads as
//! its plain name.

use std::fmt;
use std::sync::OnceLock;

/// How a front spells its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spelling {
    /// The setting's own name: `ray_gpus`.
    Plain,
    /// A command-line flag: `--ray-gpus`, with a value `--ray-gpus 2`.
    Flag,
    /// A keyword argument: `ray_gpus=`, with a value `ray_gpus=2`.
    Keyword,
}

static SPELLING: OnceLock<Spelling> = OnceLock::new();

impl Spelling {
    /// Makes this the spelling of every setting this process names; the first front to
    /// choose keeps its choice.
    pub fn choose(self) {
        let _ = SPELLING.set(self);
    }

    /// The spelling this process chose, [`Spelling::Plain`] until a front chooses.
    pub fn current() -> Spelling {
        SPELLING.get().copied().unwrap_or(Spelling::Plain)
    }
}

/// A run's setting, by its name as a spec file and Python write it (`ray_gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Setting(&'static str);

impl Setting {
    pub const ARCH: Setting = Setting("arch");
    pub const CONTROLS_BUDGET: Setting = Setting("controls_budget");
    pub const DB: Setting = Setting("db");
    pub const DEVICES: Setting = Setting("devices");
    pub const KERNEL: Setting = Setting("kernel");
    pub const PARETO: Setting = Setting("pareto");
    pub const RAY_GPUS: Setting = Setting("ray_gpus");
    pub const REALTIME: Setting = Setting("realtime");
    pub const TARGET: Setting = Setting("target");

    /// The setting's plain name.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The setting given `value`, as the current front writes it: `--devices 0`,
    /// `devices=0`.
    pub fn with(self, value: impl fmt::Display) -> String {
        self.spelled_with(Spelling::current(), value)
    }

    fn spelled(self, spelling: Spelling) -> String {
        match spelling {
            Spelling::Plain => self.0.to_string(),
            Spelling::Flag => format!("--{}", self.0.replace('_', "-")),
            Spelling::Keyword => format!("{}=", self.0),
        }
    }

    fn spelled_with(self, spelling: Spelling, value: impl fmt::Display) -> String {
        match spelling {
            Spelling::Plain | Spelling::Flag => format!("{} {value}", self.spelled(spelling)),
            Spelling::Keyword => format!("{}{value}", self.spelled(spelling)),
        }
    }
}

impl fmt::Display for Setting {
    /// The setting as the current front spells it: `--ray-gpus`, `ray_gpus=`, `ray_gpus`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled(Spelling::current()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_front_spells_a_setting_its_own_way() {
        let gpus = Setting::RAY_GPUS;
        assert_eq!(gpus.spelled(Spelling::Flag), "--ray-gpus");
        assert_eq!(gpus.spelled(Spelling::Keyword), "ray_gpus=");
        assert_eq!(gpus.spelled(Spelling::Plain), "ray_gpus");
        assert_eq!(Setting::DEVICES.spelled_with(Spelling::Flag, 0), "--devices 0");
        assert_eq!(Setting::DEVICES.spelled_with(Spelling::Keyword, 0), "devices=0");
    }

    #[test]
    fn before_a_front_chooses_a_setting_reads_as_its_name() {
        assert_eq!(Spelling::current(), Spelling::Plain);
        assert_eq!(Setting::TARGET.to_string(), "target");
    }
}
