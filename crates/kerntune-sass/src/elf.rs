//! Reading a cubin's ELF structure and patching it in place.
//!
//! A schedule change never changes the size of anything: the kernel's
//! `.text.<kernel>` section keeps its length, `.nv.info.<kernel>` keeps its
//! entries, relocation tables keep their entries. So a rewritten cubin is the
//! original bytes with a few ranges overwritten, and this module only needs the
//! file offset of every field it may patch. That is why it reads ELF64 itself
//! instead of going through a general ELF library, which hides those offsets.

use crate::error::SassError;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const CLASS_64: u8 = 2;
const LITTLE_ENDIAN: u8 = 1;
const MACHINE_CUDA: u16 = 190;
const SECTION_HEADER_SIZE: usize = 64;
const SYMBOL_SIZE: usize = 24;
const TYPE_SYMTAB: u32 = 2;
const TYPE_RELA: u32 = 4;
const TYPE_REL: u32 = 9;
const TEXT_PREFIX: &str = ".text.";
const INFO_PREFIX: &str = ".nv.info.";

/// A parsed cubin: the original bytes plus the tables needed to rewrite one
/// kernel's schedule.
#[derive(Clone, Debug)]
pub struct Cubin {
    bytes: Vec<u8>,
    flags: u32,
    abi_version: u8,
    sections: Vec<Section>,
    symbols: Vec<Symbol>,
    relocations: Vec<Relocation>,
}

/// One section header, with the names resolved.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub name: String,
    pub kind: u32,
    pub offset: usize,
    pub size: usize,
}

/// One symbol of `.symtab`.
#[derive(Clone, Debug)]
pub(crate) struct Symbol {
    pub name: String,
    pub value: u64,
    pub section: usize,
}

/// One relocation entry, with the file offset of its `r_offset` field so that
/// it can be patched when the instruction it applies to moves.
#[derive(Clone, Debug)]
pub(crate) struct Relocation {
    /// Index of the section the relocation applies to (`sh_info` of its table).
    pub target_section: usize,
    /// File offset of the entry's `r_offset` field.
    pub field_offset: usize,
    /// Byte offset inside the target section.
    pub offset: u64,
    pub symbol: usize,
    pub addend: i64,
}

/// The sections that describe one kernel.
#[derive(Clone, Debug)]
pub(crate) struct KernelSections {
    pub name: String,
    pub text: usize,
    pub info: Option<usize>,
}

fn malformed(reason: impl Into<String>) -> SassError {
    SassError::MalformedCubin { reason: reason.into() }
}

fn read_bytes<const N: usize>(bytes: &[u8], offset: usize) -> Result<[u8; N], SassError> {
    offset
        .checked_add(N)
        .and_then(|end| bytes.get(offset..end))
        .and_then(|slice| slice.try_into().ok())
        .ok_or_else(|| malformed(format!("read of {N} bytes at {offset:#x} past the end of the file")))
}

pub(crate) fn read_u16(bytes: &[u8], offset: usize) -> Result<u16, SassError> {
    read_bytes(bytes, offset).map(u16::from_le_bytes)
}

pub(crate) fn read_u32(bytes: &[u8], offset: usize) -> Result<u32, SassError> {
    read_bytes(bytes, offset).map(u32::from_le_bytes)
}

pub(crate) fn read_u64(bytes: &[u8], offset: usize) -> Result<u64, SassError> {
    read_bytes(bytes, offset).map(u64::from_le_bytes)
}

fn to_usize(value: u64, what: &str) -> Result<usize, SassError> {
    usize::try_from(value).map_err(|_| malformed(format!("{what} {value:#x} does not fit in memory")))
}

/// `bytes[offset..offset + size]`, or an error if that is outside the file.
fn file_range(bytes: &[u8], offset: usize, size: usize) -> Result<&[u8], SassError> {
    offset
        .checked_add(size)
        .and_then(|end| bytes.get(offset..end))
        .ok_or_else(|| malformed(format!("{size} bytes at {offset:#x} are outside the file")))
}

fn c_string(table: &[u8], offset: usize) -> Result<String, SassError> {
    let tail = table.get(offset..).ok_or_else(|| malformed(format!("string offset {offset:#x} outside its table")))?;
    let end = tail.iter().position(|&b| b == 0).ok_or_else(|| malformed("unterminated string"))?;
    Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
}

