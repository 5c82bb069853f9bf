//! Applying random legal moves: the engine of `kerntune sass shuffle` and of
//! the tests that check every rewritten cubin with nvdisasm.

use crate::disasm::Nvdisasm;
use crate::error::SassError;
use crate::moves::Move;
use crate::random::Random;
use crate::schedule::Schedule;

/// The result of [`shuffle`].
#[derive(Clone, Debug)]
pub struct Shuffled {
    /// The rewritten cubin.
    pub cubin: Vec<u8>,
    /// The moves applied, in order (fewer than asked if none was legal).
    pub moves: Vec<Move>,
    /// `permutation[k]` is the original position of the instruction now at `k`.
    pub permutation: Vec<usize>,
}

/// Applies up to `moves` random legal moves to `schedule`, each drawn
/// uniformly from the legal moves of the current schedule; the same schedule
/// and seed always give the same moves. Returns the moves applied; stops early
/// when no move is legal.
pub fn random_moves(schedule: &mut Schedule, moves: usize, seed: u64) -> Result<Vec<Move>, SassError> {
    let mut random = Random::seeded(seed);
    let mut applied = Vec::with_capacity(moves);
    for _ in 0..moves {
        let Some(chosen) = random_legal_move(schedule, &mut random) else {
            break;
        };
        schedule.apply(&chosen)?;
        applied.push(chosen);
    }
    Ok(applied)
}

/// A legal move drawn uniformly: candidates (a memory instruction and a
/// direction) are drawn uniformly and illegal ones rejected, which is uniform
/// over the legal ones and much cheaper than listing them all. After many
/// rejections the full list decides, so that "no legal move" is exact.
pub(crate) fn random_legal_move(schedule: &Schedule, random: &mut Random) -> Option<Move> {
    let movable: Vec<usize> = schedule
        .listing()
        .instructions()
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i.role, crate::opcodes::Role::Memory(_)))
        .map(|(position, _)| position)
        .collect();
    if movable.is_empty() {
        return None;
    }
    for _ in 0..8 * movable.len() {
        let index = movable[random.below(movable.len())];
        let candidate = if random.below(2) == 0 { Move::up(index) } else { Move::down(index) };
        if schedule.check(&candidate).is_ok() {
            return Some(candidate);
        }
    }
    let legal = schedule.legal_moves();
    (!legal.is_empty()).then(|| legal[random.below(legal.len())])
}

/// Applies `moves` random legal moves to one kernel of a cubin; the same
/// input and seed always give the same output.
pub fn shuffle(
    cubin: &[u8],
    kernel: &str,
    moves: usize,
    seed: u64,
    nvdisasm: &Nvdisasm,
) -> Result<Shuffled, SassError> {
    let mut schedule = Schedule::from_cubin(cubin, kernel, nvdisasm)?;
    let moves = random_moves(&mut schedule, moves, seed)?;
    Ok(Shuffled { cubin: schedule.to_cubin()?, moves, permutation: schedule.permutation() })
}
