//! Splitting nvdisasm's instruction text into guard, opcode, modifiers and
//! operands, and finding the registers an operand names.

use crate::registers::Register;

/// The guard predicate of an instruction (`@P0`, `@!UP1`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The predicate read; `None` for `PT`/`UPT`, which are constants.
    pub predicate: Option<Register>,
    /// Whether the guard is negated (`@!P0`).
    pub negated: bool,
}

impl Guard {
    /// `@!PT`: the instruction never executes (ptxas emits such no-ops as
    /// hardware workarounds, so they are left exactly where they are).
    pub fn never_executes(&self) -> bool {
        self.negated && self.predicate.is_none()
    }
}

/// An instruction split into its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syntax {
    pub guard: Option<Guard>,
    /// The opcode without modifiers, e.g. `LDG` for `LDG.E.128`.
    pub opcode: String,
    /// The dot-separated modifiers, e.g. `["E", "128"]`.
    pub modifiers: Vec<String>,
    /// The operands, split at top-level commas, trimmed.
    pub operands: Vec<String>,
}

/// How a register is named inside an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterMention {
    pub register: RegisterName,
    /// Inside `[...]`: an address or index, not data.
    pub in_brackets: bool,
    /// Followed by `.64` (the first of a 64-bit pair).
    pub pair: bool,
    /// For the `URn` of `desc[URn]` (a 64-bit memory descriptor) 2, for
    /// `gdesc[URn]` (a pair of matrix descriptors) 4, otherwise 0.
    pub descriptor_width: u8,
    /// Followed by a sub-register selector such as `.H1` or `.B2`: a partial access.
    pub partial: bool,
}

/// A name that denotes registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterName {
    One(Register),
    /// `PR`: all predicates at once.
    AllPredicates,
    /// `UPR`: all uniform predicates at once.
    AllUniformPredicates,
}

impl Syntax {
    /// Parses nvdisasm's text for one instruction (without the trailing `;`).
    pub fn parse(text: &str) -> Option<Syntax> {
        let mut rest = text.trim().trim_end_matches(';').trim();
        let mut guard = None;
        if let Some(after_at) = rest.strip_prefix('@') {
            let end = after_at.find(char::is_whitespace)?;
            let (negated, name) = match after_at[..end].strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, &after_at[..end]),
            };
            let predicate = match register_name(name)? {
                RegisterName::One(register) => register,
                _ => return None,
            };
            let constant = matches!(predicate, Register::Predicate(7) | Register::UniformPredicate(7));
            guard = Some(Guard { predicate: (!constant).then_some(predicate), negated });
            rest = after_at[end..].trim_start();
        }
        let (mnemonic, operand_text) = match rest.find(char::is_whitespace) {
            Some(end) => (&rest[..end], rest[end..].trim()),
            None => (rest, ""),
        };
        let mut parts = mnemonic.split('.');
        let opcode = parts.next().filter(|o| !o.is_empty())?.to_string();
        let modifiers = parts.map(str::to_string).collect();
        Some(Syntax { guard, opcode, modifiers, operands: split_operands(operand_text) })
    }

    /// Whether the instruction carries a modifier.
    pub fn has_modifier(&self, modifier: &str) -> bool {
        self.modifiers.iter().any(|m| m == modifier)
    }
}

fn split_operands(text: &str) -> Vec<String> {
    let mut operands = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                operands.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        operands.push(current.trim().to_string());
    }
    operands
}

/// Recognises `R7`, `RZ`, `UR4`, `P0`, `PT`, `UP1`, `PR`, ...
pub fn register_name(name: &str) -> Option<RegisterName> {
    let number = |digits: &str, limit: u8| digits.parse::<u8>().ok().filter(|&n| n <= limit);
    let one = |register| Some(RegisterName::One(register));
    match name {
        "RZ" => one(Register::General(255)),
        "URZ" => one(Register::Uniform(63)),
        "PT" => one(Register::Predicate(7)),
        "UPT" => one(Register::UniformPredicate(7)),
        "PR" => Some(RegisterName::AllPredicates),
        "UPR" => Some(RegisterName::AllUniformPredicates),
        _ => {
            if let Some(digits) = name.strip_prefix("UR") {
                number(digits, 63).and_then(|n| one(Register::Uniform(n)))
            } else if let Some(digits) = name.strip_prefix("UP") {
                number(digits, 7).and_then(|n| one(Register::UniformPredicate(n)))
            } else if let Some(digits) = name.strip_prefix('R') {
                number(digits, 255).and_then(|n| one(Register::General(n)))
            } else if let Some(digits) = name.strip_prefix('P') {
                number(digits, 7).and_then(|n| one(Register::Predicate(n)))
            } else {
                None
            }
        }
    }
}

