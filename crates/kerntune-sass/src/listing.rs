//! One kernel's instructions in their current order, with everything the
//! legality rules need: decoded control bits, roles, defs and uses, basic
//! blocks, and running sums of stall cycles.

use serde::Serialize;

use crate::address::Address;
use crate::control::{clear_reuse, Control};
use crate::disasm::FunctionListing;
use crate::error::SassError;
use crate::opcodes::{classify, ends_block, is_indirect_branch, LatencyTable, Role};
use crate::operands::{effects, Effects};
use crate::registers::RegisterClass;
use crate::syntax::Syntax;

/// Bytes per instruction on Volta and later.
pub const INSTRUCTION_BYTES: u64 = 16;

/// One instruction of a kernel.
#[derive(Clone, Debug, Serialize)]
pub struct Instruction {
    /// Position in the original schedule.
    pub original_index: usize,
    /// The instruction text as nvdisasm printed it, without the trailing `;`.
    pub text: String,
    /// The current low and high words (reuse flags may have been cleared).
    pub words: [u64; 2],
    /// The control bits decoded from the current high word.
    pub control: Control,
    #[serde(skip)]
    pub syntax: Syntax,
    /// What the instruction may take part in.
    pub role: Role,
    /// Registers read and written.
    pub effects: Effects,
    /// Index of its basic block; moves never change it.
    pub block: usize,
    /// Its address as `base + constant`, for memory instructions that have one.
    #[serde(skip)]
    pub(crate) address: Option<Address>,
}

