//! A kernel of a cubin whose schedule is being changed, and writing the
//! changed schedule back into a cubin.
//!
//! Rewriting is a permutation of whole 128-bit words inside `.text.<kernel>`.
//! Everything that names an instruction by its byte offset is patched to
//! follow the instruction: the `EIATTR_*_INSTR_OFFSETS` lists of
//! `.nv.info.<kernel>` and the `r_offset` of relocations that apply to the
//! text. Labels and symbols name block starts, which are positions rather
//! than instructions, and need no change. Line tables (`.debug_line`,
//! `.nv_debug_line_sass`) are left as they are: they only map addresses to
//! source lines for tools.

use crate::disasm::{Disassembly, Nvdisasm};
use crate::elf::{Cubin, KernelSections, Patch};
use crate::error::SassError;
use crate::listing::{KernelListing, INSTRUCTION_BYTES};
use crate::moves::{Move, Refusal};
use crate::nvinfo::{offset_fields, OffsetField};
use crate::opcodes::LatencyTable;

/// One kernel of a cubin, with its current schedule.
#[derive(Clone, Debug)]
pub struct Schedule {
    cubin: Cubin,
    kernel: KernelSections,
    listing: KernelListing,
    offset_fields: Vec<OffsetField>,
    /// Indexes into `cubin.relocations()` of the relocations applying to the text.
    text_relocations: Vec<usize>,
    applied: Vec<Move>,
}

fn unsupported(kernel: &str, reason: String) -> SassError {
    SassError::Unsupported { kernel: kernel.to_string(), reason }
}

impl Schedule {
    /// Reads a kernel of a cubin, disassembling it with `nvdisasm`.
    pub fn from_cubin(bytes: &[u8], kernel: &str, nvdisasm: &Nvdisasm) -> Result<Schedule, SassError> {
        let cubin = Cubin::parse(bytes)?;
        cubin.kernel(kernel)?;
        let disassembly = nvdisasm.disassemble(bytes)?;
        Schedule::from_disassembly(cubin, kernel, &disassembly)
    }

    /// Reads a kernel of a parsed cubin from an existing disassembly of it.
    pub fn from_disassembly(cubin: Cubin, kernel: &str, disassembly: &Disassembly) -> Result<Schedule, SassError> {
        let sections = cubin.kernel(kernel)?;
        let latency = LatencyTable::for_sm(cubin.sm())
            .ok_or_else(|| unsupported(kernel, format!("no latency table for sm_{}", cubin.sm())))?;
        let function = disassembly.function(kernel).ok_or_else(|| SassError::ListingMismatch {
            kernel: kernel.to_string(),
            reason: "nvdisasm printed no code for it".to_string(),
        })?;
        let text = cubin.section_bytes(sections.text);
        let text_size = text.len() as u64;
        let symbol_starts = Self::symbol_block_starts(&cubin, &sections, text_size)?;
        let listing = KernelListing::from_function(function, latency, &symbol_starts)?;
        Self::check_words(kernel, text, &listing)?;
        let offset_fields = offset_fields(&cubin, &sections)?;
        for field in &offset_fields {
            let offset = u64::from(field.value);
            if offset % INSTRUCTION_BYTES != 0 || offset >= text_size {
                return Err(unsupported(kernel, format!("{} lists {offset:#x}, not an instruction", field.attribute)));
            }
        }
        let text_relocations = Self::text_relocations(&cubin, &sections, text_size)?;
        Ok(Schedule { cubin, kernel: sections, listing, offset_fields, text_relocations, applied: Vec::new() })
    }

    /// Symbols defined inside the text at a non-zero offset (sub-function entry
    /// points) start a basic block.
    fn symbol_block_starts(cubin: &Cubin, sections: &KernelSections, text_size: u64) -> Result<Vec<u64>, SassError> {
        let mut starts = Vec::new();
        for symbol in cubin.symbols().iter().filter(|s| s.section == sections.text && s.value != 0) {
            if symbol.value % INSTRUCTION_BYTES != 0 || symbol.value >= text_size {
                return Err(unsupported(
                    &sections.name,
                    format!("symbol `{}` points inside an instruction", symbol.name),
                ));
            }
            starts.push(symbol.value);
        }
        Ok(starts)
    }

