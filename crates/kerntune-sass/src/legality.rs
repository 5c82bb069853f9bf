//! The checks behind the rules of [`crate::moves`], as methods of the listing
//! ([`KernelListing::check`], [`KernelListing::apply`]). They live apart from the move
//! types because they read the listing, which reports errors, while the error type carries
//! moves: this way `error` depends on `moves` and nothing leads back.

use crate::deps::{is_load, required_cycles, Focus, Pending};
use crate::listing::{Instruction, KernelListing};
use crate::moves::{Move, Refusal};
use crate::opcodes::Role;
use crate::registers::{RegSet, Register, RegisterClass};

fn dependency(register: Register) -> Refusal {
    match register.class() {
        RegisterClass::Predicate | RegisterClass::UniformPredicate => Refusal::PredicateDependency { register },
        RegisterClass::General | RegisterClass::Uniform => Refusal::RegisterDependency { register },
    }
}

/// `after >= min(original, bound)`: a dependent pair may lose stall cycles
/// only down to what the latency bound still guarantees, or to what ptxas
/// itself gave it.
fn check_cycles(
    producer: &Instruction,
    consumer: &Instruction,
    original: u32,
    after: u32,
    bound: u32,
) -> Result<(), Refusal> {
    if after >= original.min(bound) {
        return Ok(());
    }
    Err(Refusal::StallShortened {
        producer: producer.text.clone(),
        consumer: consumer.text.clone(),
        before: original,
        after,
        bound,
    })
}

impl KernelListing {
    /// Checks a move against every rule, without applying it.
    pub fn check(&self, requested: &Move) -> Result<(), Refusal> {
        let count = self.instructions().len();
        let moving = self.instructions().get(requested.index).ok_or(Refusal::OutOfRange)?;
        if !matches!(moving.role, Role::Memory(_)) {
            return Err(Refusal::NotMovable { text: moving.text.clone() });
        }
        let earlier = requested.earlier().filter(|&e| e + 1 < count).ok_or(Refusal::OutOfRange)?;
        let [first, second] = [&self.instructions()[earlier], &self.instructions()[earlier + 1]];
        if first.block != second.block {
            return Err(Refusal::BlockBoundary);
        }
        for instruction in [first, second] {
            if let Role::Fence(kind) = instruction.role {
                return Err(Refusal::Fence { text: instruction.text.clone(), kind });
            }
        }
        // The instruction right after a fence may issue before the fence resolves
        // (`BAR.SYNC.DEFER_BLOCKING` blocks at the next instruction, not at itself), and
        // ptxas fills that slot with something that needs no synchronisation. A swap would
        // put another instruction there: measured on an H200, a shared load moved into the
        // slot after a barrier read data other threads had not yet stored.
        if let Some(before) = earlier.checked_sub(1).map(|b| &self.instructions()[b]) {
            if matches!(before.role, Role::Fence(_)) && before.block == first.block {
                return Err(Refusal::FenceShadow { text: before.text.clone() });
            }
        }
        check_pair(first, second, self.partially_waited_barriers())?;
        self.check_wait_guard(earlier)?;
        self.check_block_stalls(earlier)?;
        self.check_cross_block_stalls(earlier)
    }

    /// Every legal move, in position order.
    pub fn legal_moves(&self) -> Vec<Move> {
        (0..self.instructions().len())
            .filter(|&i| matches!(self.instructions()[i].role, Role::Memory(_)))
            .flat_map(|i| [Move::up(i), Move::down(i)])
            .filter(|m| self.check(m).is_ok())
            .collect()
    }

    /// Applies a move after checking it.
    pub fn apply(&mut self, requested: &Move) -> Result<(), Refusal> {
        self.check(requested)?;
        if let Some(earlier) = requested.earlier() {
            self.swap(earlier);
        }
        Ok(())
    }

