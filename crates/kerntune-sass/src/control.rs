//! The scheduling control bits that every Volta-and-later instruction carries.
//!
//! A 128-bit instruction is stored as two little-endian 64-bit words; the
//! control field is bits 41..=61 of the high word (bits 105..=125 of the
//! instruction). The layout was checked against nvdisasm 12.8 on sm_90 cubins:
//! the reuse bits match the `.reuse` flags nvdisasm prints, operand by operand,
//! and every consumer of a variable-latency result (S2R, LDC, LDG, ...) waits
//! on the write barrier its producer sets (see the crate's tests).
//!
//! | instruction bits | high-word bits | field |
//! | --- | --- | --- |
//! | 105..=108 | 41..=44 | stall cycles before the next instruction issues |
//! | 109 | 45 | yield flag (raw bit) |
//! | 110..=112 | 46..=48 | write scoreboard barrier set (7 = none) |
//! | 113..=115 | 49..=51 | read scoreboard barrier set (7 = none) |
//! | 116..=121 | 52..=57 | wait mask over barriers 0..=5 |
//! | 122..=125 | 58..=61 | operand reuse flags (slots a, b, c, d) |

use std::fmt;

use serde::Serialize;

const CONTROL_SHIFT: u32 = 41;
const REUSE_SHIFT: u32 = 58;
const REUSE_MASK: u64 = 0xf << REUSE_SHIFT;
const FIELD_MASK: u64 = (1 << 21) - 1;
const NO_BARRIER: u8 = 7;

/// The decoded control field of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Control {
    /// Cycles the warp waits after issuing this instruction before issuing the next.
    pub stall: u8,
    /// The yield bit as encoded.
    pub yield_flag: bool,
    /// Scoreboard barrier (0..=5) released when the results are written.
    pub write_barrier: Option<u8>,
    /// Scoreboard barrier (0..=5) released when the sources have been read.
    pub read_barrier: Option<u8>,
    /// Barriers (bit `b` = barrier `b`) this instruction waits on before issuing.
    pub wait_mask: u8,
    /// Operand reuse-cache flags (bit 0 = slot a, ...).
    pub reuse: u8,
}

impl Control {
    /// Decodes the control field from an instruction's high word.
    pub fn decode(high_word: u64) -> Control {
        let field = high_word >> CONTROL_SHIFT;
        let bits = |shift: u32, width: u32| -> u8 {
            // The mask keeps at most 6 bits, so the value always fits a u8.
            u8::try_from((field >> shift) & ((1 << width) - 1)).unwrap_or(u8::MAX)
        };
        let barrier = |value: u8| (value != NO_BARRIER).then_some(value);
        Control {
            stall: bits(0, 4),
            yield_flag: bits(4, 1) == 1,
            write_barrier: barrier(bits(5, 3)),
            read_barrier: barrier(bits(8, 3)),
            wait_mask: bits(11, 6),
            reuse: bits(17, 4),
        }
    }

    /// Writes this control field into an instruction's high word, keeping the
    /// other bits of the word.
    pub fn encode(&self, high_word: u64) -> u64 {
        let barrier = |b: Option<u8>| u64::from(b.unwrap_or(NO_BARRIER) & 7);
        let field = u64::from(self.stall & 0xf)
            | u64::from(self.yield_flag) << 4
            | barrier(self.write_barrier) << 5
            | barrier(self.read_barrier) << 8
            | u64::from(self.wait_mask & 0x3f) << 11
            | u64::from(self.reuse & 0xf) << 17;
        (high_word & !(FIELD_MASK << CONTROL_SHIFT)) | field << CONTROL_SHIFT
    }

    /// Whether this instruction waits on `barrier` before issuing.
    pub fn waits_on(&self, barrier: u8) -> bool {
        self.wait_mask & (1 << barrier) != 0
    }

    /// The barriers this instruction sets, as a mask.
    pub fn set_mask(&self) -> u8 {
        let bit = |barrier: Option<u8>| barrier.map_or(0, |b| 1u8 << b);
        bit(self.write_barrier) | bit(self.read_barrier)
    }
}

/// The high word with its reuse flags cleared. Clearing a reuse flag is always
/// safe: the operand is then read from the register file instead of the
/// operand reuse cache, which costs at most a bank conflict.
pub fn clear_reuse(high_word: u64) -> u64 {
    high_word & !REUSE_MASK
}

impl fmt::Display for Control {
    /// The compact notation CuAssembler made familiar:
    /// `[wait:read:write:yield:stall]`, e.g. `[B--2---:R-:W1:Y:S04]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wait: String = (0..6).map(|b| if self.waits_on(b) { char::from(b'0' + b) } else { '-' }).collect();
        let barrier = |b: Option<u8>| b.map_or_else(|| "-".to_string(), |b| b.to_string());
        write!(
            f,
            "[B{wait}:R{}:W{}:{}:S{:02}]",
            barrier(self.read_barrier),
            barrier(self.write_barrier),
            if self.yield_flag { 'Y' } else { '-' },
            self.stall
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // High words taken from nvdisasm -hex of a Triton sm_90 vector add.
    const S2R_SETS_W1_STALL_7: u64 = 0x000e_6e00_0000_2500;
    const IMAD_WAITS_ON_1_STALL_5: u64 = 0x002f_ca00_078e_00ff;
    const LOP3_REUSES_SLOT_A: u64 = 0x040f_e200_078e_fcff;

    #[test]
    fn a_variable_latency_producer_sets_a_write_barrier() {
        let control = Control::decode(S2R_SETS_W1_STALL_7);
        assert_eq!(control.stall, 7);
        assert_eq!(control.write_barrier, Some(1));
        assert_eq!(control.read_barrier, None);
        assert_eq!(control.wait_mask, 0);
    }

    #[test]
    fn its_consumer_waits_on_that_barrier() {
        let control = Control::decode(IMAD_WAITS_ON_1_STALL_5);
        assert_eq!(control.stall, 5);
        assert!(control.waits_on(1));
        assert_eq!(control.wait_mask, 0b10);
        assert_eq!(control.write_barrier, None);
    }

    #[test]
    fn reuse_flags_sit_above_the_wait_mask_and_clear_alone() {
        let control = Control::decode(LOP3_REUSES_SLOT_A);
        assert_eq!(control.reuse, 0b0001);
        let cleared = clear_reuse(LOP3_REUSES_SLOT_A);
        let after = Control::decode(cleared);
        assert_eq!(after.reuse, 0);
        assert_eq!(Control { reuse: 0, ..control }, after);
        assert_eq!(cleared & 0x03ff_ffff_ffff_ffff, LOP3_REUSES_SLOT_A & 0x03ff_ffff_ffff_ffff);
    }

    #[test]
    fn encoding_a_decoded_field_gives_back_the_word() {
        for word in [S2R_SETS_W1_STALL_7, IMAD_WAITS_ON_1_STALL_5, LOP3_REUSES_SLOT_A, u64::MAX, 0] {
            assert_eq!(Control::decode(word).encode(word), word, "{word:#x}");
        }
        let changed = Control { stall: 3, wait_mask: 0b100001, ..Control::decode(0) }.encode(0x1234);
        assert_eq!(Control::decode(changed).stall, 3);
        assert_eq!(Control::decode(changed).wait_mask, 0b100001);
        assert_eq!(changed & 0xffff, 0x1234);
    }

    #[test]
    fn display_uses_the_cuassembler_notation() {
        assert_eq!(Control::decode(IMAD_WAITS_ON_1_STALL_5).to_string(), "[B-1----:R-:W-:-:S05]");
    }
}
