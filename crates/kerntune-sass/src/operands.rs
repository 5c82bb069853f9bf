//! The registers an instruction reads and writes.
//!
//! Three sets per instruction:
//! - `defs`: every register it may write, over-approximated (a wider vector
//!   than needed, a source counted as a destination) wherever the exact width
//!   is not certain, because an extra register only adds dependencies;
//! - `must_defs`: registers it certainly writes, under-approximated (nothing
//!   for guarded or unmodelled instructions), used where a write is relied on
//!   to end an earlier value's life;
//! - `uses`: every register it may read, over-approximated the same way.
//!
//! Fences get every register they name in both `defs` and `uses`.

use serde::Serialize;

use crate::opcodes::Role;
use crate::registers::{RegSet, Register};
use crate::syntax::{mentions, RegisterMention, RegisterName, Syntax};

/// What an instruction reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Effects {
    pub defs: RegSet,
    #[serde(skip)]
    pub must_defs: RegSet,
    pub uses: RegSet,
}

impl Effects {
    /// Every register the instruction touches.
    pub fn accesses(&self) -> RegSet {
        self.defs.union(&self.uses)
    }
}

/// Opcodes whose first two operands are both destinations (predicate pairs).
const TWO_DESTINATIONS: &[&str] = &["ISETP", "FSETP", "HSETP2", "DSETP", "UISETP", "PLOP3", "UPLOP3"];

/// Widths of the register operands of one instruction.
struct Widths {
    /// Registers per data operand, over-approximated.
    data: u8,
    /// Registers of the first operand, when it differs from `data`.
    first: u8,
    /// Registers of the fourth operand (the 64-bit addend of `IMAD.WIDE`).
    fourth: u8,
    /// Registers of the first operand known for certain (for `must_defs`).
    first_certain: u8,
}

fn widths(syntax: &Syntax, role: &Role) -> Widths {
    let opcode = syntax.opcode.as_str();
    let has = |m: &str| syntax.has_modifier(m);
    let wide_type = syntax.modifiers.iter().any(|m| m.contains("64"));
    if opcode.contains("GMMA") {
        // Warpgroup MMA accumulators span up to 128 registers.
        return Widths { data: 8, first: 128, fourth: 8, first_certain: 0 };
    }
    if opcode == "HMMA" && matches!(role, Role::Plain) {
        // Known shapes only (see `opcodes::HMMA_MODIFIERS`): at most four
        // registers an operand; the destination is never relied on as written.
        return Widths { data: 4, first: 4, fourth: 4, first_certain: 0 };
    }
    if opcode.contains("MMA") {
        return Widths { data: 8, first: 8, fourth: 8, first_certain: 0 };
    }
    let data = if let Role::Memory(_) = role {
        if has("128") || (opcode.ends_with("SM") && has("4")) {
            4
        } else if has("64") || (opcode.ends_with("SM") && has("2")) {
            2
        } else {
            1
        }
    } else if has("128") {
        4
    } else if wide_type || opcode.starts_with('D') {
        2
    } else {
        1
    };
    let certain = match role {
        Role::Memory(_) => data,
        _ if opcode == "CS2R" || has("WIDE") || ((opcode == "LDC" || opcode == "ULDC") && has("64")) => 2,
        _ => 1,
    };
    // `IMAD.WIDE d, a, b, c`: 64-bit d and c, 32-bit a and b.
    let (first, fourth) = match (opcode, has("WIDE")) {
        ("CS2R", _) => (2, data),
        (_, true) => (2, 2),
        _ => (data, data),
    };
    Widths { data, first, fourth, first_certain: certain.min(first) }
}

fn add_mention(set: &mut RegSet, mention: &RegisterMention, width: u8) {
    match mention.register {
        RegisterName::AllPredicates => set.insert_all_predicates(),
        RegisterName::AllUniformPredicates => set.insert_all_uniform_predicates(),
        RegisterName::One(register) => {
            let count = if mention.descriptor_width > 0 {
                mention.descriptor_width
            } else if mention.pair {
                2
            } else if mention.in_brackets || matches!(register, Register::Predicate(_) | Register::UniformPredicate(_))
            {
                1
            } else {
                width
            };
            set.insert_range(register, count);
        }
    }
}

fn is_predicate(operand: &str) -> bool {
    mentions(operand).first().is_some_and(|m| {
        matches!(m.register, RegisterName::One(Register::Predicate(_) | Register::UniformPredicate(_)))
            && !m.in_brackets
    })
}

/// How many leading operands are destinations.
fn destination_count(syntax: &Syntax, role: &Role) -> usize {
    let operands = &syntax.operands;
    match role {
        Role::Memory(access) => usize::from(access.loads_register),
        Role::Fence(_) => 0,
        Role::Plain => {
            let opcode = syntax.opcode.as_str();
            if TWO_DESTINATIONS.contains(&opcode) {
                2
            } else if (opcode == "LOP3" || opcode == "ULOP3") && operands.first().is_some_and(|o| is_predicate(o)) {
                // `LOP3.LUT P0, R5, ...` writes a predicate and a register.
                2
            } else {
                // The destination, then any carry-out predicates right after it
                // (`IADD3 R4, P0, P1, ...`, `LEA R2, P3, ...`).
                1 + operands.iter().skip(1).take_while(|o| is_predicate(o)).count()
            }
        }
    }
}

