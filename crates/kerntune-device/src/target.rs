//! A GPU architecture as a compile target, for compiling without the GPU: its name checked
//! and the limits a configuration must respect on it.

use crate::{DeviceError, DeviceInfo};

impl DeviceInfo {
    /// The device a compile for `arch` (`sm_90`, `sm_90a`, `sm_100f`) targets, with the
    /// per-block limits of that architecture; an error when `arch` is not one.
    pub fn compile_target(arch: &str) -> Result<DeviceInfo, DeviceError> {
        let bad = || DeviceError::NotAnArch(arch.to_string());
        let digits = arch.strip_prefix("sm_").map(|rest| rest.trim_end_matches(['a', 'f'])).ok_or_else(bad)?;
        if !(2..=3).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        let capability: (i32, i32) = (major.parse().map_err(|_| bad())?, minor.parse().map_err(|_| bad())?);
        // Opt-in shared memory per block (CUDA C Programming Guide, compute capabilities).
        let shared_optin = match capability {
            (8, 0) | (8, 7) => 163 << 10,
            (8, _) | (12, _) => 99 << 10,
            (9, _) | (10, _) | (11, _) => 227 << 10,
            (7, 0) | (7, 2) => 96 << 10,
            (7, 5) => 64 << 10,
            _ => 48 << 10,
        };
        Ok(DeviceInfo {
            ordinal: 0,
            name: format!("compile-only {arch}"),
            compute_capability: capability,
            multiprocessors: 0,
            l2_bytes: 0,
            max_threads_per_block: 1024,
            max_shared_per_block: 48 << 10,
            max_shared_per_block_optin: shared_optin,
            max_registers_per_block: 65_536,
            clock_khz: 0,
            memory_bytes: 0,
            pci_bus_id: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_name_their_capability_and_typos_are_refused() {
        let hopper = DeviceInfo::compile_target("sm_90a").expect("an architecture");
        assert_eq!(hopper.compute_capability, (9, 0));
        assert_eq!(hopper.max_shared_per_block_optin, 232_448);
        assert_eq!(DeviceInfo::compile_target("sm_120").expect("an architecture").compute_capability, (12, 0));
        for typo in ["sm90", "sm_9", "compute_90", "sm_9x", "sm_1234"] {
            assert_eq!(DeviceInfo::compile_target(typo), Err(DeviceError::NotAnArch(typo.into())));
        }
    }
}
