//! Run-time compilation of CUDA C with NVRTC, to a cubin for a named architecture. No GPU
//! is needed: compile workers run on any machine where libnvrtc can be loaded.

use std::ffi::{c_char, CString};
use std::time::Instant;

use cudarc::nvrtc::{result, sys};

/// A compiled kernel image and what compiling it took.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// The kernel's symbol in the cubin: `name` itself for an `extern "C"` kernel, the
    /// mangled name of a C++ or templated one.
    pub symbol: String,
    pub log: String,
    pub seconds: f64,
}

/// Why a compile produced nothing: the compiler's own log where there is one.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
    pub seconds: f64,
}

/// Whether libnvrtc can be loaded on this machine. Besides the loader's search path, it
/// looks in `$KERNTUNE_NVRTC` (the library file), the toolkit (`$CUDA_HOME`,
/// `/usr/local/cuda`) and the `nvidia-cuda-nvrtc` wheel of the Python environment kerntune
/// is installed in ([`crate::wheels`]), and preloads the first it finds, so that the later
/// load by name finds it already there.
pub fn nvrtc_available() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: only tries to dlopen the library.
        if unsafe { sys::is_culib_present() } {
            return true;
        }
        candidates().iter().any(|path| preload(path))
            // SAFETY: as above, now that a copy may be loaded.
            && unsafe { sys::is_culib_present() }
    })
}

fn candidates() -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    let mut files: Vec<std::path::PathBuf> = std::env::var_os("KERNTUNE_NVRTC").map(Into::into).into_iter().collect();
    for root in ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .chain(["/usr/local/cuda".into()])
    {
        dirs.push(root.join("lib64"));
        dirs.push(root.join("lib"));
    }
    dirs.extend(crate::wheels::wheel_paths("nvidia/cu13/lib"));
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut found: Vec<_> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc.so")))
                .collect();
            found.sort();
            files.extend(found);
        }
    }
    files
}

/// Loads the library at `path`, after the builtins library beside it, which NVRTC itself
/// opens by name during every compile.
fn preload(path: &std::path::Path) -> bool {
    if let Some(entries) = path.parent().and_then(|dir| std::fs::read_dir(dir).ok()) {
        for builtins in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if builtins.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so")) {
                open_library(&builtins);
            }
        }
    }
    open_library(path)
}

fn open_library(path: &std::path::Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: dlopen of a shared library by full path; the handle is kept open for the life
    // of the process on purpose (later loads by name reuse it).
    !unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
}

/// Where NVRTC reports errors in the name expressions it was given.
const NAME_MAP: &str = "__nv_name_map";

/// Compiles `source` for `arch` (`sm_90`) with extra `options`, returning the cubin and the
/// symbol of the kernel `name`. `name` is a C++ name expression (`matmul`, `ns::kernel`,
/// `kernel<float, 4>`): NVRTC instantiates it and reports its mangled name, so kernels
/// need not be declared `extern "C"`.
pub fn compile(source: &str, name: &str, options: &[String], arch: &str) -> Result<Compiled, CompileError> {
    compile_to(source, name, options, arch, Output::Cubin)
}

/// Compiles `source` to PTX for the virtual architecture of `arch` (`sm_90a` ->
/// `compute_90a`), for a ptxas of the user's choice to assemble: [`Compiled::cubin`]
/// holds the PTX text.
pub fn compile_ptx(source: &str, name: &str, options: &[String], arch: &str) -> Result<Compiled, CompileError> {
    let virtual_arch = arch.replacen("sm_", "compute_", 1);
    compile_to(source, name, options, &virtual_arch, Output::Ptx)
}

#[derive(Clone, Copy)]
enum Output {
    Cubin,
    Ptx,
}

