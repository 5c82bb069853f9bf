//! Random inputs drawn on the GPU, where they are used. A benchmark worker's setup at
//! N = 8192 draws 2 x 64M normal numbers per input set; on the host that took 0.33 s of a
//! 1.38 s setup on one GPU and 0.59 s on the slower of two (their workers draw at once,
//! beside the compile workers), then the data crossed PCIe. Drawn here, each element is a pure
//! function of its index and the buffer's seed (a counter-based generator: no state, any
//! number of threads), so every worker of a run draws the same data, and a buffer is
//! drawn again, not kept on the host, to restore it.
//!
//! [`Drawer`] draws normal and uniform floating-point data ([`Drawer::draws`] says which),
//! for setups and for the schedule stage's random input sets;
//! everything else (integers, ranges, files) stays with [`crate::fill`] on the host. The
//! numbers differ from the host's for the same seed: nothing stored depends on them.

use std::sync::OnceLock;

use crate::data::{DType, Init};
use crate::driver::{param, Context, CudaError, DeviceBuffer, Module};
use crate::verify::dtype_code;

const SOURCE: &str = r#"
typedef unsigned long long u64;

__device__ u64 mix(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A number in (0, 1) with 53 random bits, the k-th of element i.
__device__ double unit(u64 seed, u64 i, u64 k) {
    return ((double)(mix(seed ^ mix(2 * i + k)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Round to nearest even; beyond the largest half, infinity; below the smallest normal, a
// subnormal or zero.
__device__ unsigned short to_half(float f) {
    unsigned int x = __float_as_uint(f);
    unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x47800000u) return (unsigned short)(sign | 0x7c00u);
    if (ax < 0x38800000u) return (unsigned short)(sign | __float2uint_rn(__uint_as_float(ax) * 16777216.0f));
    unsigned int h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13), rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1;
    return (unsigned short)(sign | h);
}

// dtype: 0 f16, 1 bf16, 2 f32, 3 f64. normal: a + b * N(0, 1); else uniform in [a, b).
extern "C" __global__ void kerntune_draw(unsigned char *data, u64 n, int dtype, int normal, double a, double b,
                                        u64 seed) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        double v = normal ? a + b * sqrt(-2.0 * log(unit(seed, i, 0))) * cospi(2.0 * unit(seed, i, 1))
                          : a + (b - a) * unit(seed, i, 0);
        float f = (float)v;
        unsigned int bits = __float_as_uint(f);
        switch (dtype) {
            case 0: ((unsigned short *)data)[i] = to_half(f); break;
            case 1: ((unsigned short *)data)[i] = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16); break;
            case 2: ((float *)data)[i] = f; break;
            default: ((double *)data)[i] = v; break;
        }
    }
}
"#;

/// The drawing kernel, compiled once per process (a worker's GPU never changes).
static CUBIN: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();

/// Draws buffers' data on one GPU.
#[derive(Debug)]
pub struct Drawer {
    module: Module,
}

impl Drawer {
    /// Compiles (once per process, with NVRTC) and loads the drawing kernel; an error says
    /// why it cannot, and the caller draws on the host instead.
    pub fn new(context: &Context) -> Result<Drawer, String> {
        let cubin = CUBIN.get_or_init(|| {
            crate::nvrtc::compile(SOURCE, "kerntune_draw", &[], &context.info.arch())
                .map(|compiled| compiled.cubin)
                .map_err(|e| format!("compiling the drawing kernel: {e}"))
        });
        let module = context.load_module(cubin.as_ref().map_err(Clone::clone)?).map_err(|e| e.to_string())?;
        Ok(Drawer { module })
    }

    /// Whether the GPU draws this data: normal or uniform numbers of a floating-point type.
    pub fn draws(dtype: DType, init: &Init) -> bool {
        dtype.is_float() && matches!(init, Init::Normal { .. } | Init::Uniform { .. })
    }

    /// Fills `buffer` with `len` elements of `dtype` drawn from `init` with `seed`; does
    /// nothing where [`Drawer::draws`] says no. Asynchronous, on the context's stream.
    pub fn draw(
        &self,
        context: &Context,
        buffer: &DeviceBuffer,
        dtype: DType,
        len: usize,
        init: &Init,
        seed: u64,
    ) -> Result<(), CudaError> {
        let (mut normal, mut a, mut b) = match init {
            Init::Normal { mean, std } => (1i32, *mean, *std),
            Init::Uniform { low, high } => (0i32, *low, *high),
            _ => return Ok(()),
        };
        if !dtype.is_float() {
            return Ok(());
        }
        let function = self.module.function("kerntune_draw")?;
        let (mut pointer, mut count, mut code, mut seed) = (buffer.pointer(), len as u64, dtype_code(dtype), seed);
        let mut args = [
            param(&mut pointer),
            param(&mut count),
            param(&mut code),
            param(&mut normal),
            param(&mut a),
            param(&mut b),
            param(&mut seed),
        ];
        let blocks = len.div_ceil(256).clamp(1, 8192) as u32;
        context.launch(&function, [blocks, 1, 1], [256, 1, 1], 0, &mut args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_gpu_draws_normal_and_uniform_floats_and_the_host_everything_else() {
        let normal = Init::Normal { mean: 0.0, std: 1.0 };
        let uniform = Init::Uniform { low: -1.0, high: 1.0 };
        for dtype in [DType::F16, DType::Bf16, DType::F32, DType::F64] {
            assert!(Drawer::draws(dtype, &normal) && Drawer::draws(dtype, &uniform), "{dtype:?}");
            for init in [Init::Zeros, Init::Ones, Init::Arange, Init::Raw(PathBuf::from("a.bin"))] {
                assert!(!Drawer::draws(dtype, &init), "{dtype:?} {init:?}");
            }
        }
        for dtype in [DType::I32, DType::I64, DType::U8] {
            assert!(
                !Drawer::draws(dtype, &uniform) && !Drawer::draws(dtype, &normal),
                "{dtype:?}: integers on the host"
            );
        }
    }

    #[test]
    fn the_drawing_kernel_compiles_where_nvrtc_is() {
        // CI installs NVRTC and sets KERNTUNE_REQUIRE_NVRTC (tests/nvrtc.rs).
        if !crate::nvrtc_available() {
            assert!(std::env::var_os("KERNTUNE_REQUIRE_NVRTC").is_none(), "NVRTC is required here but was not found");
            eprintln!("skipped: NVRTC is not installed (pip install nvidia-cuda-nvrtc)");
            return;
        }
        for arch in ["sm_80", "sm_90"] {
            let compiled = crate::nvrtc::compile(SOURCE, "kerntune_draw", &[], arch);
            assert!(compiled.is_ok(), "{arch}: {:?}", compiled.err().map(|e| e.to_string()));
        }
    }
}
