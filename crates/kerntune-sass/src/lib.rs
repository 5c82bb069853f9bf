//! Reading and rewriting the native instruction schedule of CUDA kernels.
//!
//! On Volta and later GPUs every SASS instruction is a 128-bit word that
//! carries its own scheduling control bits (stall cycles, yield, scoreboard
//! barriers set and waited on, operand reuse flags), so a change of schedule
//! is a permutation of whole words inside a kernel's `.text.<kernel>` section.
//! This crate does that on Hopper (sm_90) cubins without an assembler:
//!
//! - [`Cubin`] parses the ELF file and lists its kernels;
//! - [`Nvdisasm`] finds and runs nvdisasm (from the CUDA toolkit or Triton's
//!   wheel, which runs on machines without a GPU);
//! - [`Schedule`] holds one kernel: its [`KernelListing`] of [`Instruction`]s
//!   with decoded [`Control`] bits, defs and uses, and basic blocks; it lists
//!   the legal [`Move`]s (one memory instruction up or down by one slot),
//!   applies them, refusing illegal ones with a [`Refusal`], and writes the
//!   result back as a cubin with instruction offsets and relocations fixed;
//! - [`shuffle`] applies random legal moves, [`show`] reports a kernel, and
//!   [`verify_permutation`] checks with nvdisasm that a rewritten cubin is
//!   exactly the intended permutation of the original;
//! - [`search`] looks for a faster schedule with simulated annealing or hill
//!   climbing, against any [`ScheduleObjective`] (a GPU timer in practice).
//!
//! ```no_run
//! use kerntune_sass::{shuffle, verify_permutation, Nvdisasm};
//!
//! # fn main() -> Result<(), kerntune_sass::SassError> {
//! let nvdisasm = Nvdisasm::locate()?;
//! let original = std::fs::read("matmul.cubin").expect("readable cubin");
//! let shuffled = shuffle(&original, "matmul", 100, 7, &nvdisasm)?;
//! verify_permutation(&nvdisasm, &original, &shuffled.cubin, "matmul", &shuffled.permutation)?;
//! # Ok(())
//! # }
//! ```
//!
//! The rules that make a move legal, and what this crate does not handle,
//! are described in `docs/sass.md` and in the [`moves`] module.

mod address;
mod control;
mod deps;
mod disasm;
mod elf;
mod error;
mod legality;
mod listing;
pub mod moves;
mod nvinfo;
mod opcodes;
mod operands;
mod random;
mod registers;
mod schedule;
pub mod search;
mod show;
mod shuffle;
mod syntax;
mod verify;

pub use control::Control;
pub use disasm::{
    parse_listing, triton_bin_dir, Disassembly, FunctionListing, Label, ListedInstruction, Nvdisasm, OffsetAttribute,
    NVDISASM_ENV, PYTHON_ENV,
};
pub use elf::Cubin;
pub use error::SassError;
pub use listing::{strip_reuse, Instruction, KernelListing, INSTRUCTION_BYTES};
pub use moves::{Direction, Move, Refusal};
pub use opcodes::{FenceKind, LatencyTable, MemoryAccess, Role, Spaces};
pub use operands::Effects;
pub use registers::{RegSet, Register, RegisterClass};
pub use schedule::Schedule;
pub use search::{
    anneal, hill_climb, AnnealingOptions, Candidate, HillClimbOptions, ScheduleObjective, SearchOutcome, LEADERS,
};
pub use show::{show, InstructionReport, KernelReport};
pub use shuffle::{random_moves, shuffle, Shuffled};
pub use syntax::{Guard, Syntax};
pub use verify::{verify_permutation, Verifier};