/// Computes the effects of an instruction.
pub fn effects(syntax: &Syntax, role: &Role) -> Effects {
    let mut result = Effects::default();
    if let Some(predicate) = syntax.guard.and_then(|g| g.predicate) {
        result.uses.insert(predicate);
    }
    let widths = widths(syntax, role);
    let width_of = |index: usize| match index {
        0 => widths.first,
        3 => widths.fourth,
        _ => widths.data,
    };
    if let Role::Fence(_) = role {
        for (index, operand) in syntax.operands.iter().enumerate() {
            let width = width_of(index);
            for mention in mentions(operand) {
                add_mention(&mut result.defs, &mention, width);
                add_mention(&mut result.uses, &mention, width);
            }
        }
        return result;
    }
    let destinations = destination_count(syntax, role);
    // A guarded write may not happen: it is a possible write, never a certain one.
    let guarded = syntax.guard.is_some_and(|g| g.predicate.is_some());
    for (index, operand) in syntax.operands.iter().enumerate() {
        let width = width_of(index);
        for mention in mentions(operand) {
            let destination = index < destinations && !mention.in_brackets;
            if !destination {
                add_mention(&mut result.uses, &mention, width);
                continue;
            }
            add_mention(&mut result.defs, &mention, width);
            if mention.partial {
                // A partial write merges with the old value.
                add_mention(&mut result.uses, &mention, width);
            } else if !guarded {
                let certain = if index == 0 { widths.first_certain } else { 1 };
                add_mention(&mut result.must_defs, &mention, certain);
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcodes::classify;

    fn of(text: &str) -> Effects {
        let syntax = Syntax::parse(text).expect("valid test input");
        effects(&syntax, &classify(&syntax))
    }

    fn set(names: &[&str]) -> RegSet {
        names
            .iter()
            .map(|n| match crate::syntax::register_name(n) {
                Some(RegisterName::One(r)) => r,
                _ => panic!("{n}"),
            })
            .collect()
    }

    #[test]
    fn a_guarded_load_writes_its_destination_and_reads_guard_address_and_descriptor() {
        let e = of("@!P0 LDG.E R0, desc[UR4][R6.64+0x200]");
        assert_eq!(e.defs, set(&["R0"]));
        assert_eq!(e.uses, set(&["P0", "UR4", "UR5", "R6", "R7"]));
        assert!(e.must_defs.is_empty(), "a guarded write is not certain");
    }

    #[test]
    fn vector_loads_and_stores_cover_every_lane_register() {
        assert_eq!(of("LDS.128 R12, [R19+UR12]").defs, set(&["R12", "R13", "R14", "R15"]));
        assert_eq!(of("LDSM.16.MT88.4 R36, [R54+UR9]").defs, set(&["R36", "R37", "R38", "R39"]));
        let store = of("STG.E.64 desc[UR4][R2.64], R8");
        assert!(store.defs.is_empty());
        assert!(store.uses.contains(Register::General(9)));
        assert_eq!(of("STSM.16.M88.4 [R28], R24").uses, set(&["R28", "R24", "R25", "R26", "R27"]));
    }

    #[test]
    fn wide_arithmetic_writes_register_pairs() {
        let e = of("IMAD.WIDE R6, R9, 0x4, R4");
        assert_eq!(e.must_defs, set(&["R6", "R7"]));
        assert_eq!(e.uses, set(&["R9", "R4", "R5"]));
        assert_eq!(of("CS2R R16, SRZ").defs, set(&["R16", "R17"]));
        assert_eq!(of("LDC.64 R4, c[0x0][0x210]").must_defs, set(&["R4", "R5"]));
        assert!(of("UIADD3.64 UR8, UR4, UR8, URZ").defs.contains(Register::Uniform(9)));
    }

    #[test]
    fn comparisons_write_two_predicates_and_carries_are_destinations() {
        let e = of("ISETP.GE.AND P0, PT, R9, UR6, PT");
        assert_eq!(e.defs, set(&["P0"]));
        assert_eq!(e.uses, set(&["R9", "UR6"]));
        assert_eq!(of("IADD3 R48, P3, R48, 0x80, RZ").defs, set(&["R48", "P3"]));
        let carry_in = of("IADD3.X R45, RZ, UR7, R17, P3, P2");
        assert_eq!(carry_in.defs, set(&["R45"]));
        assert!(carry_in.uses.contains(Register::Predicate(3)) && carry_in.uses.contains(Register::Predicate(2)));
        assert_eq!(of("LOP3.LUT P1, R2, R0, 0x40, RZ, 0xc0, !PT").defs, set(&["P1", "R2"]));
    }

    #[test]
    fn predicate_register_transfers_touch_every_predicate() {
        let all = set(&["P0", "P1", "P2", "P3", "P4", "P5", "P6"]);
        assert_eq!(of("P2R R18, PR, RZ, 0x1").uses, all);
        assert_eq!(of("R2P PR, R3, 0x7f").defs, all);
    }

    #[test]
    fn partial_writes_also_read_the_destination() {
        let e = of("PRMT R108, RZ, 0x7610, R108");
        assert!(e.uses.contains(Register::General(108)));
        let half = of("HADD2 R5.H1_H1, R5, R6");
        assert!(half.uses.contains(Register::General(5)) && half.defs.contains(Register::General(5)));
        assert!(half.must_defs.is_empty());
    }

    #[test]
    fn fences_read_and_write_everything_they_name() {
        let e = of("IMMA.16832.S8.S8 R12, R28, R36, R12");
        assert!(e.defs.contains(Register::General(43)) && e.uses.contains(Register::General(43)));
        assert!(e.must_defs.is_empty());
    }

    #[test]
    fn warp_mma_writes_its_destination_and_reads_four_registers_an_operand() {
        let e = of("HMMA.16816.F32 R12, R28.reuse, R36, R12");
        assert_eq!(e.defs, set(&["R12", "R13", "R14", "R15"]));
        assert_eq!(e.uses, set(&["R28", "R29", "R30", "R31", "R36", "R37", "R38", "R39", "R12", "R13", "R14", "R15"]));
        assert!(e.must_defs.is_empty());
    }
}
