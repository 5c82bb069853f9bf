//! What each opcode is allowed to do in a schedule change.
//!
//! Three lists decide everything, and anything not on them is treated as a
//! fence that nothing moves across:
//! - memory instructions that may move, with the modifiers whose meaning is
//!   known (a strong, volatile or otherwise unlisted variant is a fence);
//! - plain instructions a memory instruction may be swapped with: arithmetic,
//!   logic, moves and constant loads whose operands are all explicit;
//! - opcodes that end a basic block.

use serde::Serialize;

use crate::syntax::Syntax;

/// Memory spaces an instruction may read or write, as a bit mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Spaces(u8);

impl Spaces {
    pub const NONE: Spaces = Spaces(0);
    pub const GLOBAL: Spaces = Spaces(1);
    pub const SHARED: Spaces = Spaces(2);
    pub const LOCAL: Spaces = Spaces(4);
    /// Generic addresses may point into any space.
    pub const ANY: Spaces = Spaces(7);

    /// Whether the two masks share a space.
    pub fn overlaps(self, other: Spaces) -> bool {
        self.0 & other.0 != 0
    }

    #[must_use]
    pub fn union(self, other: Spaces) -> Spaces {
        Spaces(self.0 | other.0)
    }
}

/// What a movable memory instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryAccess {
    pub reads: Spaces,
    pub writes: Spaces,
    /// The first operand is a destination register (a load).
    pub loads_register: bool,
    /// `LDGSTS`: an asynchronous global-to-shared copy.
    pub async_copy: bool,
}

impl MemoryAccess {
    /// Whether the two accesses may touch the same memory with at least one write.
    ///
    /// Two `LDGSTS` never conflict: both are asynchronous copies of the same
    /// commit group (nothing moves across `LDGDEPBAR`), whose completion order
    /// is unspecified, so a program in which they overlap is already racy.
    pub fn may_conflict(&self, other: &MemoryAccess) -> bool {
        if self.async_copy && other.async_copy {
            return false;
        }
        self.writes.overlaps(other.reads.union(other.writes)) || other.writes.overlaps(self.reads)
    }
}

/// Why an instruction is never swapped with its neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceKind {
    /// A branch, call, return, exit or reconvergence point.
    ControlFlow,
    /// A barrier, scoreboard wait, fence or other synchronisation.
    Synchronization,
    /// Guarded by `@!PT`: a placeholder ptxas put there on purpose.
    NeverExecutes,
    /// An instruction whose semantics this crate does not model.
    NotModelled,
}

/// The part an instruction may play in a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A memory instruction that may move.
    Memory(MemoryAccess),
    /// An instruction a memory instruction may be swapped with.
    Plain,
    /// Nothing is swapped with it.
    Fence(FenceKind),
}

const LOAD_SIZES: &[&str] = &["U8", "S8", "U16", "S16", "64", "128"];
const CACHE_HINTS: &[&str] = &["EF", "EL", "LU", "NA", "LTC64B", "LTC128B", "LTC256B"];

struct MemoryOpcode {
    opcode: &'static str,
    reads: Spaces,
    writes: Spaces,
    loads_register: bool,
    extra_modifiers: &'static [&'static str],
}