/// The registers an operand names, in order.
pub fn mentions(operand: &str) -> Vec<RegisterMention> {
    let bytes = operand.as_bytes();
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut index = 0;
    while index < bytes.len() {
        let c = bytes[index];
        match c {
            b'[' => {
                depth += 1;
                index += 1;
            }
            b']' => {
                depth = depth.saturating_sub(1);
                index += 1;
            }
            b'0'..=b'9' => {
                // A number (hex, decimal or floating point): skip it whole.
                while index < bytes.len() && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'.') {
                    index += 1;
                }
            }
            b'.' => {
                // A modifier or label after a dot (`.reuse`, `.64`, `.L_x_0`): skip it.
                index += 1;
                while index < bytes.len() && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_') {
                    index += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = index;
                while index < bytes.len() && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_') {
                    index += 1;
                }
                let word = &operand[start..index];
                let descriptor = bytes.get(index) == Some(&b'[') && word.ends_with("desc");
                if let Some(register) = register_name(word) {
                    let suffixes = suffixes(&operand[index..]);
                    found.push(RegisterMention {
                        register,
                        in_brackets: depth > 0,
                        pair: suffixes.contains(&"64"),
                        descriptor_width: 0,
                        partial: suffixes.iter().any(|s| *s != "64" && *s != "reuse"),
                    });
                } else if descriptor {
                    // `desc[URn]`: the next mention is the descriptor register.
                    let close = operand[index..].find(']').map_or(operand.len(), |end| index + end);
                    let width = if word == "desc" { 2 } else { 4 };
                    for mut mention in mentions(&operand[index + 1..close]) {
                        mention.descriptor_width = width;
                        mention.in_brackets = true;
                        found.push(mention);
                    }
                    index = (close + 1).min(bytes.len());
                }
            }
            _ => index += 1,
        }
    }
    found
}

/// The `.suffix` parts that directly follow a register name.
fn suffixes(tail: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = tail;
    while let Some(after) = rest.strip_prefix('.') {
        let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        found.push(&after[..end]);
        rest = &after[end..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general(n: u8) -> RegisterName {
        RegisterName::One(Register::General(n))
    }

    #[test]
    fn splits_guard_opcode_modifiers_and_operands() {
        let syntax = Syntax::parse("@!P0 LDG.E.128 R4, desc[UR4][R6.64+0x200]").expect("valid test input");
        assert_eq!(syntax.guard, Some(Guard { predicate: Some(Register::Predicate(0)), negated: true }));
        assert_eq!(syntax.opcode, "LDG");
        assert_eq!(syntax.modifiers, ["E", "128"]);
        assert_eq!(syntax.operands, ["R4", "desc[UR4][R6.64+0x200]"]);
    }

    #[test]
    fn an_instruction_without_operands_has_none() {
        let syntax = Syntax::parse("EXIT").expect("valid test input");
        assert_eq!(syntax.opcode, "EXIT");
        assert!(syntax.operands.is_empty());
        assert!(Syntax::parse("NOP;").expect("valid test input").operands.is_empty());
    }

    #[test]
    fn a_never_true_guard_is_recognised() {
        let syntax = Syntax::parse("@!PT LDS RZ, [RZ]").expect("valid test input");
        assert!(syntax.guard.expect("valid test input").never_executes());
        assert!(!Syntax::parse("@PT LDS RZ, [RZ]")
            .expect("valid test input")
            .guard
            .expect("valid test input")
            .never_executes());
    }

    #[test]
    fn finds_address_pairs_and_descriptors() {
        let found = mentions("desc[UR4][R6.64+0x200]");
        assert_eq!(found.len(), 2);
        assert!(found[0].descriptor_width == 2 && found[0].register == RegisterName::One(Register::Uniform(4)));
        assert!(found[1].pair && found[1].in_brackets && found[1].register == general(6));
    }

    #[test]
    fn ignores_numbers_modifiers_and_special_registers() {
        assert!(mentions("0x7f").is_empty());
        assert!(mentions("5.9604644775390625e-07").is_empty());
        assert!(mentions("SR_CTAID.X").is_empty());
        assert!(mentions("c[0x0][0x28]").is_empty());
        assert!(mentions("`(.L_x_0)").is_empty());
        assert_eq!(mentions("c[0x0][R4+0x10]")[0].register, general(4));
        let reused = mentions("R11.reuse");
        assert_eq!(reused[0].register, general(11));
        assert!(!reused[0].partial);
        assert!(mentions("-R3.H1_H1")[0].partial);
        assert_eq!(mentions("!PT")[0].register, RegisterName::One(Register::Predicate(7)));
        assert_eq!(mentions("PR")[0].register, RegisterName::AllPredicates);
    }

    #[test]
    fn keeps_shared_memory_address_terms() {
        let found = mentions("[R4+UR12+0x400]");
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|m| m.in_brackets && !m.pair));
    }
}