    /// Rule 6: if the earlier instruction waits on barriers, the later one must
    /// not touch anything still in flight behind them, since after the swap it
    /// would run before the wait.
    fn check_wait_guard(&self, earlier: usize) -> Result<(), Refusal> {
        let [waiting, rising] = [&self.instructions()[earlier], &self.instructions()[earlier + 1]];
        let mask = waiting.control.wait_mask;
        // An instruction that ran before the wait in ptxas's schedule does not
        // rely on it: whatever it does rely on is waited for by an instruction
        // that was, and still is, before it (this rule keeps such waits before it).
        if mask == 0 || rising.original_index < waiting.original_index {
            return Ok(());
        }
        let pending = Pending::before(self, earlier);
        let touched = rising.effects.accesses();
        for barrier in (0..6u8).filter(|&b| mask & (1 << b) != 0) {
            let index = usize::from(barrier);
            let refuse = || Refusal::WaitGuard { text: rising.text.clone(), barrier };
            if pending.registers[index].intersects(&touched) {
                return Err(refuse());
            }
            let from_outside = pending.from_outside & (1 << barrier) != 0;
            if from_outside && !touched.difference(&pending.written).is_empty() {
                return Err(refuse());
            }
            if let Role::Memory(access) = rising.role {
                let unknown = from_outside || pending.unknown_memory & (1 << barrier) != 0;
                let conflict = pending.memory_writes[index].overlaps(access.reads.union(access.writes))
                    || access.writes.overlaps(pending.memory_reads[index]);
                if unknown || conflict {
                    return Err(refuse());
                }
            }
        }
        Ok(())
    }

    /// Rule 7 inside the block: pairs that end at the instruction moving up lose
    /// the stall of the one moving down, and pairs that start at the
    /// instruction moving down lose the stall of the one moving up.
    fn check_block_stalls(&self, earlier: usize) -> Result<(), Refusal> {
        let instructions = self.instructions();
        let [down, up] = [&instructions[earlier], &instructions[earlier + 1]];
        let block = self.block_range(down.block);
        let latency = self.latency();
        let lost_by_up = u32::from(down.control.stall);
        if lost_by_up > 0 {
            let focus = Focus::everything(up);
            for (producer, p) in instructions.iter().enumerate().take(earlier).skip(block.start) {
                if let Some(bound) = required_cycles(p, &focus, latency) {
                    let after = self.prefix(earlier + 1) - self.prefix(producer) - lost_by_up;
                    let original = self.original_prefix(earlier + 1) - self.original_prefix(producer);
                    check_cycles(p, up, original, after, bound)?;
                }
            }
        }
        let lost_by_down = u32::from(up.control.stall);
        if lost_by_down > 0 {
            for (consumer, c) in instructions.iter().enumerate().take(block.end).skip(earlier + 2) {
                if let Some(bound) = required_cycles(down, &Focus::everything(c), latency) {
                    let after = self.prefix(consumer) - self.prefix(earlier) - lost_by_down;
                    let original = self.original_prefix(consumer) - self.original_prefix(earlier);
                    check_cycles(down, c, original, after, bound)?;
                }
            }
        }
        Ok(())
    }

    /// Rule 7 across blocks: the instruction moving up starts fewer cycles after
    /// its block begins, and the one moving down has fewer cycles left before
    /// its block ends. Any instruction from which control can reach the block
    /// (or that the block can reach) may be on the other side of such a
    /// dependency, loops included, and every path between the two is at least
    /// as long as their two in-block stretches.
    fn check_cross_block_stalls(&self, earlier: usize) -> Result<(), Refusal> {
        let instructions = self.instructions();
        let [down, up] = [&instructions[earlier], &instructions[earlier + 1]];
        let latency = self.latency();
        let lost_by_up = u32::from(down.control.stall);
        if lost_by_up > 0 {
            let focus = self.exposed_above(earlier, up);
            let after = self.prefix(earlier + 1) - lost_by_up;
            let original = self.original_prefix(earlier + 1);
            for (position, producer) in instructions.iter().enumerate() {
                let reaches = self.reaches(producer.block, up.block);
                let behind_loop = producer.block == up.block && position > earlier + 1;
                if !reaches || (producer.block == up.block && !behind_loop) {
                    continue;
                }
                if let Some(bound) = required_cycles(producer, &focus, latency) {
                    let tail = self.suffix(position);
                    check_cycles(producer, up, self.original_suffix(position) + original, tail + after, bound)?;
                }
            }
        }
        let lost_by_down = u32::from(up.control.stall);
        if lost_by_down > 0 {
            let after = self.suffix(earlier) - lost_by_down;
            let original = self.original_suffix(earlier);
            let exposed = self.exposed_below(earlier, down);
            for (position, consumer) in instructions.iter().enumerate() {
                let reached = self.reaches(down.block, consumer.block);
                let ahead_in_loop = consumer.block == down.block && position < earlier;
                if !reached || (consumer.block == down.block && !ahead_in_loop) {
                    continue;
                }
                let focus = Focus {
                    later_reads: consumer.effects.uses.intersection(&exposed.0),
                    later_writes: consumer.effects.defs.intersection(&exposed.0.union(&exposed.1)),
                    later_waits: consumer.control.wait_mask & exposed.2,
                    later_loads: is_load(consumer),
                    later_memory: matches!(consumer.role, Role::Memory(_)),
                };
                if let Some(bound) = required_cycles(down, &focus, latency) {
                    let head = self.prefix(position);
                    check_cycles(down, consumer, original + self.original_prefix(position), after + head, bound)?;
                }
            }
        }
        Ok(())
    }