const MEMORY_OPCODES: &[MemoryOpcode] = &[
    MemoryOpcode {
        opcode: "LDG",
        reads: Spaces::GLOBAL,
        writes: Spaces::NONE,
        loads_register: true,
        extra_modifiers: &["E", "CONSTANT"],
    },
    MemoryOpcode {
        opcode: "STG",
        reads: Spaces::NONE,
        writes: Spaces::GLOBAL,
        loads_register: false,
        extra_modifiers: &["E"],
    },
    MemoryOpcode {
        opcode: "LDS",
        reads: Spaces::SHARED,
        writes: Spaces::NONE,
        loads_register: true,
        extra_modifiers: &["U"],
    },
    MemoryOpcode {
        opcode: "STS",
        reads: Spaces::NONE,
        writes: Spaces::SHARED,
        loads_register: false,
        extra_modifiers: &[],
    },
    MemoryOpcode {
        opcode: "LDSM",
        reads: Spaces::SHARED,
        writes: Spaces::NONE,
        loads_register: true,
        extra_modifiers: &["16", "M88", "MT88", "2", "4"],
    },
    MemoryOpcode {
        opcode: "STSM",
        reads: Spaces::NONE,
        writes: Spaces::SHARED,
        loads_register: false,
        extra_modifiers: &["16", "M88", "MT88", "2", "4"],
    },
    MemoryOpcode {
        opcode: "LDGSTS",
        reads: Spaces::GLOBAL,
        writes: Spaces::SHARED,
        loads_register: false,
        extra_modifiers: &["E", "BYPASS", "32", "ZFILL"],
    },
    MemoryOpcode {
        opcode: "LDL",
        reads: Spaces::LOCAL,
        writes: Spaces::NONE,
        loads_register: true,
        extra_modifiers: &[],
    },
    MemoryOpcode {
        opcode: "STL",
        reads: Spaces::NONE,
        writes: Spaces::LOCAL,
        loads_register: false,
        extra_modifiers: &[],
    },
    MemoryOpcode {
        opcode: "LD",
        reads: Spaces::ANY,
        writes: Spaces::NONE,
        loads_register: true,
        extra_modifiers: &["E"],
    },
    MemoryOpcode {
        opcode: "ST",
        reads: Spaces::NONE,
        writes: Spaces::ANY,
        loads_register: false,
        extra_modifiers: &["E"],
    },
];

/// Arithmetic, logic and data movement whose every operand is explicit.
const PLAIN_OPCODES: &[&str] = &[
    "IADD3", "IMAD", "LOP3", "SHF", "ISETP", "FSETP", "FADD", "FMUL", "FFMA", "FMNMX", "IMNMX", "MOV", "SEL", "FSEL",
    "PRMT", "LEA", "IABS", "P2R", "R2P", "PLOP3", "SGXT", "VIADD", "VIMNMX", "HADD2", "HMUL2", "HFMA2", "HSETP2",
    "HMNMX2", "I2FP", "F2FP", "F2I", "I2F", "F2F", "I2I", "FRND", "MUFU", "POPC", "FLO", "BREV", "BMSK", "UIADD3",
    "UIMAD", "ULOP3", "USHF", "UMOV", "ULEA", "UISETP", "USEL", "USGXT", "UPRMT", "UFLO", "UPOPC", "UBREV", "UBMSK",
    "UPLOP3", "R2UR", "LDC", "ULDC", "CS2R", "S2R", "S2UR", "NOP",
];

/// The warp-level tensor-core MMA (`mma.sync`) shapes and types whose register
/// operands are known: no operand spans more than four registers
/// (`HMMA.16816.F32 R12, R28, R36, R12` reads A from R28..R31, B from R36..R37
/// and C from R12..R15). Sparse and other variants stay fences.
const HMMA_MODIFIERS: &[&str] = &["16816", "1688", "1684", "F32", "F16", "BF16", "TF32"];

/// Constant-bank loads accept only these modifiers.
const CONSTANT_LOAD_MODIFIERS: &[&str] = &["64", "U8", "S8", "U16", "S16"];

/// Special registers that hold the same value wherever they are read.
const INVARIANT_SPECIAL_REGISTERS: &[&str] = &[
    "SR_TID",
    "SR_CTAID",
    "SR_NTID",
    "SR_NCTAID",
    "SR_LANEID",
    "SR_CgaCtaId",
    "SR_SWINHI",
    "SR_LTMASK",
    "SR_LEMASK",
    "SR_GTMASK",
    "SR_GEMASK",
    "SR_EQMASK",
];

/// Opcodes after which a new basic block starts.
const BLOCK_ENDS: &[&str] = &[
    "BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "EXIT", "BREAK", "BSYNC", "BSSY", "KILL", "BPT", "RTT",
    "WARPSYNC",
];