fn compile_to(
    source: &str,
    name: &str,
    options: &[String],
    arch: &str,
    output: Output,
) -> Result<Compiled, CompileError> {
    let start = Instant::now();
    let fail = |message: String| CompileError { message, seconds: start.elapsed().as_secs_f64() };
    if !nvrtc_available() {
        return Err(fail("NVRTC (libnvrtc) is not installed on this machine".into()));
    }
    let source = CString::new(source).map_err(|_| fail("the source contains a NUL byte".into()))?;
    let expression = CString::new(name).map_err(|_| fail("the kernel name contains a NUL byte".into()))?;
    let file = CString::new(format!("{}.cu", file_stem(name)))
        .map_err(|_| fail("the kernel name contains a NUL byte".into()))?;
    let cccl = if includes_cccl(source.to_bytes()) { cccl_include_dir() } else { None };
    let umbrella = cccl.as_deref().filter(|_| includes_cub_umbrella(source.to_bytes())).map(device_cub_umbrella);
    let program =
        create_program(&source, &file, umbrella.as_ref()).map_err(|e| fail(format!("nvrtcCreateProgram: {e:?}")))?;
    // SAFETY: `program` is live (destroyed below on every path); the expression is
    // NUL-terminated and outlives the call.
    let added = unsafe { sys::nvrtcAddNameExpression(program, expression.as_ptr()) };
    if added != sys::nvrtcResult::NVRTC_SUCCESS {
        // SAFETY: destroyed exactly once, on this early path.
        let _ = unsafe { result::destroy_program(program) };
        return Err(fail(format!("the kernel name '{name}' is not a C++ name expression ({added:?})")));
    }
    let mut all_options = vec![format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    if let Some(include) = cuda_include_dir() {
        all_options.push(format!("--include-path={include}"));
    }
    if let Some(include) = &cccl {
        all_options.push(format!("--include-path={}", include.display()));
    }
    all_options.extend(options.iter().cloned());
    // SAFETY: `program` is live until destroy_program below, on every path.
    let outcome = unsafe { result::compile_program(program, &all_options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(program) }.map(|chars| text(&chars)).unwrap_or_default();
    let compiled = match outcome {
        // SAFETY: as above; the size query precedes the copy into a buffer of that size,
        // and the lowered name is asked for after a successful compile.
        Ok(()) => match output {
            Output::Cubin => unsafe { cubin_of(program) }.map_err(|e| format!("nvrtcGetCUBIN: {e:?}")),
            Output::Ptx => unsafe { result::get_ptx(program) }
                .map(|chars| text(&chars).into_bytes())
                .map_err(|e| format!("nvrtcGetPTX: {e:?}")),
        }
        .and_then(|cubin| unsafe { lowered_name(program, &expression) }.map(|symbol| (cubin, symbol))),
        Err(_) if log.contains(NAME_MAP) => Err(format!(
            "the kernel name '{name}' names no __global__ function of the source (NVRTC: {})",
            log.lines().find(|l| l.contains(NAME_MAP)).unwrap_or_default().trim()
        )),
        Err(_) => Err(failure(&log, cccl.is_some())),
    };
    // SAFETY: destroyed exactly once.
    let _ = unsafe { result::destroy_program(program) };
    let seconds = start.elapsed().as_secs_f64();
    match compiled {
        Ok((cubin, symbol)) => Ok(Compiled { cubin, symbol, log, seconds }),
        Err(message) => Err(CompileError { message, seconds }),
    }
}

/// A program of `source`, with `header` (its include name, its text) in place of the file
/// of that name where one is given.
fn create_program(
    source: &CString,
    file: &CString,
    header: Option<&(CString, CString)>,
) -> Result<sys::nvrtcProgram, sys::nvrtcResult> {
    let Some((name, text)) = header else {
        return result::create_program(source, Some(file)).map_err(|e| e.0);
    };
    let mut program = std::mem::MaybeUninit::uninit();
    let (texts, names) = ([text.as_ptr()], [name.as_ptr()]);
    // SAFETY: every pointer is NUL-terminated and outlives the call, which copies them;
    // the arrays hold the one header announced.
    let status = unsafe {
        sys::nvrtcCreateProgram(program.as_mut_ptr(), source.as_ptr(), file.as_ptr(), 1, texts.as_ptr(), names.as_ptr())
    };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(status);
    }
    // SAFETY: initialised by the successful call above.
    Ok(unsafe { program.assume_init() })
}

/// # Safety
/// `program` must be a live, successfully compiled NVRTC program.
unsafe fn cubin_of(program: sys::nvrtcProgram) -> Result<Vec<u8>, sys::nvrtcResult> {
    let mut size = 0usize;
    // SAFETY: per the caller's contract.
    let status = unsafe { sys::nvrtcGetCUBINSize(program, &mut size) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(status);
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the size NVRTC reported.
    let status = unsafe { sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast::<c_char>()) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(status);
    }
    Ok(cubin)
}

/// # Safety
/// `program` must be a live NVRTC program, compiled successfully after `expression` was
/// added to it.
unsafe fn lowered_name(program: sys::nvrtcProgram, expression: &CString) -> Result<String, String> {
    let mut lowered: *const c_char = std::ptr::null();
    // SAFETY: per the caller's contract; NVRTC owns the returned string, which lives as
    // long as the program and is copied out before it is destroyed.
    let status = unsafe { sys::nvrtcGetLoweredName(program, expression.as_ptr(), &mut lowered) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS || lowered.is_null() {
        return Err(format!(
            "the kernel '{}' is not a __global__ function of the source (nvrtcGetLoweredName: {status:?})",
            expression.to_string_lossy()
        ));
    }
    // SAFETY: a NUL-terminated string owned by the live program.
    Ok(unsafe { std::ffi::CStr::from_ptr(lowered) }.to_string_lossy().into_owned())
}

/// A file name for NVRTC's messages, from a name expression (`kernel<float, 4>` -> `kernel`).
fn file_stem(name: &str) -> String {
    let stem: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    let stem = stem.rsplit("::").next().unwrap_or_default().to_string();
    if stem.is_empty() {
        "kernel".to_string()
    } else {
        stem
    }
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The toolkit's headers (for `cuda_fp16.h` and friends), when a toolkit is installed.
fn cuda_include_dir() -> Option<String> {
    let candidates =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| std::env::var(v).ok()).chain(["/usr/local/cuda".to_string()]);
    candidates.map(|root| format!("{root}/include")).find(|dir| std::path::Path::new(dir).join("cuda_fp16.h").exists())
}

/// The first line of a compile error that needs NVIDIA's CCCL headers where none are found.
pub const CCCL_HINT: &str = "no CUB/Thrust/libcu++ headers found (NVIDIA's CCCL, which NVRTC does not ship): pip install nvidia-cuda-cccl, or set CUDA_HOME to a CUDA toolkit";

/// The header families of NVIDIA's CCCL, as a source includes them.
const CCCL_FAMILIES: [&str; 4] = ["cub/", "thrust/", "cuda/", "nv/"];

/// Whether `source` includes a CCCL header (`#include <cub/cub.cuh>`, `"thrust/..."`).
fn includes_cccl(source: &[u8]) -> bool {
    String::from_utf8_lossy(source).lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix('#').is_some_and(|rest| rest.trim_start().starts_with("include"))
            && CCCL_FAMILIES
                .iter()
                .any(|family| line.contains(&format!("<{family}")) || line.contains(&format!("\"{family}")))
    })
}

