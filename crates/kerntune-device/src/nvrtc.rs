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
    let program =
        result::create_program(&source, Some(&file)).map_err(|e| fail(format!("nvrtcCreateProgram: {e:?}")))?;
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
        Err(_) => {
            Err(if log.trim().is_empty() { "NVRTC failed without a log".to_string() } else { log.trim().to_string() })
        }
    };
    // SAFETY: destroyed exactly once.
    let _ = unsafe { result::destroy_program(program) };
    let seconds = start.elapsed().as_secs_f64();
    match compiled {
        Ok((cubin, symbol)) => Ok(Compiled { cubin, symbol, log, seconds }),
        Err(message) => Err(CompileError { message, seconds }),
    }
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
