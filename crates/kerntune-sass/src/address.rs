//! Telling apart two memory accesses of one thread through the same base.
//!
//! Two adjacent accesses whose address is the same registers plus different
//! constant offsets touch disjoint bytes of each thread's view of memory when
//! their `[offset, offset + size)` ranges do not overlap: the registers hold the
//! same values at both, since neither writes them (that would be a register
//! dependency, refused before). Different threads are not compared: under the
//! PTX memory model two threads that communicate through memory synchronise
//! with barriers, fences or atomics, and all of those are fences here.
//! The collective matrix accesses (`LDSM`, `STSM`), whose lanes exchange data,
//! and `LDGSTS`, which has two addresses, are never told apart.

use crate::syntax::Syntax;

/// The address of a simple memory access: base terms plus a constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// The non-constant terms (registers, descriptor), sorted.
    base: Vec<String>,
    offset: i64,
    bytes: i64,
}

impl Address {
    /// The address of a load or store, or `None` if it is not a single
    /// `[base + constant]` expression this module understands.
    pub fn of(syntax: &Syntax) -> Option<Address> {
        if matches!(syntax.opcode.as_str(), "LDSM" | "STSM" | "LDGSTS") {
            return None;
        }
        let mut bracketed = syntax.operands.iter().filter(|o| o.contains('['));
        let operand = bracketed.next()?;
        if bracketed.next().is_some() {
            return None;
        }
        let mut base = Vec::new();
        let mut offset = 0i64;
        let mut rest = operand.as_str();
        while let Some(open) = rest.find('[') {
            let prefix = rest[..open].trim();
            let close = open + rest[open..].find(']')?;
            let inside = &rest[open + 1..close];
            if prefix == "desc" {
                base.push(format!("desc:{}", inside.trim()));
            } else if prefix.is_empty() {
                for (negative, term) in terms(inside) {
                    match parse_constant(term) {
                        Some(value) => offset += if negative { -value } else { value },
                        None if negative => return None,
                        None => base.push(term.to_string()),
                    }
                }
            } else {
                return None;
            }
            rest = &rest[close + 1..];
        }
        if !rest.trim().is_empty() {
            return None;
        }
        base.sort();
        Some(Address { base, offset, bytes: access_bytes(syntax) })
    }

    /// Whether the two accesses certainly touch different bytes.
    pub fn disjoint(&self, other: &Address) -> bool {
        self.base == other.base
            && (self.offset + self.bytes <= other.offset || other.offset + other.bytes <= self.offset)
    }
}

/// Splits `R4.64+UR12-0x10` into signed terms.
fn terms(expression: &str) -> Vec<(bool, &str)> {
    let mut found = Vec::new();
    let mut start = 0;
    let mut negative = false;
    for (index, c) in expression.char_indices() {
        if c == '+' || c == '-' {
            let term = expression[start..index].trim();
            if !term.is_empty() {
                found.push((negative, term));
            }
            negative = c == '-';
            start = index + 1;
        }
    }
    let term = expression[start..].trim();
    if !term.is_empty() {
        found.push((negative, term));
    }
    found
}

fn parse_constant(term: &str) -> Option<i64> {
    match term.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => term.parse().ok(),
    }
}

/// Bytes one thread accesses, from the size modifier.
fn access_bytes(syntax: &Syntax) -> i64 {
    let has = |m: &str| syntax.has_modifier(m);
    if has("128") {
        16
    } else if has("64") {
        8
    } else if has("U16") || has("S16") {
        2
    } else if has("U8") || has("S8") {
        1
    } else {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> Option<Address> {
        Address::of(&Syntax::parse(text).expect("valid test input"))
    }

    #[test]
    fn same_base_with_disjoint_offsets_is_disjoint() {
        let a = address("STS.U16 [R57+UR12+0x1100], R7").expect("valid test input");
        let b = address("STS.U16 [UR12+R57+0x1300], R108").expect("valid test input");
        assert!(a.disjoint(&b));
        let c = address("STG.E desc[UR4][R4.64+0x200], R25").expect("valid test input");
        let d = address("STG.E desc[UR4][R4.64+0x400], R27").expect("valid test input");
        assert!(c.disjoint(&d));
    }

    #[test]
    fn overlapping_ranges_are_not_disjoint() {
        let wide = address("LDG.E.128 R4, desc[UR4][R2.64+0x10]").expect("valid test input");
        let inside = address("STG.E desc[UR4][R2.64+0x1c], R9").expect("valid test input");
        let after = address("STG.E desc[UR4][R2.64+0x20], R9").expect("valid test input");
        assert!(!wide.disjoint(&inside));
        assert!(wide.disjoint(&after));
    }

    #[test]
    fn different_bases_or_descriptors_may_alias() {
        let a = address("LDG.E R0, desc[UR4][R6.64]").expect("valid test input");
        let b = address("STG.E desc[UR4][R4.64+0x200], R21").expect("valid test input");
        let c = address("STG.E desc[UR6][R6.64+0x200], R21").expect("valid test input");
        assert!(!a.disjoint(&b));
        assert!(!a.disjoint(&c));
    }

    #[test]
    fn collective_and_two_address_accesses_are_not_analysed() {
        assert_eq!(address("LDSM.16.M88.4 R12, [R3+UR5+0x200]"), None);
        assert_eq!(address("LDGSTS.E.BYPASS.128 [R35+0x1000], desc[UR10][R10.64], P0"), None);
        assert_eq!(address("LDS R3, [-R4+0x10]"), None);
    }
}
