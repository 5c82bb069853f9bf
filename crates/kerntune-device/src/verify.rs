//! Output verification on the GPU: a comparison kernel (compiled once per worker with
//! NVRTC) counts the elements outside `atol + rtol·|ref|`, the NaNs (an unwritten,
//! poisoned element reads as NaN), the first bad index and the largest error, so that
//! checking a 64 MB output costs microseconds instead of a copy to the host.

use crate::data::DType;

use crate::driver::{param, Context, CudaError, DeviceBuffer, Module};

const SOURCE: &str = r#"
typedef unsigned long long u64;

__device__ double half_to_double(unsigned short h) {
    unsigned int sign = (h & 0x8000u) << 16;
    unsigned int exponent = (h >> 10) & 0x1fu;
    unsigned int mantissa = h & 0x3ffu;
    if (exponent == 0) {
        double v = (double)mantissa * 5.9604644775390625e-8;
        return sign ? -v : v;
    }
    if (exponent == 31) return mantissa ? __longlong_as_double(0x7ff8000000000000ll) : (sign ? -__longlong_as_double(0x7ff0000000000000ll) : __longlong_as_double(0x7ff0000000000000ll));
    return (double)__int_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

__device__ double element(const unsigned char *data, u64 i, int dtype) {
    switch (dtype) {
        case 0: return half_to_double(((const unsigned short *)data)[i]);
        case 1: return (double)__int_as_float(((unsigned int)((const unsigned short *)data)[i]) << 16);
        case 2: return (double)((const float *)data)[i];
        case 3: return ((const double *)data)[i];
        case 4: return (double)((const int *)data)[i];
        case 5: return (double)((const long long *)data)[i];
        default: return (double)data[i];
    }
}

__device__ bool same_bits(const unsigned char *a, const unsigned char *b, u64 i, int size) {
    for (int k = 0; k < size; k++)
        if (a[i * size + k] != b[i * size + k]) return false;
    return true;
}

// result: [bad, nan, first bad index, bits of the largest finite error]. With `bitwise`,
// an element is bad unless its bytes equal the reference's (size: bytes per element).
extern "C" __global__ void kerntune_compare(const unsigned char *out, const unsigned char *ref, u64 n, int dtype,
                                           double atol, double rtol, u64 *result, int bitwise, int size) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        double o = element(out, i, dtype), r = element(ref, i, dtype);
        bool nan = o != o;
        double error = fabs(o - r);
        bool bad = bitwise ? !same_bits(out, ref, i, size) : (nan || !(error <= atol + rtol * fabs(r)));
        if (bad) {
            atomicAdd(&result[0], 1ull);
            if (nan) atomicAdd(&result[1], 1ull);
            atomicMin(&result[2], i);
        }
        if (!nan && error > 0.0) atomicMax(&result[3], (u64)__double_as_longlong(error));
    }
}
"#;

/// What a comparison found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub bad: u64,
    pub nan: u64,
    pub first_bad: u64,
    pub max_error: f64,
}

/// The element type's code in the kernels of this module and of [`crate::draw`].
pub(crate) fn dtype_code(dtype: DType) -> i32 {
    match dtype {
        DType::F16 => 0,
        DType::Bf16 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
        DType::I32 => 4,
        DType::I64 => 5,
        DType::U8 => 6,
    }
}

/// The comparison kernel, loaded in a worker's context.
#[derive(Debug)]
pub struct Comparer {
    module: Module,
    result: DeviceBuffer,
}

impl Comparer {
    pub fn new(context: &Context) -> Result<Comparer, String> {
        let compiled = crate::nvrtc::compile(SOURCE, "kerntune_compare", &[], &context.info.arch())
            .map_err(|e| format!("compiling the comparison kernel: {e}"))?;
        let module = context.load_module(&compiled.cubin).map_err(|e| e.to_string())?;
        let result = context.alloc(32).map_err(|e| e.to_string())?;
        Ok(Comparer { module, result })
    }

    /// Compares `len` elements of `out` with `reference`: within `atol + rtol·|ref|`, or
    /// bit for bit when `bitwise`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare(
        &self,
        context: &Context,
        out: &DeviceBuffer,
        reference: &DeviceBuffer,
        dtype: DType,
        len: usize,
        atol: f64,
        rtol: f64,
        bitwise: bool,
    ) -> Result<Comparison, CudaError> {
        let initial: Vec<u8> = [0u64, 0, u64::MAX, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        context.upload(&self.result, &initial)?;
        let function = self.module.function("kerntune_compare")?;
        let (mut out_ptr, mut ref_ptr, mut n, mut code) =
            (out.pointer(), reference.pointer(), len as u64, dtype_code(dtype));
        let (mut atol, mut rtol, mut result_ptr) = (atol, rtol, self.result.pointer());
        let (mut bitwise, mut size) = (i32::from(bitwise), dtype.size() as i32);
        let mut args = [
            param(&mut out_ptr),
            param(&mut ref_ptr),
            param(&mut n),
            param(&mut code),
            param(&mut atol),
            param(&mut rtol),
            param(&mut result_ptr),
            param(&mut bitwise),
            param(&mut size),
        ];
        let blocks = (len.div_ceil(256)).clamp(1, context.info.multiprocessors.max(1) as usize * 8) as u32;
        context.launch(&function, [blocks, 1, 1], [256, 1, 1], 0, &mut args)?;
        let mut bytes = [0u8; 32];
        context.download(&self.result, &mut bytes)?;
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Ok(Comparison { bad: word(0), nan: word(1), first_bad: word(2), max_error: f64::from_bits(word(3)) })
    }
}