/// Branches whose target is computed at run time.
const INDIRECT_BRANCHES: &[&str] = &["BRX", "BRXU", "JMX", "JMXU"];

/// Synchronisation opcodes, reported as such (they are fences in any case).
const SYNCHRONIZATION: &[&str] = &[
    "BAR",
    "DEPBAR",
    "LDGDEPBAR",
    "MEMBAR",
    "FENCE",
    "ERRBAR",
    "CCTL",
    "SYNCS",
    "WARPGROUP",
    "ARRIVES",
    "NANOSLEEP",
    "YIELD",
    "ATOM",
    "ATOMS",
    "ATOMG",
    "RED",
    "REDG",
    "REDUX",
    "VOTE",
    "SHFL",
    "MATCH",
    "ELECT",
];

/// Whether the opcode ends a basic block.
pub fn ends_block(opcode: &str) -> bool {
    BLOCK_ENDS.contains(&opcode)
}

/// Whether the opcode is an indirect branch, which this crate refuses.
pub fn is_indirect_branch(opcode: &str) -> bool {
    INDIRECT_BRANCHES.contains(&opcode)
}

fn only_modifiers(syntax: &Syntax, allowed: &[&[&str]]) -> bool {
    syntax.modifiers.iter().all(|m| allowed.iter().any(|list| list.contains(&m.as_str())))
}

/// The role of an instruction.
pub fn classify(syntax: &Syntax) -> Role {
    let opcode = syntax.opcode.as_str();
    if syntax.guard.is_some_and(|g| g.never_executes()) {
        return Role::Fence(FenceKind::NeverExecutes);
    }
    if ends_block(opcode) {
        return Role::Fence(FenceKind::ControlFlow);
    }
    if SYNCHRONIZATION.contains(&opcode) {
        return Role::Fence(FenceKind::Synchronization);
    }
    if let Some(memory) = MEMORY_OPCODES.iter().find(|m| m.opcode == opcode) {
        if !only_modifiers(syntax, &[LOAD_SIZES, CACHE_HINTS, memory.extra_modifiers]) {
            return Role::Fence(FenceKind::NotModelled);
        }
        return Role::Memory(MemoryAccess {
            reads: memory.reads,
            writes: memory.writes,
            loads_register: memory.loads_register,
            async_copy: opcode == "LDGSTS",
        });
    }
    if !PLAIN_OPCODES.contains(&opcode) && opcode != "HMMA" {
        return Role::Fence(FenceKind::NotModelled);
    }
    let plain = match opcode {
        // A bare `NOP` only delays (ptxas pads stalls over 15 cycles with it);
        // its stall and any wait mask travel with it like any plain instruction's.
        "NOP" => syntax.modifiers.is_empty() && syntax.operands.is_empty(),
        "HMMA" => only_modifiers(syntax, &[HMMA_MODIFIERS]) && syntax.operands.len() == 4,
        "LDC" | "ULDC" => only_modifiers(syntax, &[CONSTANT_LOAD_MODIFIERS]),
        "CS2R" => syntax.operands.get(1).is_some_and(|source| source == "SRZ"),
        "S2R" | "S2UR" => syntax.operands.get(1).is_some_and(|source| {
            let name = source.split('.').next().unwrap_or(source);
            INVARIANT_SPECIAL_REGISTERS.contains(&name)
        }),
        _ => true,
    };
    if plain {
        Role::Plain
    } else {
        Role::Fence(FenceKind::NotModelled)
    }
}