impl Cubin {
    /// Parses a cubin (an ELF64 little-endian file for `EM_CUDA`).
    pub fn parse(bytes: &[u8]) -> Result<Cubin, SassError> {
        let not_cubin = |reason: &str| SassError::NotACubin { reason: reason.to_string() };
        if bytes.len() < 64 || &bytes[..4] != ELF_MAGIC {
            return Err(not_cubin("missing ELF magic"));
        }
        if bytes[4] != CLASS_64 || bytes[5] != LITTLE_ENDIAN {
            return Err(not_cubin("not a 64-bit little-endian ELF file"));
        }
        if read_u16(bytes, 18)? != MACHINE_CUDA {
            return Err(not_cubin("ELF machine is not EM_CUDA (190)"));
        }
        let abi_version = bytes[8];
        let flags = read_u32(bytes, 48)?;
        let sections = Self::parse_sections(bytes)?;
        let symbols = Self::parse_symbols(bytes, &sections)?;
        let relocations = Self::parse_relocations(bytes, &sections)?;
        Ok(Cubin { bytes: bytes.to_vec(), flags, abi_version, sections, symbols, relocations })
    }

    fn parse_sections(bytes: &[u8]) -> Result<Vec<Section>, SassError> {
        let table = to_usize(read_u64(bytes, 40)?, "section table offset")?;
        let entry_size = usize::from(read_u16(bytes, 58)?);
        let count = usize::from(read_u16(bytes, 60)?);
        let names_index = usize::from(read_u16(bytes, 62)?);
        if entry_size != SECTION_HEADER_SIZE {
            return Err(malformed(format!("section header size {entry_size}, expected 64")));
        }
        let mut raw = Vec::with_capacity(count);
        for index in 0..count {
            let at = table + index * SECTION_HEADER_SIZE;
            let name = read_u32(bytes, at)?;
            let kind = read_u32(bytes, at + 4)?;
            let offset = to_usize(read_u64(bytes, at + 24)?, "section offset")?;
            let size = to_usize(read_u64(bytes, at + 32)?, "section size")?;
            // NOBITS sections (type 8) occupy no file bytes.
            if kind != 8 && offset.checked_add(size).map_or(true, |end| end > bytes.len()) {
                return Err(malformed(format!("section {index} extends past the end of the file")));
            }
            raw.push((name, kind, offset, size));
        }
        let &(_, _, names_offset, names_size) =
            raw.get(names_index).ok_or_else(|| malformed("section name table index out of range"))?;
        let names = file_range(bytes, names_offset, names_size)?;
        raw.into_iter()
            .map(|(name, kind, offset, size)| {
                Ok(Section { name: c_string(names, to_usize(u64::from(name), "name offset")?)?, kind, offset, size })
            })
            .collect()
    }

    fn parse_symbols(bytes: &[u8], sections: &[Section]) -> Result<Vec<Symbol>, SassError> {
        let Some(symtab_index) = sections.iter().position(|s| s.kind == TYPE_SYMTAB) else {
            return Ok(Vec::new());
        };
        let symtab = &sections[symtab_index];
        let link = read_u32(bytes, Self::header_offset(bytes, symtab_index)? + 40)?;
        let strings = sections
            .get(to_usize(u64::from(link), "symbol string table index")?)
            .ok_or_else(|| malformed("symbol string table index out of range"))?;
        let strings = file_range(bytes, strings.offset, strings.size)?;
        (0..symtab.size / SYMBOL_SIZE)
            .map(|index| {
                let at = symtab.offset + index * SYMBOL_SIZE;
                let name = c_string(strings, to_usize(u64::from(read_u32(bytes, at)?), "symbol name")?)?;
                let section = usize::from(read_u16(bytes, at + 6)?);
                let value = read_u64(bytes, at + 8)?;
                Ok(Symbol { name, value, section })
            })
            .collect()
    }

    fn header_offset(bytes: &[u8], index: usize) -> Result<usize, SassError> {
        Ok(to_usize(read_u64(bytes, 40)?, "section table offset")? + index * SECTION_HEADER_SIZE)
    }

    fn parse_relocations(bytes: &[u8], sections: &[Section]) -> Result<Vec<Relocation>, SassError> {
        let mut relocations = Vec::new();
        for (index, section) in sections.iter().enumerate() {
            let entry_size = match section.kind {
                TYPE_REL => 16,
                TYPE_RELA => 24,
                _ => continue,
            };
            let target = read_u32(bytes, Self::header_offset(bytes, index)? + 44)?;
            let target_section = to_usize(u64::from(target), "relocation target")?;
            for entry in 0..section.size / entry_size {
                let at = section.offset + entry * entry_size;
                let info = read_u64(bytes, at + 8)?;
                let addend =
                    if section.kind == TYPE_RELA { i64::from_le_bytes(read_bytes(bytes, at + 16)?) } else { 0 };
                relocations.push(Relocation {
                    target_section,
                    field_offset: at,
                    offset: read_u64(bytes, at)?,
                    symbol: to_usize(info >> 32, "relocation symbol")?,
                    addend,
                });
            }
        }
        Ok(relocations)
    }

