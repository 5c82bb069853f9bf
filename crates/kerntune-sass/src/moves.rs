//! Legal moves: one memory instruction up or down by one slot.
//!
//! A move swaps two adjacent instructions of one basic block, one of them the
//! memory instruction being moved. It is legal only if nothing observable can
//! change; every rule errs on the side of refusing:
//! 1. both instructions are in the same basic block (no label, branch or
//!    block end between them);
//! 2. neither is a fence (control flow, barrier, scoreboard wait such as
//!    `DEPBAR`, anything this crate does not model);
//! 3. no register, uniform register or predicate is written by one and read
//!    or written by the other;
//! 4. they are not two memory accesses that may alias with at least one write
//!    (same space, and not the same base with disjoint offsets);
//! 5. neither sets a scoreboard barrier the other waits on, and they do not
//!    both set a barrier that a `DEPBAR` waits on only partly;
//! 6. the instruction moving up does not touch anything the other one's wait
//!    mask was protecting (a register or memory access still in flight behind
//!    that barrier);
//! 7. for every pair of dependent instructions, in the block or across block
//!    boundaries, the stall cycles between them do not drop below
//!    `min(original, bound)`, where `original` is their distance in the
//!    schedule ptxas produced (so a move and its inverse are both legal) and
//!    `bound` comes from the
//!    [`LatencyTable`](crate::LatencyTable).
//!
//! This module names moves and the reasons for refusing one;
//! [`KernelListing::check`](crate::KernelListing::check) applies the rules.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::opcodes::FenceKind;
use crate::registers::Register;

/// Which way a memory instruction moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// One slot earlier.
    Up,
    /// One slot later.
    Down,
}

/// Moving the instruction at position `index` one slot up or down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Move {
    pub index: usize,
    pub direction: Direction,
}

impl Move {
    pub fn up(index: usize) -> Move {
        Move { index, direction: Direction::Up }
    }

    pub fn down(index: usize) -> Move {
        Move { index, direction: Direction::Down }
    }

    /// The position of the earlier of the two swapped instructions.
    pub fn earlier(&self) -> Option<usize> {
        match self.direction {
            Direction::Up => self.index.checked_sub(1),
            Direction::Down => Some(self.index),
        }
    }

    /// The position the instruction ends up at.
    pub fn destination(&self) -> usize {
        match self.direction {
            Direction::Up => self.index.saturating_sub(1),
            Direction::Down => self.index + 1,
        }
    }

    /// The move that undoes this one.
    pub fn inverse(&self) -> Move {
        match self.direction {
            Direction::Up => Move::down(self.destination()),
            Direction::Down => Move::up(self.destination()),
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = match self.direction {
            Direction::Up => "up",
            Direction::Down => "down",
        };
        write!(f, "#{} {direction}", self.index)
    }
}

/// Why a move is illegal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    #[error("there is no instruction to swap with")]
    OutOfRange,
    #[error("`{text}` is not a memory instruction this crate moves")]
    NotMovable { text: String },
    #[error("it would cross a basic-block boundary (label, branch or block end)")]
    BlockBoundary,
    #[error("`{text}` is a fence ({kind:?}) that nothing moves across")]
    Fence { text: String, kind: FenceKind },
    #[error("it would change what follows `{text}`, whose next instruction may issue before it resolves")]
    FenceShadow { text: String },
    #[error("register {register} is written by one of the two and used by the other")]
    RegisterDependency { register: Register },
    #[error("predicate {register} is written by one of the two and used by the other")]
    PredicateDependency { register: Register },
    #[error("`{text}` may access the same memory, and one of the two writes it")]
    MemoryAlias { text: String },
    #[error("scoreboard barrier {barrier} is set by one of the two and waited on (or partly waited on) by the other")]
    ScoreboardOrder { barrier: u8 },
    #[error("`{text}` would move above a wait on barrier {barrier} that protects what it touches")]
    WaitGuard { text: String, barrier: u8 },
    #[error(
        "stall cycles from `{producer}` to `{consumer}` would drop to {after}, below both the \
         original {before} and the bound {bound}"
    )]
    StallShortened { producer: String, consumer: String, before: u32, after: u32, bound: u32 },
}
