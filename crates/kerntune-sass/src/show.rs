//! `kerntune sass show`: a kernel's instructions with their control bits,
//! defs and uses, and which moves are legal; as a table or as JSON.

use std::fmt;

use serde::Serialize;

use crate::control::Control;
use crate::disasm::Nvdisasm;
use crate::error::SassError;
use crate::listing::INSTRUCTION_BYTES;
use crate::moves::Move;
use crate::opcodes::Role;
use crate::registers::RegSet;
use crate::schedule::Schedule;

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct InstructionReport {
    pub offset: u64,
    pub block: usize,
    pub text: String,
    pub control: Control,
    /// `memory`, `plain`, or `fence`.
    pub role: &'static str,
    pub defs: RegSet,
    pub uses: RegSet,
    /// Why moving up is refused; `None` when it is legal or not a memory instruction.
    pub up: Option<String>,
    /// Why moving down is refused; `None` when it is legal or not a memory instruction.
    pub down: Option<String>,
    pub can_move_up: bool,
    pub can_move_down: bool,
}

/// What `show` prints for one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub kernel: String,
    pub blocks: usize,
    pub legal_moves: usize,
    pub instructions: Vec<InstructionReport>,
}

impl KernelReport {
    /// The report for a schedule in its current state.
    pub fn from_schedule(schedule: &Schedule) -> KernelReport {
        let listing = schedule.listing();
        let mut legal_moves = 0;
        let instructions = listing
            .instructions()
            .iter()
            .enumerate()
            .map(|(position, instruction)| {
                let memory = matches!(instruction.role, Role::Memory(_));
                let verdict = |candidate: Move| -> (bool, Option<String>) {
                    if !memory {
                        return (false, None);
                    }
                    match schedule.check(&candidate) {
                        Ok(()) => (true, None),
                        Err(refusal) => (false, Some(refusal.to_string())),
                    }
                };
                let (can_move_up, up) = verdict(Move::up(position));
                let (can_move_down, down) = verdict(Move::down(position));
                legal_moves += usize::from(can_move_up) + usize::from(can_move_down);
                InstructionReport {
                    offset: position as u64 * INSTRUCTION_BYTES,
                    block: instruction.block,
                    text: instruction.text.clone(),
                    control: instruction.control,
                    role: match instruction.role {
                        Role::Memory(_) => "memory",
                        Role::Plain => "plain",
                        Role::Fence(_) => "fence",
                    },
                    defs: instruction.effects.defs,
                    uses: instruction.effects.uses,
                    up,
                    down,
                    can_move_up,
                    can_move_down,
                }
            })
            .collect();
        KernelReport { kernel: schedule.kernel().to_string(), blocks: listing.block_count(), legal_moves, instructions }
    }
}

impl fmt::Display for KernelReport {
    /// A table: offset, block, control bits, legal moves, text, defs, uses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel {}: {} instructions, {} basic blocks, {} legal moves",
            self.kernel,
            self.instructions.len(),
            self.blocks,
            self.legal_moves
        )?;
        writeln!(
            f,
            "{:>6} {:>4}  {:<23} {:<5} {:<48} {:<24} uses",
            "offset", "blk", "control", "moves", "instruction", "defs"
        )?;
        for row in &self.instructions {
            let moves = match (row.role, row.can_move_up, row.can_move_down) {
                ("memory", true, true) => "up,dn",
                ("memory", true, false) => "up",
                ("memory", false, true) => "dn",
                ("memory", false, false) => "-",
                _ => "",
            };
            writeln!(
                f,
                "{:>6} {:>4}  {:<23} {:<5} {:<48} {:<24} {}",
                format!("{:04x}", row.offset),
                row.block,
                row.control.to_string(),
                moves,
                row.text,
                row.defs.to_string(),
                row.uses
            )?;
        }
        Ok(())
    }
}

/// The report for one kernel of a cubin.
pub fn show(cubin: &[u8], kernel: &str, nvdisasm: &Nvdisasm) -> Result<KernelReport, SassError> {
    Ok(KernelReport::from_schedule(&Schedule::from_cubin(cubin, kernel, nvdisasm)?))
}