    /// The bytes of the cubin.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes of the cubin, owned.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    /// The SM version the cubin was built for, e.g. 90 for sm_90 and sm_90a.
    pub fn sm(&self) -> u32 {
        // ELF ABI version 7 keeps the SM in the low byte of e_flags; later ones
        // moved it to the second byte.
        if self.abi_version < 8 {
            self.flags & 0xff
        } else {
            (self.flags >> 8) & 0xff
        }
    }

    /// The names of the kernels (functions with a `.text.<name>` section).
    pub fn kernels(&self) -> Vec<String> {
        self.sections.iter().filter_map(|s| s.name.strip_prefix(TEXT_PREFIX)).map(str::to_string).collect()
    }

    /// The bytes of a kernel's `.text.<kernel>` section: its instructions,
    /// 16 bytes each.
    pub fn kernel_text(&self, name: &str) -> Result<&[u8], SassError> {
        Ok(self.section_bytes(self.kernel(name)?.text))
    }

    pub(crate) fn kernel(&self, name: &str) -> Result<KernelSections, SassError> {
        let text_name = format!("{TEXT_PREFIX}{name}");
        let info_name = format!("{INFO_PREFIX}{name}");
        let text = self.sections.iter().position(|s| s.name == text_name).ok_or_else(|| SassError::KernelNotFound {
            kernel: name.to_string(),
            available: self.kernels().join(", "),
        })?;
        let info = self.sections.iter().position(|s| s.name == info_name);
        Ok(KernelSections { name: name.to_string(), text, info })
    }

    pub(crate) fn section_index(&self, name: &str) -> Option<usize> {
        self.sections.iter().position(|s| s.name == name)
    }

    pub(crate) fn section(&self, index: usize) -> Option<&Section> {
        self.sections.get(index)
    }

    pub(crate) fn section_bytes(&self, index: usize) -> &[u8] {
        self.sections.get(index).and_then(|s| file_range(&self.bytes, s.offset, s.size).ok()).unwrap_or(&[])
    }

    pub(crate) fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    pub(crate) fn relocations(&self) -> &[Relocation] {
        &self.relocations
    }

    /// A copy of the cubin with `patches` written over it. Every patch stays
    /// inside the file: they come from offsets this module computed.
    pub(crate) fn patched(&self, patches: &[Patch]) -> Result<Cubin, SassError> {
        let mut bytes = self.bytes.clone();
        for patch in patches {
            let end = patch.offset + patch.bytes.len();
            let target = bytes
                .get_mut(patch.offset..end)
                .ok_or_else(|| malformed(format!("patch at {:#x} past the end of the file", patch.offset)))?;
            target.copy_from_slice(&patch.bytes);
        }
        Cubin::parse(&bytes)
    }
}

/// Bytes to write at a file offset.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    pub offset: usize,
    pub bytes: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_files_that_are_not_elf() {
        let err = Cubin::parse(b"definitely not an ELF file, but long enough to have a header at all......")
            .expect_err("must fail");
        assert!(matches!(err, SassError::NotACubin { .. }), "{err}");
    }

    #[test]
    fn rejects_elf_files_for_other_machines() {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(ELF_MAGIC);
        header[4] = CLASS_64;
        header[5] = LITTLE_ENDIAN;
        header[18] = 62; // x86-64
        let err = Cubin::parse(&header).expect_err("must fail");
        assert!(err.to_string().contains("EM_CUDA"), "{err}");
    }

    #[test]
    fn rejects_a_section_table_past_the_end() {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(ELF_MAGIC);
        header[4] = CLASS_64;
        header[5] = LITTLE_ENDIAN;
        header[18..20].copy_from_slice(&MACHINE_CUDA.to_le_bytes());
        header[40..48].copy_from_slice(&4096u64.to_le_bytes());
        header[58..60].copy_from_slice(&64u16.to_le_bytes());
        header[60..62].copy_from_slice(&3u16.to_le_bytes());
        let err = Cubin::parse(&header).expect_err("must fail");
        assert!(matches!(err, SassError::MalformedCubin { .. }), "{err}");
    }
}