    /// The nvdisasm words must be the ELF words, and cover the whole section.
    fn check_words(kernel: &str, text: &[u8], listing: &KernelListing) -> Result<(), SassError> {
        let mismatch = |reason: String| SassError::ListingMismatch { kernel: kernel.to_string(), reason };
        let expected = text.len() / INSTRUCTION_BYTES as usize;
        if text.len() % INSTRUCTION_BYTES as usize != 0 || listing.instructions().len() != expected {
            return Err(mismatch(format!(
                "{} instructions listed for a {}-byte section",
                listing.instructions().len(),
                text.len()
            )));
        }
        for (index, (instruction, bytes)) in listing.instructions().iter().zip(text.chunks_exact(16)).enumerate() {
            let low = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
            let high = u64::from_le_bytes(bytes[8..].try_into().unwrap_or_default());
            if instruction.words != [low, high] {
                return Err(mismatch(format!("words differ at {:#06x}", index * 16)));
            }
        }
        Ok(())
    }

    /// The relocations that apply to the kernel's text. A relocation elsewhere
    /// that points into the middle of the text (a jump table, a code address)
    /// would have to follow instructions it does not name, so it is refused.
    fn text_relocations(cubin: &Cubin, sections: &KernelSections, text_size: u64) -> Result<Vec<usize>, SassError> {
        let mut indexes = Vec::new();
        let symbol_starts = Self::symbol_block_starts(cubin, sections, text_size)?;
        for (index, relocation) in cubin.relocations().iter().enumerate() {
            if relocation.target_section == sections.text {
                if relocation.offset >= text_size {
                    return Err(unsupported(
                        &sections.name,
                        format!("relocation at {:#x} is past the text", relocation.offset),
                    ));
                }
                indexes.push(index);
                continue;
            }
            let Some(symbol) = cubin.symbols().get(relocation.symbol) else {
                continue;
            };
            if symbol.section != sections.text {
                continue;
            }
            let target = symbol.value.wrapping_add_signed(relocation.addend);
            if target != 0 && target != text_size && !symbol_starts.contains(&target) {
                return Err(unsupported(
                    &sections.name,
                    format!("a relocation refers to offset {target:#x} inside the kernel's code"),
                ));
            }
        }
        Ok(indexes)
    }

    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.kernel.name
    }

    /// The instructions and their analysis.
    pub fn listing(&self) -> &KernelListing {
        &self.listing
    }

    /// The moves applied so far, in order.
    pub fn applied(&self) -> &[Move] {
        &self.applied
    }

    /// Every legal move from the current schedule.
    pub fn legal_moves(&self) -> Vec<Move> {
        self.listing.legal_moves()
    }

    /// Checks a move without applying it.
    pub fn check(&self, requested: &Move) -> Result<(), Refusal> {
        self.listing.check(requested)
    }

    /// Applies a legal move; an illegal one is refused with the reason.
    pub fn apply(&mut self, requested: &Move) -> Result<(), SassError> {
        self.listing.apply(requested).map_err(|refusal| SassError::IllegalMove { requested: *requested, refusal })?;
        self.applied.push(*requested);
        Ok(())
    }

    /// `permutation()[k]` is the original position of the instruction now at `k`.
    pub fn permutation(&self) -> Vec<usize> {
        self.listing.permutation()
    }

    /// The cubin with the current schedule.
    pub fn to_cubin(&self) -> Result<Vec<u8>, SassError> {
        let positions = self.listing.positions();
        let new_offset = |old: u64| -> u64 {
            let index = usize::try_from(old / INSTRUCTION_BYTES).unwrap_or(usize::MAX);
            positions.get(index).map_or(old, |&p| p as u64 * INSTRUCTION_BYTES + old % INSTRUCTION_BYTES)
        };
        let text = self.cubin.section(self.kernel.text).ok_or_else(|| SassError::MalformedCubin {
            reason: format!("text section of `{}` disappeared", self.kernel.name),
        })?;
        let mut code = Vec::with_capacity(text.size);
        for instruction in self.listing.instructions() {
            code.extend_from_slice(&instruction.words[0].to_le_bytes());
            code.extend_from_slice(&instruction.words[1].to_le_bytes());
        }
        let mut patches = vec![Patch { offset: text.offset, bytes: code }];
        for field in &self.offset_fields {
            let moved = u32::try_from(new_offset(u64::from(field.value))).unwrap_or(field.value);
            patches.push(Patch { offset: field.file_offset, bytes: moved.to_le_bytes().to_vec() });
        }
        for &index in &self.text_relocations {
            let relocation = &self.cubin.relocations()[index];
            patches.push(Patch {
                offset: relocation.field_offset,
                bytes: new_offset(relocation.offset).to_le_bytes().to_vec(),
            });
        }
        Ok(self.cubin.patched(&patches)?.to_bytes())
    }
}