/// Why a compile failed, from NVRTC's `log`: the log, after a hint where it misses a CCCL
/// header and none was found.
fn failure(log: &str, cccl_found: bool) -> String {
    match log.trim() {
        "" => "NVRTC failed without a log".to_string(),
        log if !cccl_found && misses_cccl(log) => format!("{CCCL_HINT}\n{log}"),
        log => log.to_string(),
    }
}

/// Whether `source` includes CUB's umbrella header, `cub/cub.cuh`.
fn includes_cub_umbrella(source: &[u8]) -> bool {
    String::from_utf8_lossy(source).lines().any(|line| {
        line.trim_start().starts_with('#') && (line.contains("<cub/cub.cuh>") || line.contains("\"cub/cub.cuh\""))
    })
}

/// The CUB headers NVRTC can compile, as one header named `cub/cub.cuh`. CUB's own
/// umbrella also brings its device-wide algorithms, whose host functions NVRTC rejects
/// (newer CCCL refuses it under NVRTC outright), so kernels written for nvcc, such as
/// Kernel Tuner's expdist example, would not compile. The block-, warp- and thread-level
/// headers are what a kernel can use; they are listed from the installed CCCL.
fn device_cub_umbrella(cccl: &std::path::Path) -> (CString, CString) {
    let mut includes = Vec::new();
    for level in ["block", "warp", "thread"] {
        let Ok(entries) = std::fs::read_dir(cccl.join("cub").join(level)) else { continue };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".cuh"))
            .collect();
        names.sort();
        includes.extend(names.into_iter().map(|name| format!("#include <cub/{level}/{name}>")));
    }
    let text = CString::new(includes.join("\n")).unwrap_or_default();
    (c"cub/cub.cuh".to_owned(), text)
}

