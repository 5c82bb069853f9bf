//! Finding nvdisasm, running it, and reading its listing.
//!
//! nvdisasm is the reference for what a cubin's words mean: this crate decodes
//! the control bits itself, but takes opcodes, operands and labels from
//! nvdisasm's text, and checks that the words nvdisasm printed (`-hex`) are the
//! words in the ELF section, so the two views cannot drift apart.

use std::env;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::SassError;

/// The environment variable that names an nvdisasm binary explicitly.
pub const NVDISASM_ENV: &str = "KERNTUNE_NVDISASM";
/// The environment variable that names the Python used to find Triton's copy.
pub const PYTHON_ENV: &str = "KERNTUNE_PYTHON";

/// A located nvdisasm binary.
#[derive(Clone, Debug)]
pub struct Nvdisasm {
    path: PathBuf,
}

/// One instruction as nvdisasm printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedInstruction {
    /// Byte offset inside the function's text section.
    pub offset: u64,
    /// The instruction text without the trailing `;`, e.g. `@!P0 LDG.E R0, desc[UR4][R6.64]`.
    pub text: String,
    /// The low and high 64-bit words nvdisasm printed with `-hex`.
    pub words: [u64; 2],
}

/// The code of one function.
#[derive(Clone, Debug, Default)]
pub struct FunctionListing {
    /// The function's name (the `<name>` of `.text.<name>`).
    pub name: String,
    /// Its instructions, in address order.
    pub instructions: Vec<ListedInstruction>,
    /// The labels (branch targets and symbols), in address order.
    pub labels: Vec<Label>,
}

/// A label nvdisasm printed before an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// The label's name, e.g. `.L_x_3`.
    pub name: String,
    /// The offset of the instruction it precedes.
    pub offset: u64,
}

/// An `EIATTR_*_INSTR_OFFSETS` list as nvdisasm printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAttribute {
    /// The kernel of the `.nv.info.<kernel>` section.
    pub kernel: String,
    /// The attribute's name, e.g. `EIATTR_EXIT_INSTR_OFFSETS`.
    pub name: String,
    /// The offsets it lists.
    pub offsets: Vec<u32>,
}

/// Everything this crate reads from one nvdisasm run.
#[derive(Clone, Debug, Default)]
pub struct Disassembly {
    /// Every function's code.
    pub functions: Vec<FunctionListing>,
    /// Every instruction-offset attribute of every kernel.
    pub offset_attributes: Vec<OffsetAttribute>,
}

impl Disassembly {
    /// The listing of one function.
    pub fn function(&self, name: &str) -> Option<&FunctionListing> {
        self.functions.iter().find(|f| f.name == name)
    }
}

fn is_executable(path: &Path) -> bool {
    path.is_file()
}

impl Nvdisasm {
    /// Uses the binary at `path` without searching.
    pub fn at(path: impl Into<PathBuf>) -> Nvdisasm {
        Nvdisasm { path: path.into() }
    }

    /// The binary this handle runs.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Finds nvdisasm: `$KERNTUNE_NVDISASM` (which must then exist), then
    /// `PATH`, then `$CUDA_HOME/bin` (default `/usr/local/cuda/bin`), then the
    /// copy in Triton's wheel (`triton/backends/nvidia/bin`), asking `python3`
    /// (or `$KERNTUNE_PYTHON`) where Triton is installed.
    pub fn locate() -> Result<Nvdisasm, SassError> {
        Self::locate_with(&|name| env::var_os(name))
    }

