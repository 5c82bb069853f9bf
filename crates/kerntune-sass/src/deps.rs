//! Dependencies between two instructions and the scoreboard state of a block.
//!
//! Two questions are answered here:
//! - does `later` depend on `earlier` (registers, predicates, scoreboard
//!   barriers), and if so how many stall cycles must separate them
//!   ([`required_cycles`]);
//! - which registers and memory accesses are still in flight behind each
//!   scoreboard barrier just before an instruction ([`Pending`]), which is
//!   what an instruction's wait mask protects.

use crate::listing::{Instruction, KernelListing};
use crate::opcodes::{FenceKind, LatencyTable, Role, Spaces};
use crate::registers::RegSet;

const BARRIERS: usize = 6;

/// The side of the later instruction of a pair that [`required_cycles`]
/// looks at: everything it reads, writes and waits on, or only the part that
/// can depend on instructions outside its block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Focus {
    pub later_reads: RegSet,
    pub later_writes: RegSet,
    pub later_waits: u8,
    /// The later instruction is a load: its result comes back from memory,
    /// tens of cycles after it issues, so it cannot overtake an earlier
    /// fixed-latency write of the same register.
    pub later_loads: bool,
    /// The later instruction is a memory instruction: its operands are read
    /// later than an ALU's, and it must keep its distance from a preceding
    /// synchronisation.
    pub later_memory: bool,
}

impl Focus {
    pub fn everything(later: &Instruction) -> Focus {
        Focus {
            later_reads: later.effects.uses,
            later_writes: later.effects.defs,
            later_waits: later.control.wait_mask,
            later_loads: is_load(later),
            later_memory: matches!(later.role, Role::Memory(_)),
        }
    }
}

/// Whether the instruction is a movable load (its destination is written from memory).
pub(crate) fn is_load(instruction: &Instruction) -> bool {
    matches!(instruction.role, Role::Memory(access) if access.loads_register)
}

/// The stall cycles `later` needs after `earlier`, if it depends on it:
/// - a true, output or anti dependency through a register covered by a
///   scoreboard barrier of `earlier` needs only the barrier to be set in time;
/// - an output dependency on a later load needs nothing (see [`Focus`]);
/// - one that relies on fixed latency needs the result latency (true and
///   output dependencies) or operand-read delay (anti dependencies) of `earlier`;
/// - waiting on a barrier `earlier` sets needs the barrier to be set in time;
/// - a memory instruction after a synchronisation needs the synchronisation's
///   delay (placeholders guarded by `@!PT` and control flow excepted).
///
/// The largest applicable bound wins; `None` means no dependency.
pub(crate) fn required_cycles(earlier: &Instruction, focus: &Focus, latency: &LatencyTable) -> Option<u32> {
    let opcode = earlier.syntax.opcode.as_str();
    let mut bound: Option<u32> = None;
    let mut need = |cycles: u32| bound = Some(bound.map_or(cycles, |b| b.max(cycles)));
    let written = earlier.effects.defs;
    let output_dependency = written.intersects(&focus.later_writes) && !focus.later_loads;
    if written.intersects(&focus.later_reads) || output_dependency {
        need(if earlier.control.write_barrier.is_some() {
            latency.scoreboard
        } else {
            latency.result(opcode, focus.later_memory)
        });
    }
    if earlier.effects.uses.intersects(&focus.later_writes) {
        need(if earlier.control.read_barrier.is_some() {
            latency.scoreboard
        } else {
            latency.operand_read(opcode, &earlier.role)
        });
    }
    if earlier.control.set_mask() & focus.later_waits != 0 {
        need(latency.scoreboard);
    }
    let synchronises = matches!(earlier.role, Role::Fence(FenceKind::Synchronization | FenceKind::NotModelled));
    if synchronises && focus.later_memory {
        need(latency.fence_to_memory);
    }
    bound
}

/// What is in flight behind each scoreboard barrier at one point of a block.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// Registers written or read asynchronously by an instruction that set the barrier.
    pub registers: [RegSet; BARRIERS],
    /// Memory spaces read by those instructions.
    pub memory_reads: [Spaces; BARRIERS],
    /// Memory spaces written by those instructions.
    pub memory_writes: [Spaces; BARRIERS],
    /// Barriers set by an instruction whose memory effects are not modelled.
    pub unknown_memory: u8,
    /// Barriers that may still be pending from before the block, with unknown content.
    pub from_outside: u8,
    /// Registers certainly written earlier in the block: nothing pending from
    /// outside the block can still involve them, since their writer had to wait.
    pub written: RegSet,
}