/// Whether NVRTC's `log` says that a CCCL header could not be opened.
fn misses_cccl(log: &str) -> bool {
    log.lines().any(|line| {
        line.contains("open source file") && CCCL_FAMILIES.iter().any(|family| line.contains(&format!("\"{family}")))
    })
}

/// The folder that holds `cub/cub.cuh` (and Thrust, libcu++) for NVRTC: a CUDA toolkit's
/// (`include/cccl` from CUDA 13 on, `include` before), else the `nvidia-cuda-cccl`
/// wheel's of the Python on the PATH (`nvidia/cu13/include/cccl`, or
/// `nvidia/cuda_cccl/include` for CUDA 12's `nvidia-cuda-cccl-cu12`). Looked up once.
pub fn cccl_include_dir() -> Option<std::path::PathBuf> {
    static FOUND: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let toolkits = ["CUDA_HOME", "CUDA_PATH"]
                .iter()
                .filter_map(std::env::var_os)
                .map(std::path::PathBuf::from)
                .chain(["/usr/local/cuda".into()])
                .flat_map(|root| [root.join("include").join("cccl"), root.join("include")]);
            let wheels = ["nvidia/cu13/include/cccl", "nvidia/cuda_cccl/include"]
                .into_iter()
                .flat_map(crate::wheels::wheel_paths);
            toolkits.chain(wheels).find(|dir| dir.join("cub").join("cub.cuh").is_file())
        })
        .clone()
}

/// The version of the NVRTC library (and of the ptxas inside it).
pub fn version() -> Option<(i32, i32)> {
    if !nvrtc_available() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters for a query with no other effect.
    let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    (status == sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// Why ptxas flags cannot be used with the NVRTC on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlagsError {
    #[error("NVRTC is not installed")]
    NotInstalled,
    #[error(
        "ACF files (--apply-controls) need ptxas 13.3 or newer; this NVRTC is {major}.{minor} (install a newer CUDA toolkit or nvidia-cuda-nvrtc)"
    )]
    TooOld { major: i32, minor: i32 },
}

/// ACF files (`--apply-controls`) need ptxas 13.3 or newer: a clear error otherwise, before
/// anything is compiled.
pub fn check_flags(flags: &[String]) -> Result<(), FlagsError> {
    if !flags.iter().any(|f| f.contains("apply-controls")) {
        return Ok(());
    }
    match version() {
        Some(found) if found >= (13, 3) => Ok(()),
        Some((major, minor)) => Err(FlagsError::TooOld { major, minor }),
        None => Err(FlagsError::NotInstalled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // NVRTC 13.0's words.
    const MISSING: &str =
        "expdist.cu(2): catastrophic error: could not open source file \"cub/cub.cuh\" (no directories in search list)\n";

    #[test]
    fn a_missing_cub_header_leads_with_the_package_to_install_when_none_was_found() {
        let message = failure(MISSING, false);
        assert_eq!(message.lines().next(), Some(CCCL_HINT));
        assert!(message.contains("cub/cub.cuh"), "{message}");
    }

    #[test]
    fn no_hint_where_the_headers_were_found_or_another_file_is_missing() {
        assert_eq!(failure(MISSING, true), MISSING.trim());
        let other = "k.cu(1): catastrophic error: could not open source file \"mine.h\"";
        assert_eq!(failure(other, false), other);
        assert_eq!(failure("  ", false), "NVRTC failed without a log");
    }

    #[test]
    fn only_includes_of_cccl_families_ask_for_its_folder() {
        assert!(includes_cccl(b"#include <cub/cub.cuh>\n__global__ void k() {}"));
        assert!(includes_cccl(b"  #  include \"thrust/reduce.h\""));
        assert!(includes_cccl(b"#include <cuda/std/atomic>"));
        assert!(!includes_cccl(b"#include <cuda_fp16.h>\n// see <cub/cub.cuh>"));
    }
}