/// Conservative upper bounds, in cycles, of how long results take (or how
/// late operands are read) on one architecture, used to decide when a move may
/// shorten the stall cycles between two dependent instructions.
///
/// A move may shorten the cycles between two dependent instructions only down
/// to `min(original cycles, bound)`. Since ptxas never separates dependent
/// instructions by less than the hardware needs, the smallest distance it
/// uses for a kind of dependency is an upper bound of that need; each bound
/// here is about twice the smallest distance measured over the test corpus
/// (`examples/ptxas_distances.rs`, see `docs/sass.md`), and a bound that is
/// too high only costs moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LatencyTable {
    /// Result latency of integer, fp32, fp16x2, logic, move and uniform-pipe
    /// instructions (ptxas leaves 4 cycles for the common ones).
    pub alu_result: u32,
    /// The same results read by a memory instruction, whose operands travel
    /// further: ptxas leaves at least 13 cycles from `ISETP` to a load or copy
    /// guarded or predicated by its result, 9 from `IADD3`/`LEA` to an address.
    pub alu_to_memory: u32,
    /// How late those instructions read their operands, for a later write of
    /// the same register (ptxas overwrites an operand 1 cycle after most of
    /// them, 4 at most).
    pub alu_read: u32,
    /// How late a load without a read barrier reads its address (ptxas
    /// overwrites it 1 cycle later).
    pub load_read: u32,
    /// How late a store or asynchronous copy without a read barrier reads its
    /// operands (ptxas overwrites them 3 cycles after a global store, 13 after
    /// a shared one).
    pub store_read: u32,
    /// From setting a scoreboard barrier to an instruction waiting on it
    /// (ptxas uses 2 cycles).
    pub scoreboard: u32,
    /// From a synchronisation (`BAR`, `LDGDEPBAR`, `SHFL`, ...) to the next
    /// memory instruction: `BAR.SYNC.DEFER_BLOCKING` lets the warp issue on
    /// until a later instruction needs the barrier, and ptxas never puts a
    /// memory access less than 6 cycles after a `BAR`.
    pub fence_to_memory: u32,
    /// Everything else that relies on fixed latency: tensor cores, fp64,
    /// conversions, transcendentals, instructions this crate does not model.
    pub other: u32,
}

/// Opcodes whose fixed latency is bounded by `LatencyTable::alu_result`.
const SIMPLE_ALU: &[&str] = &[
    "IADD3", "IMAD", "LOP3", "SHF", "ISETP", "FSETP", "FADD", "FMUL", "FFMA", "FMNMX", "IMNMX", "MOV", "SEL", "FSEL",
    "PRMT", "LEA", "IABS", "P2R", "R2P", "PLOP3", "CS2R", "SGXT", "VIADD", "VIMNMX", "HADD2", "HMUL2", "HFMA2",
    "HSETP2", "HMNMX2", "UIADD3", "UIMAD", "ULOP3", "USHF", "UMOV", "ULEA", "UISETP", "USEL", "USGXT", "UPRMT",
    "UPLOP3", "ULDC",
];

impl LatencyTable {
    /// The table for Hopper (sm_90, sm_90a).
    pub const SM90: LatencyTable = LatencyTable {
        alu_result: 8,
        alu_to_memory: 26,
        alu_read: 4,
        load_read: 8,
        store_read: 32,
        scoreboard: 4,
        fence_to_memory: 12,
        other: 64,
    };

    /// The table for an SM version, if this crate has one.
    pub fn for_sm(sm: u32) -> Option<LatencyTable> {
        (sm == 90).then_some(LatencyTable::SM90)
    }

    /// The bound for a result of `opcode` that no scoreboard covers, read by a
    /// memory instruction or by anything else.
    pub fn result(&self, opcode: &str, into_memory: bool) -> u32 {
        match (SIMPLE_ALU.contains(&opcode), into_memory) {
            (true, false) => self.alu_result,
            (true, true) => self.alu_to_memory,
            (false, _) => self.other,
        }
    }