impl Instruction {
    /// The opcode with its modifiers, e.g. `LDG.E.128`.
    pub fn mnemonic(&self) -> String {
        std::iter::once(self.syntax.opcode.as_str())
            .chain(self.syntax.modifiers.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The instruction text without `.reuse` flags, for comparing schedules.
    pub fn text_without_reuse(&self) -> String {
        strip_reuse(&self.text)
    }
}

/// Instruction text with the `.reuse` operand flags removed and spacing normalised.
pub fn strip_reuse(text: &str) -> String {
    text.replace(".reuse", "").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Opcodes after which control never falls through when they are unguarded.
const NO_FALLTHROUGH: &[&str] = &["BRA", "JMP", "EXIT", "RET", "KILL"];

/// The label names an operand refers to, as in `` `(.L_x_3) ``.
fn label_references(operands: &[String]) -> Vec<&str> {
    operands
        .iter()
        .filter_map(|o| o.split("`(").nth(1))
        .filter_map(|rest| rest.split(')').next())
        .map(str::trim)
        .collect()
}

/// The successors of every block. Where a target cannot be resolved, every
/// block counts as a successor.
fn successors(instructions: &[Instruction], starts: &[usize], function: &FunctionListing) -> Vec<Vec<usize>> {
    let blocks = starts.len() - 1;
    let block_at = |offset: u64| -> Option<usize> {
        let position = usize::try_from(offset / INSTRUCTION_BYTES).ok()?;
        starts[..blocks].iter().position(|&start| start == position)
    };
    (0..blocks)
        .map(|block| {
            let last = &instructions[starts[block + 1] - 1];
            let opcode = last.syntax.opcode.as_str();
            if !ends_block(opcode) {
                return vec![block + 1].into_iter().filter(|&b| b < blocks).collect();
            }
            let everything = || (0..blocks).collect::<Vec<_>>();
            if opcode == "RET" {
                return everything();
            }
            let mut next = Vec::new();
            for name in label_references(&last.syntax.operands) {
                let target = function.labels.iter().find(|l| l.name == name).and_then(|l| block_at(l.offset));
                match target {
                    Some(target) => next.push(target),
                    None => return everything(),
                }
            }
            if (opcode == "BRA" || opcode == "JMP" || opcode == "CALL") && next.is_empty() {
                return everything();
            }
            // A predicate among the operands (`BRA.U !UP0, ...`) makes it conditional too.
            let reads_predicate = last
                .effects
                .uses
                .iter()
                .any(|r| matches!(r.class(), RegisterClass::Predicate | RegisterClass::UniformPredicate));
            let unconditional = !reads_predicate && last.syntax.guard.map_or(true, |g| !g.negated);
            if !(unconditional && NO_FALLTHROUGH.contains(&opcode)) && block + 1 < blocks {
                next.push(block + 1);
            }
            next
        })
        .collect()
}

/// `result[a][b]`: `b` can be reached from the end of `a` through at least one edge.
fn reachability(successors: &[Vec<usize>]) -> Vec<Vec<bool>> {
    (0..successors.len())
        .map(|from| {
            let mut seen = vec![false; successors.len()];
            let mut stack: Vec<usize> = successors[from].clone();
            while let Some(block) = stack.pop() {
                if !std::mem::replace(&mut seen[block], true) {
                    stack.extend(&successors[block]);
                }
            }
            seen
        })
        .collect()
}

/// The barriers a `DEPBAR` waits on with a count (`DEPBAR.LE SB0, 0x2`
/// waits until at most two operations behind barrier 0 remain, so it relies on
/// the order in which they were issued). A form that cannot be read counts as
/// all barriers.
fn partial_wait_barriers(syntax: &Syntax) -> u8 {
    if syntax.opcode != "DEPBAR" {
        return 0;
    }
    let named = syntax.operands.first().and_then(|o| o.strip_prefix("SB")).and_then(|n| n.parse::<u8>().ok());
    match named {
        Some(barrier) if barrier < 6 => 1 << barrier,
        _ => 0b11_1111,
    }
}

/// The instructions of one kernel, in schedule order.
#[derive(Clone, Debug)]
pub struct KernelListing {
    name: String,
    instructions: Vec<Instruction>,
    /// `block_starts[b]` is the first position of block `b`; one extra entry
    /// holds the instruction count.
    block_starts: Vec<usize>,
    latency: LatencyTable,
    /// Barriers some `DEPBAR` waits on only partly (`DEPBAR.LE SB0, 0x2`),
    /// which relies on the order in which their setters issued.
    partially_waited: u8,
    /// `reaches[a][b]`: control can go from the end of block `a` to the start
    /// of block `b` (through at least one edge).
    reaches: Vec<Vec<bool>>,
    /// Stall cycles from the start of each instruction's block up to it (exclusive).
    prefix: Vec<u32>,
    /// Stall cycles from each instruction (inclusive) to the end of its block.
    suffix: Vec<u32>,
    /// `prefix` and `suffix` of the original schedule, by original position:
    /// the legality rules compare every distance with the original one.
    original_prefix: Vec<u32>,
    original_suffix: Vec<u32>,
}

impl KernelListing {
    /// Builds the listing from nvdisasm's view of a function. `extra_block_starts`
    /// are byte offsets that start a block even without an nvdisasm label
    /// (symbols inside the text, for instance).
    pub fn from_function(
        function: &FunctionListing,
        latency: LatencyTable,
        extra_block_starts: &[u64],
    ) -> Result<KernelListing, SassError> {
        let parse_error =
            |line: usize, reason: String| SassError::DisassemblyParse { kernel: function.name.clone(), line, reason };
        let mut instructions = Vec::with_capacity(function.instructions.len());
        let mut starts = vec![0usize];
        for (index, listed) in function.instructions.iter().enumerate() {
            if listed.offset != index as u64 * INSTRUCTION_BYTES {
                return Err(parse_error(
                    index,
                    format!("instruction at {:#x}, expected {:#x}", listed.offset, index as u64 * INSTRUCTION_BYTES),
                ));
            }
            let syntax = Syntax::parse(&listed.text)
                .ok_or_else(|| parse_error(index, format!("cannot parse `{}`", listed.text)))?;
            if is_indirect_branch(&syntax.opcode) {
                return Err(SassError::Unsupported {
                    kernel: function.name.clone(),
                    reason: format!("indirect branch `{}` at {:#06x}", listed.text, listed.offset),
                });
            }
            let labelled = function.labels.iter().any(|l| l.offset == listed.offset)
                || extra_block_starts.contains(&listed.offset);
            let previous_ends_block = instructions.last().is_some_and(|p: &Instruction| ends_block(&p.syntax.opcode));
            if index > 0 && (labelled || previous_ends_block) {
                starts.push(index);
            }
            let role = classify(&syntax);
            let effects = effects(&syntax, &role);
            let address = matches!(role, Role::Memory(_)).then(|| Address::of(&syntax)).flatten();
            instructions.push(Instruction {
                original_index: index,
                text: listed.text.clone(),
                words: listed.words,
                control: Control::decode(listed.words[1]),
                syntax,
                role,
                effects,
                block: starts.len() - 1,
                address,
            });
        }
        starts.push(instructions.len());
        let partially_waited = instructions.iter().map(|i| partial_wait_barriers(&i.syntax)).fold(0, |a, b| a | b);
        let successors = successors(&instructions, &starts, function);
        let reaches = reachability(&successors);
        let mut listing = KernelListing {
            original_prefix: Vec::new(),
            original_suffix: Vec::new(),
            partially_waited,
            reaches,
            name: function.name.clone(),
            prefix: vec![0; instructions.len()],
            suffix: vec![0; instructions.len()],
            instructions,
            block_starts: starts,
            latency,
        };
        for block in 0..listing.block_count() {
            listing.update_stall_sums(block);
        }
        listing.original_prefix = listing.prefix.clone();
        listing.original_suffix = listing.suffix.clone();
        Ok(listing)
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instructions in schedule order.
    pub fn instructions(&self) -> &[Instruction] {
        &self.instructions
    }

    /// The latency bounds the legality rules use.
    pub fn latency(&self) -> &LatencyTable {
        &self.latency
    }

    /// Barriers that a `DEPBAR` waits on only partly: their setters keep their order.
    pub fn partially_waited_barriers(&self) -> u8 {
        self.partially_waited
    }

    /// Number of basic blocks.
    pub fn block_count(&self) -> usize {
        self.block_starts.len() - 1
    }

    /// The positions `[start, end)` of a block.
    pub fn block_range(&self, block: usize) -> std::ops::Range<usize> {
        self.block_starts[block]..self.block_starts[block + 1]
    }

    /// Whether control can flow from the end of block `from` to the start of
    /// block `to` (a block reaches itself only through a loop).
    pub fn reaches(&self, from: usize, to: usize) -> bool {
        self.reaches[from][to]
    }

    /// `permutation()[k]` is the original position of the instruction now at `k`.
    pub fn permutation(&self) -> Vec<usize> {
        self.instructions.iter().map(|i| i.original_index).collect()
    }

    /// `positions()[i]` is the current position of the instruction originally at `i`.
    pub fn positions(&self) -> Vec<usize> {
        let mut positions = vec![0; self.instructions.len()];
        for (position, instruction) in self.instructions.iter().enumerate() {
            positions[instruction.original_index] = position;
        }
        positions
    }

    /// Stall cycles from the start of the instruction's block up to it.
    pub(crate) fn prefix(&self, position: usize) -> u32 {
        self.prefix[position]
    }

    /// Stall cycles from the instruction (inclusive) to the end of its block.
    pub(crate) fn suffix(&self, position: usize) -> u32 {
        self.suffix[position]
    }

    /// [`Self::prefix`] of the instruction now at `position`, in the original schedule.
    pub(crate) fn original_prefix(&self, position: usize) -> u32 {
        self.original_prefix[self.instructions[position].original_index]
    }

    /// [`Self::suffix`] of the instruction now at `position`, in the original schedule.
    pub(crate) fn original_suffix(&self, position: usize) -> u32 {
        self.original_suffix[self.instructions[position].original_index]
    }

    fn update_stall_sums(&mut self, block: usize) {
        let range = self.block_range(block);
        let mut running = 0;
        for position in range.clone() {
            self.prefix[position] = running;
            running += u32::from(self.instructions[position].control.stall);
        }
        for position in range {
            self.suffix[position] = running - self.prefix[position];
        }
    }

    /// Swaps the instructions at `earlier` and `earlier + 1` (same block,
    /// checked by the caller) and clears the reuse flags that may be stale: those
    /// of the two swapped instructions and of the one before them, the three
    /// instructions whose successor changed.
    pub(crate) fn swap(&mut self, earlier: usize) {
        self.instructions.swap(earlier, earlier + 1);
        for position in earlier.saturating_sub(1)..=earlier + 1 {
            let instruction = &mut self.instructions[position];
            if instruction.control.reuse != 0 {
                instruction.words[1] = clear_reuse(instruction.words[1]);
                instruction.control = Control::decode(instruction.words[1]);
                instruction.text = strip_reuse(&instruction.text);
            }
        }
        let block = self.instructions[earlier].block;
        self.update_stall_sums(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disasm::{Label, ListedInstruction};

    /// A listing from instruction texts and `label:` lines, all with the same control bits.
    fn listing(lines: &[&str]) -> KernelListing {
        let mut function = FunctionListing { name: "k".into(), ..Default::default() };
        for line in lines {
            let offset = function.instructions.len() as u64 * INSTRUCTION_BYTES;
            match line.strip_suffix(':') {
                Some(name) => function.labels.push(Label { name: name.into(), offset }),
                None => function.instructions.push(ListedInstruction { offset, text: line.to_string(), words: [0, 0] }),
            }
        }
        KernelListing::from_function(&function, LatencyTable::SM90, &[]).expect("valid test input")
    }

    #[test]
    fn labels_and_block_ending_instructions_start_blocks() {
        let l = listing(&["IADD3 R1, R2, R3, RZ", "@P0 BRA `(.L_x_0)", "IADD3 R1, R2, R3, RZ", ".L_x_0:", "EXIT"]);
        assert_eq!(l.block_count(), 3);
        assert_eq!(l.block_range(1), 2..3);
        assert_eq!(l.instructions()[3].block, 2);
    }

    #[test]
    fn a_guarded_branch_both_jumps_and_falls_through() {
        let l = listing(&["@P0 BRA `(.L_x_0)", "IADD3 R1, R2, R3, RZ", ".L_x_0:", "EXIT"]);
        assert!(l.reaches(0, 1) && l.reaches(0, 2));
        assert!(!l.reaches(2, 0) && !l.reaches(1, 1));
    }

    #[test]
    fn an_unconditional_branch_does_not_fall_through_but_one_on_a_uniform_predicate_does() {
        let jump = listing(&["BRA `(.L_x_0)", "IADD3 R1, R2, R3, RZ", ".L_x_0:", "EXIT"]);
        assert!(!jump.reaches(0, 1) && jump.reaches(0, 2));
        let uniform = listing(&["BRA.U !UP0, `(.L_x_0)", "IADD3 R1, R2, R3, RZ", ".L_x_0:", "EXIT"]);
        assert!(uniform.reaches(0, 1) && uniform.reaches(0, 2));
    }

    #[test]
    fn a_loop_body_reaches_itself_and_an_exit_reaches_nothing() {
        let l = listing(&["IADD3 R1, R2, R3, RZ", ".L_x_1:", "IADD3 R1, R1, 0x1, RZ", "@P0 BRA `(.L_x_1)", "EXIT"]);
        assert!(l.reaches(1, 1) && l.reaches(0, 1) && l.reaches(1, 2));
        assert!(!l.reaches(0, 0) && (0..3).all(|b| !l.reaches(2, b)));
    }

    #[test]
    fn a_branch_to_an_unknown_label_may_go_anywhere() {
        let l = listing(&["IADD3 R1, R2, R3, RZ", ".L_x_1:", "BRA `(.L_x_9)", "EXIT"]);
        assert!((0..3).all(|b| l.reaches(1, b)));
    }

    #[test]
    fn moves_keep_the_permutation_and_clear_stale_reuse_flags() {
        let mut l = listing(&["IADD3 R1, R2, R3, RZ", "LDG.E R4, desc[UR4][R6.64]", "IADD3 R8, R9, R10, RZ"]);
        let reused = Control { reuse: 0b11, ..l.instructions[0].control };
        l.instructions[0].words[1] = reused.encode(0);
        l.instructions[0].control = reused;
        l.instructions[0].text = "IADD3 R1, R2.reuse, R3.reuse, RZ".into();
        l.swap(1);
        assert_eq!(l.permutation(), [0, 2, 1]);
        assert_eq!(l.positions(), [0, 2, 1]);
        assert_eq!(l.instructions[0].control.reuse, 0);
        assert_eq!(l.instructions[0].text, "IADD3 R1, R2, R3, RZ");
    }
}
