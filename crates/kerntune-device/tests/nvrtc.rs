//! NVRTC name expressions: the compile reports the kernel's symbol in the cubin, so C++
//! kernels (no `extern "C"`) and templated kernels can be found and launched.

use kerntune_device::nvrtc::compile;

/// NVRTC is needed to compile; CI installs it (`nvidia-cuda-nvrtc`) and sets
/// `KERNTUNE_REQUIRE_NVRTC`, elsewhere its absence skips the test with a note.
fn nvrtc() -> bool {
    if kerntune_device::nvrtc_available() {
        return true;
    }
    assert!(std::env::var_os("KERNTUNE_REQUIRE_NVRTC").is_none(), "NVRTC is required here but was not found");
    eprintln!("skipped: NVRTC is not installed (pip install nvidia-cuda-nvrtc)");
    false
}

fn holds(cubin: &[u8], symbol: &str) -> bool {
    cubin.windows(symbol.len()).any(|w| w == symbol.as_bytes())
}

#[test]
fn an_extern_c_kernel_keeps_its_own_name() {
    if !nvrtc() {
        return;
    }
    let source = r#"extern "C" __global__ void add(float *c, const float *a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] += a[i];
    }"#;
    let compiled = compile(source, "add", &[], "sm_90").expect("compiles");
    assert_eq!(compiled.symbol, "add");
}

#[test]
fn a_cpp_kernel_without_extern_c_is_found_by_its_mangled_name() {
    if !nvrtc() {
        return;
    }
    let source = r#"__global__ void add(float *c, const float *a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] += a[i];
    }"#;
    let compiled = compile(source, "add", &[], "sm_90").expect("compiles");
    assert!(compiled.symbol.starts_with("_Z") && compiled.symbol.contains("add"), "{}", compiled.symbol);
    assert!(holds(&compiled.cubin, &compiled.symbol), "the cubin has no symbol {}", compiled.symbol);
}

#[test]
fn a_templated_kernel_is_instantiated_from_its_name_expression() {
    if !nvrtc() {
        return;
    }
    let source = r#"template <typename T, int N>
    __global__ void scale(T *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= T(N);
    }"#;
    let four = compile(source, "scale<float, 4>", &[], "sm_90").expect("compiles");
    let eight = compile(source, "scale<float, 8>", &[], "sm_90").expect("compiles");
    assert!(four.symbol.starts_with("_Z5scale"), "{}", four.symbol);
    assert_ne!(four.symbol, eight.symbol, "each instantiation has its own symbol");
    assert!(holds(&four.cubin, &four.symbol));
}

#[test]
fn a_name_missing_from_the_source_fails_the_compile_and_says_which() {
    if !nvrtc() {
        return;
    }
    let source = r#"__global__ void add(float *c) { c[0] = 1.0f; }"#;
    let error = compile(source, "vector_add", &[], "sm_90").expect_err("no such kernel");
    assert!(error.message.contains("'vector_add' names no __global__ function"), "{}", error.message);
}

#[test]
fn ptxas_flags_without_an_acf_file_need_no_particular_nvrtc_and_an_old_one_is_named() {
    use kerntune_device::nvrtc::{check_flags, FlagsError};
    assert_eq!(check_flags(&["--maxrregcount=64".to_string()]), Ok(()));
    let old = FlagsError::TooOld { major: 12, minor: 8 }.to_string();
    assert!(old.starts_with("ACF files (--apply-controls) need ptxas 13.3 or newer; this NVRTC is 12.8"), "{old}");
}

#[test]
fn a_kernel_that_includes_cub_compiles_with_cccl_headers_found_on_the_machine() {
    if !nvrtc() {
        return;
    }
    // CI installs nvidia-cuda-cccl beside nvidia-cuda-nvrtc: there the headers must be found.
    if kerntune_device::nvrtc::cccl_include_dir().is_none() {
        assert!(std::env::var_os("KERNTUNE_REQUIRE_NVRTC").is_none(), "no CCCL headers (pip install nvidia-cuda-cccl)");
        eprintln!("skipped: no CCCL headers (pip install nvidia-cuda-cccl)");
        return;
    }
    let source = r#"#include <cub/cub.cuh>
    __global__ void block_sum(const float *x, float *out) {
        typedef cub::BlockReduce<float, 128> Reduce;
        __shared__ typename Reduce::TempStorage storage;
        float total = Reduce(storage).Sum(x[blockIdx.x * 128 + threadIdx.x]);
        if (threadIdx.x == 0) out[blockIdx.x] = total;
    }"#;
    let compiled = compile(source, "block_sum", &[], "sm_90").unwrap_or_else(|e| panic!("{}", e.message));
    assert!(holds(&compiled.cubin, &compiled.symbol));
}