    /// The bound for an operand read of `opcode` that no read barrier covers.
    pub fn operand_read(&self, opcode: &str, role: &Role) -> u32 {
        match role {
            _ if SIMPLE_ALU.contains(&opcode) => self.alu_read,
            Role::Memory(access) if access.loads_register => self.load_read,
            Role::Memory(_) => self.store_read,
            _ => self.other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(text: &str) -> Role {
        classify(&Syntax::parse(text).expect("valid test input"))
    }

    #[test]
    fn weak_loads_and_stores_may_move() {
        assert!(matches!(role("@!P0 LDG.E.128 R4, desc[UR4][R6.64]"), Role::Memory(_)));
        assert!(matches!(role("STS.U16 [R4+UR12+0x400], R7"), Role::Memory(_)));
        assert!(matches!(role("LDGSTS.E.BYPASS.LTC128B.128 [R5], desc[UR6][R2.64], P0"), Role::Memory(_)));
    }

    #[test]
    fn strong_or_unknown_memory_variants_are_fences() {
        assert_eq!(role("LDG.E.STRONG.GPU R4, desc[UR4][R6.64]"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("ST.E.STRONG.SYS [R2.64], R5"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(
            role("ATOMG.E.ADD.STRONG.GPU PT, R3, desc[UR4][R2.64], R5"),
            Role::Fence(FenceKind::Synchronization)
        );
    }

    #[test]
    fn control_flow_and_synchronisation_are_fences() {
        assert_eq!(role("@P0 EXIT"), Role::Fence(FenceKind::ControlFlow));
        assert_eq!(role("BRA `(.L_x_0)"), Role::Fence(FenceKind::ControlFlow));
        assert_eq!(role("BAR.SYNC.DEFER_BLOCKING 0x0"), Role::Fence(FenceKind::Synchronization));
        assert_eq!(role("DEPBAR.LE SB0, 0x1"), Role::Fence(FenceKind::Synchronization));
        assert_eq!(role("HGMMA.64x64x16.F32 R24, gdesc[UR16].tnspA, R24"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("@!PT LDS RZ, [RZ]"), Role::Fence(FenceKind::NeverExecutes));
    }

    #[test]
    fn warp_mma_of_known_shapes_is_plain_and_other_variants_are_fences() {
        assert_eq!(role("HMMA.16816.F32 R12, R28, R36, R12"), Role::Plain);
        assert_eq!(role("HMMA.16816.F32.BF16 R12, R28, R36, R12"), Role::Plain);
        assert_eq!(role("HMMA.1688.F32.TF32 R4, R8, R12, R4"), Role::Plain);
        assert_eq!(role("HMMA.SP.16832.F32 R4, R8, R12, R4, R20, 0x0"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("IMMA.16832.S8.S8 R4, R8, R12, R4"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("NOP"), Role::Plain);
    }

    #[test]
    fn clock_reads_are_fences_but_thread_indices_are_plain() {
        assert_eq!(role("S2R R0, SR_TID.X"), Role::Plain);
        assert_eq!(role("S2UR UR12, SR_CgaCtaId"), Role::Plain);
        assert_eq!(role("S2R R0, SR_CLOCKLO"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("CS2R R4, SR_CLOCKLO"), Role::Fence(FenceKind::NotModelled));
        assert_eq!(role("CS2R R16, SRZ"), Role::Plain);
    }

    #[test]
    fn stores_conflict_with_loads_of_the_same_space_only() {
        let access = |text| match role(text) {
            Role::Memory(access) => access,
            other => panic!("{text}: {other:?}"),
        };
        let global_load = access("LDG.E R0, desc[UR4][R6.64]");
        let global_store = access("STG.E desc[UR4][R4.64], R21");
        let shared_store = access("STS [R3], R4");
        let generic_load = access("LD.E R0, [R6.64]");
        let copy = access("LDGSTS.E.BYPASS.128 [R35], desc[UR10][R18.64], P0");
        assert!(!global_load.may_conflict(&global_load));
        assert!(global_load.may_conflict(&global_store));
        assert!(!global_load.may_conflict(&shared_store));
        assert!(generic_load.may_conflict(&shared_store));
        assert!(copy.may_conflict(&shared_store));
        assert!(copy.may_conflict(&global_store));
        assert!(!copy.may_conflict(&copy));
        assert!(!copy.may_conflict(&global_load));
    }
}