impl Pending {
    /// The state just before `position`, scanning its block from the start.
    pub fn before(listing: &KernelListing, position: usize) -> Pending {
        let block = listing.instructions()[position].block;
        let mut pending = Pending {
            registers: [RegSet::EMPTY; BARRIERS],
            memory_reads: [Spaces::NONE; BARRIERS],
            memory_writes: [Spaces::NONE; BARRIERS],
            unknown_memory: 0,
            from_outside: (1 << BARRIERS) - 1,
            written: RegSet::EMPTY,
        };
        for instruction in &listing.instructions()[listing.block_range(block).start..position] {
            pending.step(instruction);
        }
        pending
    }

    fn step(&mut self, instruction: &Instruction) {
        let control = &instruction.control;
        for barrier in 0..BARRIERS {
            if control.waits_on(barrier as u8) {
                self.registers[barrier] = RegSet::EMPTY;
                self.memory_reads[barrier] = Spaces::NONE;
                self.memory_writes[barrier] = Spaces::NONE;
                self.unknown_memory &= !(1 << barrier);
                self.from_outside &= !(1 << barrier);
            }
        }
        let mut track = |barrier: Option<u8>, registers: &RegSet| {
            let Some(barrier) = barrier else { return };
            let index = usize::from(barrier).min(BARRIERS - 1);
            self.registers[index] = self.registers[index].union(registers);
            match instruction.role {
                Role::Memory(access) => {
                    self.memory_reads[index] = self.memory_reads[index].union(access.reads);
                    self.memory_writes[index] = self.memory_writes[index].union(access.writes);
                }
                Role::Fence(_) => self.unknown_memory |= 1 << index,
                Role::Plain => {}
            }
        };
        track(control.write_barrier, &instruction.effects.defs);
        track(control.read_barrier, &instruction.effects.uses);
        self.written = self.written.union(&instruction.effects.must_defs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Control;
    use crate::disasm::{FunctionListing, ListedInstruction};

    fn listing(lines: &[(&str, Control)]) -> KernelListing {
        let function = FunctionListing {
            name: "k".into(),
            instructions: lines
                .iter()
                .enumerate()
                .map(|(i, (text, control))| ListedInstruction {
                    offset: i as u64 * 16,
                    text: text.to_string(),
                    words: [0, control.encode(0)],
                })
                .collect(),
            labels: vec![],
        };
        KernelListing::from_function(&function, LatencyTable::SM90, &[]).expect("valid test input")
    }

    fn control(stall: u8, write: Option<u8>, read: Option<u8>, wait: u8) -> Control {
        Control { stall, yield_flag: false, write_barrier: write, read_barrier: read, wait_mask: wait, reuse: 0 }
    }

    #[test]
    fn a_fixed_latency_true_dependency_needs_the_producers_latency() {
        let l = listing(&[
            ("IADD3 R1, R2, R3, RZ", control(1, None, None, 0)),
            ("IADD3 R4, R1, R1, RZ", control(1, None, None, 0)),
        ]);
        let [p, c] = [&l.instructions()[0], &l.instructions()[1]];
        assert_eq!(required_cycles(p, &Focus::everything(c), l.latency()), Some(LatencyTable::SM90.alu_result));
        assert_eq!(required_cycles(c, &Focus::everything(p), l.latency()), Some(LatencyTable::SM90.alu_read));
    }

    #[test]
    fn a_scoreboarded_result_needs_only_the_barrier_to_be_set() {
        let l = listing(&[
            ("LDG.E R1, desc[UR4][R2.64]", control(1, Some(2), None, 0)),
            ("IADD3 R4, R1, R1, RZ", control(1, None, None, 0b100)),
        ]);
        let [p, c] = [&l.instructions()[0], &l.instructions()[1]];
        assert_eq!(required_cycles(p, &Focus::everything(c), l.latency()), Some(LatencyTable::SM90.scoreboard));
    }

    #[test]
    fn overwriting_a_fixed_latency_result_with_a_load_needs_nothing() {
        let l = listing(&[
            ("IMAD.MOV.U32 R20, RZ, RZ, -0x800000", control(1, None, None, 0)),
            ("@!P5 LDG.E R20, desc[UR12][R10.64]", control(1, Some(1), None, 0)),
        ]);
        let [p, c] = [&l.instructions()[0], &l.instructions()[1]];
        assert_eq!(required_cycles(p, &Focus::everything(c), l.latency()), None);
        let reads_it = listing(&[
            ("IMAD.MOV.U32 R20, RZ, RZ, -0x800000", control(1, None, None, 0)),
            ("LDG.E R20, desc[UR12][R20.64]", control(1, Some(1), None, 0)),
        ]);
        let [p, c] = [&reads_it.instructions()[0], &reads_it.instructions()[1]];
        assert_eq!(
            required_cycles(p, &Focus::everything(c), reads_it.latency()),
            Some(LatencyTable::SM90.alu_to_memory)
        );
    }

    #[test]
    fn memory_instructions_wait_longer_for_alu_results_and_keep_away_from_synchronisation() {
        let l = listing(&[
            ("ISETP.NE.U32.AND P4, PT, R28, RZ, PT", control(2, None, None, 0)),
            ("LDGSTS.E.BYPASS.128 [R25+0x3800], desc[UR10][R18.64], P4", control(1, None, Some(3), 0)),
            ("ISETP.NE.U32.AND P2, PT, R24, RZ, PT", control(1, None, None, 0)),
            ("SEL R28, RZ, 0x10, P2", control(1, None, None, 0)),
            ("BAR.SYNC.DEFER_BLOCKING 0x0", control(1, None, None, 0)),
            ("@!PT LDS RZ, [RZ]", control(1, None, None, 0)),
            ("LDS.128 R28, [R141+UR5]", control(2, Some(1), None, 0)),
        ]);
        let i = l.instructions();
        let latency = l.latency();
        assert_eq!(required_cycles(&i[0], &Focus::everything(&i[1]), latency), Some(latency.alu_to_memory));
        assert_eq!(required_cycles(&i[2], &Focus::everything(&i[3]), latency), Some(latency.alu_result));
        assert_eq!(required_cycles(&i[4], &Focus::everything(&i[6]), latency), Some(latency.fence_to_memory));
        assert_eq!(required_cycles(&i[4], &Focus::everything(&i[5]), latency), None, "a placeholder is no access");
        assert_eq!(required_cycles(&i[5], &Focus::everything(&i[6]), latency), None, "nor a synchronisation");
    }

    #[test]
    fn independent_instructions_need_nothing() {
        let l = listing(&[
            ("IADD3 R1, R2, R3, RZ", control(1, None, None, 0)),
            ("IADD3 R4, R5, R6, RZ", control(1, None, None, 0)),
        ]);
        let [p, c] = [&l.instructions()[0], &l.instructions()[1]];
        assert_eq!(required_cycles(p, &Focus::everything(c), l.latency()), None);
    }

    #[test]
    fn a_wait_clears_what_its_barrier_guarded() {
        let l = listing(&[
            ("LDG.E R1, desc[UR4][R2.64]", control(1, Some(2), None, 0)),
            ("STG.E desc[UR4][R2.64], R7", control(1, None, Some(3), 0)),
            ("IADD3 R4, R1, R1, RZ", control(1, None, None, 0b100)),
            ("NOP", control(1, None, None, 0)),
        ]);
        let before_wait = Pending::before(&l, 2);
        assert!(before_wait.registers[2].contains(crate::registers::Register::General(1)));
        assert!(before_wait.registers[3].contains(crate::registers::Register::General(7)));
        assert_eq!(before_wait.memory_writes[3], Spaces::GLOBAL);
        assert_eq!(before_wait.memory_reads[2], Spaces::GLOBAL);
        assert_eq!(before_wait.from_outside, 0b111111);
        let after_wait = Pending::before(&l, 3);
        assert!(after_wait.registers[2].is_empty());
        assert_eq!(after_wait.from_outside, 0b111011);
        assert!(!after_wait.registers[3].is_empty());
    }
}