    /// What `up` (now at `earlier + 1`) may depend on from before its block:
    /// registers no earlier instruction of the block certainly writes, and
    /// barriers no earlier instruction of the block sets.
    fn exposed_above(&self, earlier: usize, up: &Instruction) -> Focus {
        let block = self.block_range(up.block);
        let mut written = RegSet::EMPTY;
        let mut set_barriers = 0u8;
        for instruction in &self.instructions()[block.start..earlier] {
            written = written.union(&instruction.effects.must_defs);
            set_barriers |= instruction.control.set_mask();
        }
        Focus {
            later_reads: up.effects.uses.difference(&written),
            later_writes: up.effects.defs.difference(&written),
            later_waits: up.control.wait_mask & !set_barriers,
            later_loads: is_load(up),
            later_memory: matches!(up.role, Role::Memory(_)),
        }
    }

    /// What may depend on `down` (now at `earlier`) after its block: the
    /// registers it writes or reads that no later instruction of the block
    /// certainly overwrites, and the barriers it sets that no later
    /// instruction of the block waits on. Returned as (written, read, barriers).
    fn exposed_below(&self, earlier: usize, down: &Instruction) -> (RegSet, RegSet, u8) {
        let block = self.block_range(down.block);
        let mut overwritten = RegSet::EMPTY;
        let mut waited = 0u8;
        for instruction in &self.instructions()[earlier + 2..block.end] {
            overwritten = overwritten.union(&instruction.effects.must_defs);
            waited |= instruction.control.wait_mask;
        }
        (
            down.effects.defs.difference(&overwritten),
            down.effects.uses.difference(&overwritten),
            down.control.set_mask() & !waited,
        )
    }
}

/// Rules 3 to 5 for two adjacent instructions. Two instructions that set the
/// same barrier may swap: a wait on a barrier waits for all its setters,
/// whatever their order, unless a `DEPBAR` waits on it only partly.
fn check_pair(first: &Instruction, second: &Instruction, partially_waited: u8) -> Result<(), Refusal> {
    let conflict = first
        .effects
        .defs
        .intersection(&second.effects.accesses())
        .union(&first.effects.uses.intersection(&second.effects.defs));
    if let Some(register) = conflict.first() {
        return Err(dependency(register));
    }
    if let (Role::Memory(a), Role::Memory(b)) = (first.role, second.role) {
        let disjoint = match (&first.address, &second.address) {
            (Some(x), Some(y)) => x.disjoint(y),
            _ => false,
        };
        if a.may_conflict(&b) && !disjoint {
            return Err(Refusal::MemoryAlias { text: second.text.clone() });
        }
    }
    let [c1, c2] = [&first.control, &second.control];
    let clash = (c1.set_mask() & c2.wait_mask)
        | (c2.set_mask() & c1.wait_mask)
        | (c1.set_mask() & c2.set_mask() & partially_waited);
    if clash != 0 {
        return Err(Refusal::ScoreboardOrder { barrier: clash.trailing_zeros() as u8 });
    }
    Ok(())
}
