//! The `.nv.info.<kernel>` attributes, and which of them record instruction offsets.
//!
//! Each entry is a 4-byte header (format, attribute, 16-bit value) followed,
//! for the `EIFMT_SVAL` format, by as many payload bytes as the value says.
//! Some attributes list byte offsets of instructions in the kernel's text
//! (the exits, the `S2R SR_CTAID` reads the driver may patch, ...); when an
//! instruction moves, its offset in those lists must move with it. An
//! attribute this crate does not know might hold offsets too, so a kernel
//! that has one is refused rather than rewritten with a stale table.

use crate::elf::{read_u16, read_u32, Cubin, KernelSections};
use crate::error::SassError;

const FORMAT_SIZED: u8 = 4;

/// What an attribute holds, as far as rescheduling is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttributeKind {
    /// No instruction offsets: left as it is.
    Plain,
    /// A list of 32-bit instruction offsets: remapped.
    OffsetList,
    /// Targets of indirect branches: the kernel is refused.
    IndirectBranchTargets,
}

/// The attributes this crate knows, with the names nvdisasm prints for them.
const ATTRIBUTES: &[(u8, &str, AttributeKind)] = &[
    (0x04, "EIATTR_CTAIDZ_USED", AttributeKind::Plain),
    (0x05, "EIATTR_MAX_THREADS", AttributeKind::Plain),
    (0x0a, "EIATTR_PARAM_CBANK", AttributeKind::Plain),
    (0x0f, "EIATTR_EXTERNS", AttributeKind::Plain),
    (0x10, "EIATTR_REQNTID", AttributeKind::Plain),
    (0x11, "EIATTR_FRAME_SIZE", AttributeKind::Plain),
    (0x12, "EIATTR_MIN_STACK_SIZE", AttributeKind::Plain),
    (0x17, "EIATTR_KPARAM_INFO", AttributeKind::Plain),
    (0x19, "EIATTR_CBANK_PARAM_SIZE", AttributeKind::Plain),
    (0x1b, "EIATTR_MAXREG_COUNT", AttributeKind::Plain),
    (0x1c, "EIATTR_EXIT_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x1d, "EIATTR_S2RCTAID_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x1e, "EIATTR_CRS_STACK_SIZE", AttributeKind::Plain),
    (0x21, "EIATTR_EXPLICIT_CACHING", AttributeKind::Plain),
    (0x23, "EIATTR_MAX_STACK_SIZE", AttributeKind::Plain),
    (0x25, "EIATTR_LD_CACHEMOD_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x28, "EIATTR_COOP_GROUP_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x29, "EIATTR_COOP_GROUP_MASK_REGIDS", AttributeKind::Plain),
    (0x2a, "EIATTR_SW1850030_WAR", AttributeKind::Plain),
    (0x2b, "EIATTR_WMMA_USED", AttributeKind::Plain),
    (0x2f, "EIATTR_REGCOUNT", AttributeKind::Plain),
    (0x30, "EIATTR_SW2393858_WAR", AttributeKind::Plain),
    (0x31, "EIATTR_INT_WARP_WIDE_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x34, "EIATTR_INDIRECT_BRANCH_TARGETS", AttributeKind::IndirectBranchTargets),
    (0x36, "EIATTR_SW_WAR", AttributeKind::Plain),
    (0x37, "EIATTR_CUDA_API_VERSION", AttributeKind::Plain),
    (0x39, "EIATTR_MBARRIER_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x47, "EIATTR_SW_WAR_MEMBAR_SYS_INSTR_OFFSETS", AttributeKind::OffsetList),
    (0x50, "EIATTR_SPARSE_MMA_MASK", AttributeKind::Plain),
];

/// The name and kind of a known attribute.
pub(crate) fn attribute(id: u8) -> Option<(&'static str, AttributeKind)> {
    ATTRIBUTES.iter().find(|(known, _, _)| *known == id).map(|&(_, name, kind)| (name, kind))
}

/// One 32-bit instruction offset stored in `.nv.info.<kernel>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OffsetField {
    /// The attribute's name, e.g. `EIATTR_EXIT_INSTR_OFFSETS`.
    pub attribute: &'static str,
    /// File offset of the 32-bit value.
    pub file_offset: usize,
    /// The instruction offset inside the kernel's text.
    pub value: u32,
}

fn unsupported(kernel: &KernelSections, reason: String) -> SassError {
    SassError::Unsupported { kernel: kernel.name.clone(), reason }
}

/// One attribute entry: its id and the file range of its payload.
struct Entry {
    id: u8,
    sized: bool,
    payload: std::ops::Range<usize>,
}

/// The entries of an `.nv.info` section.
fn entries(cubin: &Cubin, section: usize, kernel: &str) -> Result<Vec<Entry>, SassError> {
    let Some(section) = cubin.section(section) else {
        return Ok(Vec::new());
    };
    let bytes = cubin.as_bytes();
    let end = section.offset + section.size;
    let mut at = section.offset;
    let mut found = Vec::new();
    while at < end {
        let header = read_u32(bytes, at)?.to_le_bytes();
        let (format, id) = (header[0], header[1]);
        let value = usize::from(read_u16(bytes, at + 2)?);
        let sized = format == FORMAT_SIZED;
        let payload = at + 4..at + 4 + if sized { value } else { 0 };
        if !(1..=FORMAT_SIZED).contains(&format) || payload.end > end {
            return Err(SassError::MalformedCubin {
                reason: format!("bad .nv.info entry at {at:#x} (kernel `{kernel}`)"),
            });
        }
        at = payload.end;
        found.push(Entry { id, sized, payload });
    }
    Ok(found)
}

/// Every instruction offset recorded in the kernel's `.nv.info.<kernel>`,
/// or an error if it, or the cubin-wide `.nv.info`, holds an attribute that
/// forbids rescheduling: an unknown one with a payload, indirect branch targets, or (in the
/// cubin-wide section, which does not say whose instructions they are) any
/// offset list.
pub(crate) fn offset_fields(cubin: &Cubin, kernel: &KernelSections) -> Result<Vec<OffsetField>, SassError> {
    if let Some(global) = cubin.section_index(".nv.info") {
        for entry in entries(cubin, global, &kernel.name)? {
            match attribute(entry.id) {
                Some((_, AttributeKind::Plain)) => {}
                None if !entry.sized => {}
                Some((name, _)) => {
                    return Err(unsupported(kernel, format!("{name} in the cubin-wide .nv.info")));
                }
                None => {
                    return Err(unsupported(
                        kernel,
                        format!("unknown attribute {:#04x} in the cubin-wide .nv.info", entry.id),
                    ));
                }
            }
        }
    }
    let Some(info) = kernel.info else {
        return Ok(Vec::new());
    };
    let bytes = cubin.as_bytes();
    let mut fields = Vec::new();
    for entry in entries(cubin, info, &kernel.name)? {
        match attribute(entry.id) {
            // An attribute whose value sits in its 16-bit header field holds no offset
            // list (those are all sized): newer ptxas versions add such flags.
            None if !entry.sized => {}
            None => {
                return Err(unsupported(
                    kernel,
                    format!("unknown .nv.info attribute {:#04x}, which may hold offsets", entry.id),
                ));
            }
            Some((_, AttributeKind::IndirectBranchTargets)) => {
                return Err(unsupported(
                    kernel,
                    "it has indirect branch targets (EIATTR_INDIRECT_BRANCH_TARGETS)".into(),
                ));
            }
            Some((name, AttributeKind::OffsetList)) => {
                if !entry.sized || entry.payload.len() % 4 != 0 {
                    return Err(unsupported(kernel, format!("{name} is not a list of 32-bit offsets")));
                }
                for item in entry.payload.step_by(4) {
                    fields.push(OffsetField { attribute: name, file_offset: item, value: read_u32(bytes, item)? });
                }
            }
            Some((_, AttributeKind::Plain)) => {}
        }
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lists_and_plain_attributes_do_not_overlap() {
        for (index, (id, name, _)) in ATTRIBUTES.iter().enumerate() {
            assert!(name.starts_with("EIATTR_"));
            assert!(ATTRIBUTES[index + 1..].iter().all(|(other, _, _)| other != id), "{id:#x} twice");
        }
    }

    #[test]
    fn every_attribute_named_as_offsets_is_remapped() {
        for (id, name, kind) in ATTRIBUTES {
            if name.ends_with("_OFFSETS") {
                assert_eq!(*kind, AttributeKind::OffsetList, "{name} ({id:#x})");
            }
        }
    }
}
