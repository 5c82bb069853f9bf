//! Register names and compact register sets.
//!
//! Every resource an instruction can read or write and that the dependency
//! analysis tracks is one bit of a [`RegSet`]: the 255 general registers
//! `R0..R254`, the 63 uniform registers `UR0..UR62`, the predicates `P0..P6`
//! and the uniform predicates `UP0..UP6`. The zero registers (`RZ`, `URZ`) and
//! the true predicates (`PT`, `UPT`) are constants, not storage, and have no bit.

use std::fmt;

use serde::Serialize;

const GENERAL_BASE: usize = 0;
const GENERAL_COUNT: usize = 255;
const UNIFORM_BASE: usize = 256;
const UNIFORM_COUNT: usize = 63;
const PREDICATE_BASE: usize = 320;
const UNIFORM_PREDICATE_BASE: usize = 328;
const PREDICATE_COUNT: usize = 7;
const WORDS: usize = 6;

/// One architectural register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Register {
    /// `R0..R254`.
    General(u8),
    /// `UR0..UR62`.
    Uniform(u8),
    /// `P0..P6`.
    Predicate(u8),
    /// `UP0..UP6`.
    UniformPredicate(u8),
}

/// The broad class of a register, used to name the kind of a dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegisterClass {
    General,
    Uniform,
    Predicate,
    UniformPredicate,
}

impl Register {
    fn bit(self) -> Option<usize> {
        let (base, count, number) = match self {
            Register::General(n) => (GENERAL_BASE, GENERAL_COUNT, n),
            Register::Uniform(n) => (UNIFORM_BASE, UNIFORM_COUNT, n),
            Register::Predicate(n) => (PREDICATE_BASE, PREDICATE_COUNT, n),
            Register::UniformPredicate(n) => (UNIFORM_PREDICATE_BASE, PREDICATE_COUNT, n),
        };
        let number = usize::from(number);
        (number < count).then_some(base + number)
    }

    fn from_bit(bit: usize) -> Register {
        // Bits are only ever set through `bit()`, so every index falls in a range.
        let narrow = |n: usize| u8::try_from(n).unwrap_or(u8::MAX);
        if bit >= UNIFORM_PREDICATE_BASE {
            Register::UniformPredicate(narrow(bit - UNIFORM_PREDICATE_BASE))
        } else if bit >= PREDICATE_BASE {
            Register::Predicate(narrow(bit - PREDICATE_BASE))
        } else if bit >= UNIFORM_BASE {
            Register::Uniform(narrow(bit - UNIFORM_BASE))
        } else {
            Register::General(narrow(bit))
        }
    }

    /// The class of this register.
    pub fn class(self) -> RegisterClass {
        match self {
            Register::General(_) => RegisterClass::General,
            Register::Uniform(_) => RegisterClass::Uniform,
            Register::Predicate(_) => RegisterClass::Predicate,
            Register::UniformPredicate(_) => RegisterClass::UniformPredicate,
        }
    }

    /// The register `offset` places after this one in the same file, used for
    /// the upper halves of 64-bit pairs and vector operands.
    pub fn offset(self, offset: u8) -> Register {
        match self {
            Register::General(n) => Register::General(n.saturating_add(offset)),
            Register::Uniform(n) => Register::Uniform(n.saturating_add(offset)),
            Register::Predicate(n) => Register::Predicate(n.saturating_add(offset)),
            Register::UniformPredicate(n) => Register::UniformPredicate(n.saturating_add(offset)),
        }
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Register::General(n) => write!(f, "R{n}"),
            Register::Uniform(n) => write!(f, "UR{n}"),
            Register::Predicate(n) => write!(f, "P{n}"),
            Register::UniformPredicate(n) => write!(f, "UP{n}"),
        }
    }
}

impl Serialize for Register {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A set of registers, as a fixed-size bitset so that intersections are cheap.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RegSet {
    words: [u64; WORDS],
}

impl RegSet {
    /// The empty set.
    pub const EMPTY: RegSet = RegSet { words: [0; WORDS] };

