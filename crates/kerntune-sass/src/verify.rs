//! Checking, with nvdisasm and without a GPU, that a rewritten cubin is the
//! original kernel with its instructions permuted exactly as intended.

use crate::control::clear_reuse;
use crate::disasm::{FunctionListing, Nvdisasm, OffsetAttribute};
use crate::elf::Cubin;
use crate::error::SassError;
use crate::listing::{strip_reuse, INSTRUCTION_BYTES};
use crate::nvinfo::offset_fields;

/// The original side of a verification, disassembled once and reused for
/// every candidate.
#[derive(Clone, Debug)]
pub struct Verifier {
    nvdisasm: Nvdisasm,
    kernel: String,
    original: Vec<u8>,
    functions: Vec<FunctionListing>,
    attributes: Vec<OffsetAttribute>,
    /// Byte ranges of the original file a rewrite may change.
    writable: Vec<std::ops::Range<usize>>,
}

impl Verifier {
    /// Disassembles the original cubin.
    pub fn new(nvdisasm: &Nvdisasm, original: &[u8], kernel: &str) -> Result<Verifier, SassError> {
        let cubin = Cubin::parse(original)?;
        let sections = cubin.kernel(kernel)?;
        let mut writable = Vec::new();
        if let Some(text) = cubin.section(sections.text) {
            writable.push(text.offset..text.offset + text.size);
        }
        for field in offset_fields(&cubin, &sections)? {
            writable.push(field.file_offset..field.file_offset + 4);
        }
        for relocation in cubin.relocations().iter().filter(|r| r.target_section == sections.text) {
            writable.push(relocation.field_offset..relocation.field_offset + 8);
        }
        let disassembly = nvdisasm.disassemble(original)?;
        if disassembly.function(kernel).is_none() {
            return Err(SassError::ListingMismatch {
                kernel: kernel.to_string(),
                reason: "nvdisasm printed no code for it".into(),
            });
        }
        Ok(Verifier {
            nvdisasm: nvdisasm.clone(),
            kernel: kernel.to_string(),
            original: original.to_vec(),
            functions: disassembly.functions,
            attributes: disassembly.offset_attributes,
            writable,
        })
    }

    fn fail(&self, reason: String) -> SassError {
        SassError::VerificationFailed { kernel: self.kernel.clone(), reason }
    }

    /// Checks that `rewritten` is the original with the kernel's instructions
    /// permuted by `permutation` (`permutation[k]` = original position of the
    /// instruction now at `k`):
    /// - every instruction disassembles to the same text (ignoring `.reuse`)
    ///   and the same words (ignoring reuse bits, which may only be cleared);
    /// - labels, other functions and the bytes outside the text, the offset
    ///   lists and the text relocations are unchanged;
    /// - every `EIATTR_*_INSTR_OFFSETS` entry follows its instruction.
    pub fn check(&self, rewritten: &[u8], permutation: &[usize]) -> Result<(), SassError> {
        self.check_untouched_bytes(rewritten)?;
        let disassembly = self.nvdisasm.disassemble(rewritten)?;
        let mut seen = vec![false; permutation.len()];
        for &index in permutation {
            match seen.get_mut(index) {
                Some(slot) if !*slot => *slot = true,
                _ => return Err(self.fail(format!("{permutation:?} is not a permutation"))),
            }
        }
        for original in &self.functions {
            let rewritten = disassembly
                .function(&original.name)
                .ok_or_else(|| self.fail(format!("function `{}` disappeared", original.name)))?;
            if original.name == self.kernel {
                self.check_kernel(original, rewritten, permutation)?;
            } else if original.instructions != rewritten.instructions {
                return Err(self.fail(format!("function `{}` changed", original.name)));
            }
        }
        self.check_offsets(&disassembly.offset_attributes, permutation)
    }

    fn check_untouched_bytes(&self, rewritten: &[u8]) -> Result<(), SassError> {
        if rewritten.len() != self.original.len() {
            return Err(self.fail(format!("size changed from {} to {} bytes", self.original.len(), rewritten.len())));
        }
        let changed = self.original.iter().zip(rewritten).position(|(a, b)| a != b);
        let mut at = changed.unwrap_or(self.original.len());
        while at < self.original.len() {
            if self.original[at] != rewritten[at] && !self.writable.iter().any(|range| range.contains(&at)) {
                return Err(self.fail(format!("byte {at:#x} changed outside the text, offset lists and relocations")));
            }
            at += 1;
        }
        Ok(())
    }

    fn check_kernel(
        &self,
        original: &FunctionListing,
        rewritten: &FunctionListing,
        permutation: &[usize],
    ) -> Result<(), SassError> {
        if rewritten.instructions.len() != original.instructions.len()
            || permutation.len() != original.instructions.len()
        {
            return Err(self.fail(format!(
                "{} instructions, expected {} (permutation of {})",
                rewritten.instructions.len(),
                original.instructions.len(),
                permutation.len()
            )));
        }
        if rewritten.labels != original.labels {
            return Err(self.fail("labels moved".to_string()));
        }
        for (position, (now, &from)) in rewritten.instructions.iter().zip(permutation).enumerate() {
            let was = &original.instructions[from];
            if strip_reuse(&now.text) != strip_reuse(&was.text) {
                return Err(self.fail(format!(
                    "at {:#06x}: `{}`, expected `{}` from {:#06x}",
                    position as u64 * INSTRUCTION_BYTES,
                    now.text,
                    was.text,
                    was.offset
                )));
            }
            let reuse_only_cleared =
                clear_reuse(now.words[1]) == clear_reuse(was.words[1]) && now.words[1] & !was.words[1] == 0;
            if now.words[0] != was.words[0] || !reuse_only_cleared {
                return Err(self.fail(format!(
                    "at {:#06x}: the encoding of `{}` changed",
                    position as u64 * INSTRUCTION_BYTES,
                    now.text
                )));
            }
        }
        Ok(())
    }

    fn check_offsets(&self, rewritten: &[OffsetAttribute], permutation: &[usize]) -> Result<(), SassError> {
        let mut positions = vec![0usize; permutation.len()];
        for (position, &from) in permutation.iter().enumerate() {
            positions[from] = position;
        }
        let ours = |list: &[OffsetAttribute]| -> Vec<OffsetAttribute> {
            list.iter().filter(|a| a.kernel == self.kernel).cloned().collect()
        };
        let (before, after) = (ours(&self.attributes), ours(rewritten));
        if before.len() != after.len() {
            return Err(self.fail("the offset attributes changed".to_string()));
        }
        for (was, now) in before.iter().zip(&after) {
            let expected: Vec<u32> = was
                .offsets
                .iter()
                .map(|&offset| {
                    let index = (u64::from(offset) / INSTRUCTION_BYTES) as usize;
                    positions.get(index).map_or(offset, |&p| (p as u64 * INSTRUCTION_BYTES) as u32)
                })
                .collect();
            if was.name != now.name || now.offsets != expected {
                return Err(self.fail(format!("{} is {:x?}, expected {:x?}", now.name, now.offsets, expected)));
            }
        }
        Ok(())
    }
}

/// Checks that `rewritten` is `original` with `kernel` permuted by
/// `permutation`; see [`Verifier::check`]. Disassembles both cubins.
pub fn verify_permutation(
    nvdisasm: &Nvdisasm,
    original: &[u8],
    rewritten: &[u8],
    kernel: &str,
    permutation: &[usize],
) -> Result<(), SassError> {
    Verifier::new(nvdisasm, original, kernel)?.check(rewritten, permutation)
}
