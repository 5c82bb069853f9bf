//! How much memory a space may take, and the estimate checked against it before
//! enumerating: a space too large to hold is refused with its estimate instead of eating
//! the machine's memory.

use std::fmt;

/// Bytes a valid configuration takes once built: its 8-byte key and at most 4 bytes of
/// directory (the directory has at most one 4-byte entry per key).
pub const BYTES_PER_CONFIG: u64 = 12;

/// Random configurations drawn to estimate the share that satisfies the restrictions.
pub(crate) const ESTIMATE_SAMPLES: usize = 4096;

/// The environment variable that overrides [`MemoryCap::DEFAULT`]: bytes, or a number with
/// a `K`, `M` or `G` suffix (binary units), e.g. `KERNTUNE_SPACE_MEMORY=4G`.
pub const MEMORY_CAP_VARIABLE: &str = "KERNTUNE_SPACE_MEMORY";

/// The most memory a [`Space`](crate::Space)'s configurations may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCap(pub u64);

impl MemoryCap {
    /// 1 GiB: about 89 million valid configurations.
    pub const DEFAULT: MemoryCap = MemoryCap(1 << 30);

    /// The cap [`MEMORY_CAP_VARIABLE`] sets, else the default.
    pub fn from_env() -> Result<MemoryCap, String> {
        match std::env::var(MEMORY_CAP_VARIABLE) {
            Ok(text) => text.parse().map_err(|e| format!("{MEMORY_CAP_VARIABLE}={text}: {e}")),
            Err(_) => Ok(MemoryCap::DEFAULT),
        }
    }

    /// The most configurations that fit under the cap.
    pub fn max_configs(self) -> u64 {
        self.0 / BYTES_PER_CONFIG
    }
}

impl Default for MemoryCap {
    fn default() -> Self {
        MemoryCap::DEFAULT
    }
}

impl std::str::FromStr for MemoryCap {
    type Err = String;

    fn from_str(text: &str) -> Result<MemoryCap, String> {
        let text = text.trim();
        let (number, unit) = match text.char_indices().last() {
            Some((i, 'K' | 'k')) => (&text[..i], 1u64 << 10),
            Some((i, 'M' | 'm')) => (&text[..i], 1 << 20),
            Some((i, 'G' | 'g')) => (&text[..i], 1 << 30),
            _ => (text, 1),
        };
        let count: u64 =
            number.trim().parse().map_err(|_| "not a size: write bytes, or a number and K, M or G".to_string())?;
        count.checked_mul(unit).map(MemoryCap).ok_or_else(|| "the size overflows 64 bits".to_string())
    }
}

impl fmt::Display for MemoryCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human_bytes(self.0 as f64))
    }
}

/// What a space would take, estimated without enumerating it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpaceEstimate {
    /// The product of the parameters' value counts.
    pub product: u64,
    /// Random configurations drawn, and how many satisfied every restriction.
    pub sampled: usize,
    pub accepted: usize,
    /// `product * accepted / sampled`.
    pub valid_configs: f64,
    /// `valid_configs * BYTES_PER_CONFIG`.
    pub bytes: f64,
}

impl SpaceEstimate {
    /// Whether even the low end of the estimate (three standard errors below the sampled
    /// share) is over `max_configs`: a space near the cap is enumerated, not refused on a
    /// guess, and the enumeration itself stops at the cap.
    pub fn surely_over(&self, max_configs: u64) -> bool {
        let samples = self.sampled.max(1) as f64;
        let share = self.accepted as f64 / samples;
        let low = (share - 3.0 * (share * (1.0 - share) / samples).sqrt()).max(0.0);
        low * self.product as f64 > max_configs as f64
    }
}

impl fmt::Display for SpaceEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "about {} valid configurations ({} of {} random configurations satisfy the restrictions, of a product of {}), \
             about {} at {BYTES_PER_CONFIG} bytes each",
            human_count(self.valid_configs),
            self.accepted,
            self.sampled,
            self.product,
            human_bytes(self.bytes)
        )
    }
}

fn human_count(count: f64) -> String {
    if count < 1e6 {
        format!("{count:.0}")
    } else {
        format!("{count:.2e}")
    }
}

fn human_bytes(bytes: f64) -> String {
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in units {
        let size = (1u64 << shift) as f64;
        if bytes >= size {
            return format!("{:.1} {name}", bytes / size);
        }
    }
    format!("{bytes:.0} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_read_bytes_and_binary_suffixes() {
        assert_eq!("4096".parse(), Ok(MemoryCap(4096)));
        assert_eq!("2G".parse(), Ok(MemoryCap(2 << 30)));
        assert_eq!("512m".parse(), Ok(MemoryCap(512 << 20)));
        assert!("lots".parse::<MemoryCap>().is_err());
        assert!("99999999999999999G".parse::<MemoryCap>().is_err());
        assert_eq!(MemoryCap::DEFAULT.to_string(), "1.0 GiB");
    }
}