    /// Adds a register; registers outside the architectural range are ignored
    /// (only the constants `RZ`, `URZ`, `PT`, `UPT` map there).
    pub fn insert(&mut self, register: Register) {
        if let Some(bit) = register.bit() {
            self.words[bit / 64] |= 1 << (bit % 64);
        }
    }

    /// Adds `count` consecutive registers starting at `first`.
    pub fn insert_range(&mut self, first: Register, count: u8) {
        for offset in 0..count {
            self.insert(first.offset(offset));
        }
    }

    /// Adds every predicate `P0..P6`, for instructions that read or write `PR`.
    pub fn insert_all_predicates(&mut self) {
        for n in 0..7 {
            self.insert(Register::Predicate(n));
        }
    }

    /// Adds every uniform predicate `UP0..UP6`, for `UPR`.
    pub fn insert_all_uniform_predicates(&mut self) {
        for n in 0..7 {
            self.insert(Register::UniformPredicate(n));
        }
    }

    /// Whether the register is in the set.
    pub fn contains(&self, register: Register) -> bool {
        register.bit().is_some_and(|bit| self.words[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// The union of two sets.
    #[must_use]
    pub fn union(&self, other: &RegSet) -> RegSet {
        let mut words = self.words;
        for (word, other) in words.iter_mut().zip(other.words) {
            *word |= other;
        }
        RegSet { words }
    }

    /// The intersection of two sets.
    #[must_use]
    pub fn intersection(&self, other: &RegSet) -> RegSet {
        let mut words = self.words;
        for (word, other) in words.iter_mut().zip(other.words) {
            *word &= other;
        }
        RegSet { words }
    }

    /// The registers of `self` that are not in `other`.
    #[must_use]
    pub fn difference(&self, other: &RegSet) -> RegSet {
        let mut words = self.words;
        for (word, other) in words.iter_mut().zip(other.words) {
            *word &= !other;
        }
        RegSet { words }
    }

    /// Whether the two sets share a register.
    pub fn intersects(&self, other: &RegSet) -> bool {
        self.words.iter().zip(other.words).any(|(a, b)| a & b != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&word| word == 0)
    }

    /// The registers in the set, in a stable order (general, uniform, predicates).
    pub fn iter(&self) -> impl Iterator<Item = Register> + '_ {
        (0..WORDS * 64).filter(|&bit| self.words[bit / 64] & (1 << (bit % 64)) != 0).map(Register::from_bit)
    }

    /// The first register of the set, used to name a dependency in a message.
    pub fn first(&self) -> Option<Register> {
        self.iter().next()
    }
}

impl fmt::Debug for RegSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for RegSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.iter().map(|r| r.to_string()).collect();
        write!(f, "{}", names.join(" "))
    }
}

impl Serialize for RegSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl FromIterator<Register> for RegSet {
    fn from_iter<I: IntoIterator<Item = Register>>(iter: I) -> Self {
        let mut set = RegSet::EMPTY;
        for register in iter {
            set.insert(register);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_registers_and_true_predicates_are_not_storage() {
        let mut set = RegSet::EMPTY;
        set.insert(Register::General(255));
        set.insert(Register::Uniform(63));
        set.insert(Register::Predicate(7));
        assert!(set.is_empty());
    }

    #[test]
    fn ranges_stop_at_the_last_real_register() {
        let mut set = RegSet::EMPTY;
        set.insert_range(Register::General(253), 4);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![Register::General(253), Register::General(254)]);
    }

    #[test]
    fn classes_do_not_alias_each_other() {
        let general: RegSet = [Register::General(3)].into_iter().collect();
        let uniform: RegSet = [Register::Uniform(3)].into_iter().collect();
        let predicate: RegSet = [Register::Predicate(3)].into_iter().collect();
        assert!(!general.intersects(&uniform));
        assert!(!general.intersects(&predicate));
        assert!(general.union(&uniform).intersects(&uniform));
        assert_eq!(general.union(&predicate).difference(&general), predicate);
    }
}