    /// [`Nvdisasm::locate`] with the environment read through `environment`.
    fn locate_with(environment: &dyn Fn(&str) -> Option<OsString>) -> Result<Nvdisasm, SassError> {
        let mut searched = Vec::new();
        if let Some(explicit) = environment(NVDISASM_ENV) {
            // An explicit choice that does not exist is a mistake to report,
            // not a reason to quietly use some other nvdisasm.
            let path = PathBuf::from(explicit);
            if is_executable(&path) {
                return Ok(Nvdisasm { path });
            }
            return Err(SassError::NvdisasmNotFound {
                searched: format!("${NVDISASM_ENV}={} (no such file)", path.display()),
            });
        }
        if let Some(paths) = environment("PATH") {
            for dir in env::split_paths(&paths) {
                let candidate = dir.join("nvdisasm");
                if is_executable(&candidate) {
                    return Ok(Nvdisasm { path: candidate });
                }
            }
            searched.push("PATH".to_string());
        }
        let cuda_home = environment("CUDA_HOME").unwrap_or_else(|| OsString::from("/usr/local/cuda"));
        let candidate = PathBuf::from(&cuda_home).join("bin").join("nvdisasm");
        if is_executable(&candidate) {
            return Ok(Nvdisasm { path: candidate });
        }
        searched.push(candidate.display().to_string());
        let python = environment(PYTHON_ENV).unwrap_or_else(|| OsString::from("python3"));
        match triton_bin_dir_with(&python) {
            Ok(dir) => {
                let candidate = dir.join("nvdisasm");
                if is_executable(&candidate) {
                    return Ok(Nvdisasm { path: candidate });
                }
                searched.push(candidate.display().to_string());
            }
            Err(reason) => searched.push(format!("Triton's wheel ({reason})")),
        }
        Err(SassError::NvdisasmNotFound { searched: searched.join(", ") })
    }

    /// Disassembles a cubin (written to a temporary file, as nvdisasm reads files).
    pub fn disassemble(&self, cubin: &[u8]) -> Result<Disassembly, SassError> {
        let mut file = tempfile::Builder::new()
            .prefix("kerntune-sass-")
            .suffix(".cubin")
            .tempfile()
            .map_err(SassError::TempFile)?;
        file.write_all(cubin).map_err(SassError::TempFile)?;
        file.flush().map_err(SassError::TempFile)?;
        let failed = |reason: String| SassError::NvdisasmFailed { path: self.path.clone(), reason };
        let output =
            Command::new(&self.path).arg("-hex").arg(file.path()).output().map_err(|e| failed(e.to_string()))?;
        if !output.status.success() {
            return Err(failed(format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim())));
        }
        parse_listing(&String::from_utf8_lossy(&output.stdout))
    }
}

/// The directory of the CUDA tools bundled in Triton's wheel, asking
/// `python3` (or `$KERNTUNE_PYTHON`) where Triton is installed.
pub fn triton_bin_dir() -> Result<PathBuf, String> {
    let python = env::var_os(PYTHON_ENV).unwrap_or_else(|| OsString::from("python3"));
    triton_bin_dir_with(&python)
}

fn triton_bin_dir_with(python: &OsString) -> Result<PathBuf, String> {
    let output = Command::new(python)
        .args(["-c", "import triton, os; print(os.path.dirname(triton.__file__))"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.to_string_lossy()))?;
    if !output.status.success() {
        return Err(format!("{} cannot import triton", python.to_string_lossy()));
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(Path::new(&dir).join("backends").join("nvidia").join("bin"))
}

fn parse_error(kernel: &str, line: usize, reason: impl Into<String>) -> SassError {
    SassError::DisassemblyParse { kernel: kernel.to_string(), line, reason: reason.into() }
}

/// Splits `/*0a30*/ rest` into the hexadecimal number and the rest.
fn leading_comment_number(line: &str) -> Option<(u64, &str)> {
    let rest = line.trim_start().strip_prefix("/*")?;
    let end = rest.find("*/")?;
    let number = rest[..end].trim().trim_start_matches("0x");
    let value = u64::from_str_radix(number, 16).ok()?;
    Some((value, &rest[end + 2..]))
}

/// Splits `text /* 0x0123... */` into the text and the 64-bit word.
fn trailing_word(line: &str) -> Option<(&str, u64)> {
    let line = line.trim_end();
    let body = line.strip_suffix("*/")?;
    let start = body.rfind("/*")?;
    let hex = body[start + 2..].trim().strip_prefix("0x")?;
    let word = u64::from_str_radix(hex, 16).ok()?;
    Some((&line[..start], word))
}

fn section_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix(".section")?;
    if !rest.starts_with(char::is_whitespace) {
        // `.sectionflags`, `.sectioninfo`, ...
        return None;
    }
    let name = rest.trim_start().split(',').next()?;
    Some(name.trim())
}

