//! Stable fingerprints (64-bit FNV-1a) for keys that must not change between versions,
//! unlike `std`'s hasher.

/// A 16-hex-digit fingerprint of the parts, which are separated so that ("ab", "c") and
/// ("a", "bc") differ.
pub fn fingerprint<S: AsRef<[u8]>>(parts: &[S]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.as_ref().iter().chain([0xffu8].iter()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_parts_and_is_stable() {
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(fingerprint(&["kernel"]), fingerprint(&["kernel"]));
        assert_eq!(fingerprint::<&str>(&[]), "cbf29ce484222325");
    }
}