/// Reads nvdisasm `-hex` output.
pub fn parse_listing(listing: &str) -> Result<Disassembly, SassError> {
    let lines: Vec<&str> = listing.lines().collect();
    let mut disassembly = Disassembly::default();
    let mut function: Option<FunctionListing> = None;
    let mut info_kernel: Option<String> = None;
    let mut attribute: Option<OffsetAttribute> = None;
    let mut pending_labels: Vec<String> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        if let Some(name) = section_name(line) {
            disassembly.functions.extend(function.take());
            disassembly.offset_attributes.extend(attribute.take());
            info_kernel = name.strip_prefix(".nv.info.").map(str::to_string);
            function =
                name.strip_prefix(".text.").map(|n| FunctionListing { name: n.to_string(), ..Default::default() });
            pending_labels.clear();
            continue;
        }
        if let Some(kernel) = &info_kernel {
            if let Some(name) = line.trim().strip_prefix("//----- nvinfo :") {
                disassembly.offset_attributes.extend(attribute.take());
                let name = name.trim();
                attribute = name.ends_with("_OFFSETS").then(|| OffsetAttribute {
                    kernel: kernel.clone(),
                    name: name.to_string(),
                    offsets: Vec::new(),
                });
            } else if let (Some(attribute), Some((_, rest))) = (attribute.as_mut(), leading_comment_number(line)) {
                if let Some(value) = rest.trim().strip_prefix(".word") {
                    let value = value.trim().trim_start_matches("0x");
                    let value = u32::from_str_radix(value, 16)
                        .map_err(|_| parse_error(kernel, index, format!("bad offset in {}", attribute.name)))?;
                    attribute.offsets.push(value);
                }
            }
            continue;
        }
        let Some(current) = function.as_mut() else {
            continue;
        };
        let trimmed = line.trim();
        if let Some(label) = trimmed.strip_suffix(':').filter(|_| !trimmed.starts_with("/*")) {
            pending_labels.push(label.to_string());
            continue;
        }
        let Some((offset, rest)) = leading_comment_number(line) else {
            continue;
        };
        let (text, low) = trailing_word(rest)
            .ok_or_else(|| parse_error(&current.name, index, "instruction without -hex encoding"))?;
        let high_line = lines.get(index).ok_or_else(|| parse_error(&current.name, index, "missing high word"))?;
        let (_, high) =
            trailing_word(high_line).ok_or_else(|| parse_error(&current.name, index + 1, "missing high word"))?;
        index += 1;
        let text = text.trim().trim_end_matches(';').trim_end().to_string();
        for name in pending_labels.drain(..) {
            current.labels.push(Label { name, offset });
        }
        current.instructions.push(ListedInstruction { offset, text, words: [low, high] });
    }
    disassembly.functions.extend(function);
    disassembly.offset_attributes.extend(attribute);
    Ok(disassembly)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
//--------------------- .nv.info.k       --------------------------
	.section	.nv.info.k,"",@"SHT_CUDA_INFO"
	//----- nvinfo : EIATTR_EXIT_INSTR_OFFSETS
	.align		4
        /*0070*/ 	.byte	0x04, 0x1c
        /*0072*/ 	.short	(.L_21 - .L_20)
.L_20:
        /*0074*/ 	.word	0x00000020
	//----- nvinfo : EIATTR_REQNTID
        /*0080*/ 	.word	0x00000080
//--------------------- .text.k          --------------------------
	.section	.text.k,"ax",@progbits
	.sectionflags	@"SHF_BARRIERS=1"
k:
.text.k:
        /*0000*/                   LDC R1, c[0x0][0x28] ;                           /* 0x00000a00ff017b82 */
                                                                                    /* 0x000e220000000800 */
        /*0010*/              @!P0 LDG.E R0, desc[UR4][R6.64] ;                     /* 0x0000000406008981 */
                                                                                    /* 0x0008a2000c1e1900 */
.L_x_0:
        /*0020*/                   EXIT ;                                           /* 0x000000000000794d */
                                                                                    /* 0x000fea0003800000 */
        /*0030*/                   NOP;                                             /* 0x0000000000007918 */
                                                                                    /* 0x000fc00000000000 */
"#;

    #[test]
    fn reads_instructions_words_and_labels() {
        let listing = parse_listing(SAMPLE).expect("valid test input");
        let function = listing.function("k").expect("valid test input");
        let texts: Vec<&str> = function.instructions.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["LDC R1, c[0x0][0x28]", "@!P0 LDG.E R0, desc[UR4][R6.64]", "EXIT", "NOP"]);
        assert_eq!(function.instructions[1].words, [0x0000_0004_0600_8981, 0x0008_a200_0c1e_1900]);
        let labels: Vec<(&str, u64)> = function.labels.iter().map(|l| (l.name.as_str(), l.offset)).collect();
        assert_eq!(labels, [("k", 0x0), (".text.k", 0x0), (".L_x_0", 0x20)]);
    }

    #[test]
    fn reads_only_offset_attributes() {
        let listing = parse_listing(SAMPLE).expect("valid test input");
        assert_eq!(
            listing.offset_attributes,
            [OffsetAttribute { kernel: "k".into(), name: "EIATTR_EXIT_INSTR_OFFSETS".into(), offsets: vec![0x20] }]
        );
    }

    fn environment(pairs: &[(&str, &std::path::Path)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, OsString)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.as_os_str().to_owned())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn an_explicit_nvdisasm_wins_and_a_missing_one_is_an_error() {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let explicit = directory.path().join("my-nvdisasm");
        std::fs::write(&explicit, b"").expect("a file");
        let found = Nvdisasm::locate_with(&environment(&[(NVDISASM_ENV, &explicit), ("PATH", directory.path())]))
            .expect("found");
        assert_eq!(found.path(), explicit);
        let missing = directory.path().join("absent");
        let error = Nvdisasm::locate_with(&environment(&[(NVDISASM_ENV, &missing)])).expect_err("missing");
        assert!(error.to_string().contains(NVDISASM_ENV), "{error}");
    }

    #[test]
    fn path_comes_before_cuda_home() {
        let on_path = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(on_path.path().join("nvdisasm"), b"").expect("a file");
        let cuda_home = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(cuda_home.path().join("bin")).expect("bin");
        std::fs::write(cuda_home.path().join("bin").join("nvdisasm"), b"").expect("a file");
        let both = environment(&[("PATH", on_path.path()), ("CUDA_HOME", cuda_home.path())]);
        assert_eq!(Nvdisasm::locate_with(&both).expect("found").path(), on_path.path().join("nvdisasm"));
        let only_cuda = environment(&[("CUDA_HOME", cuda_home.path())]);
        assert_eq!(
            Nvdisasm::locate_with(&only_cuda).expect("found").path(),
            cuda_home.path().join("bin").join("nvdisasm")
        );
    }

    #[test]
    fn nothing_found_names_every_place_searched() {
        let empty = tempfile::tempdir().expect("a temporary directory");
        let nowhere = environment(&[
            ("PATH", empty.path()),
            ("CUDA_HOME", empty.path()),
            (PYTHON_ENV, &empty.path().join("no-python")),
        ]);
        match Nvdisasm::locate_with(&nowhere) {
            Err(SassError::NvdisasmNotFound { searched }) => {
                assert!(searched.contains("PATH") && searched.contains("Triton"), "{searched}");
            }
            other => panic!("expected NvdisasmNotFound, got {other:?}"),
        }
    }

    #[test]
    fn an_instruction_without_its_encoding_is_an_error() {
        let broken = ".section .text.k,\"ax\"\n        /*0000*/   EXIT ;\n";
        assert!(matches!(parse_listing(broken), Err(SassError::DisassemblyParse { .. })));
    }
}
