//! Host data for kernel arguments: element types and their encodings, how a buffer is
//! initialised, and the deterministic (seeded, thread-count independent) fill.

use std::path::PathBuf;

use kerntune_space::{Rng, Value};
use serde::{Deserialize, Serialize};

use crate::DataError;

/// Element types a buffer or scalar can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F16,
    Bf16,
    F32,
    F64,
    I32,
    I64,
    U8,
}

impl DType {
    pub fn parse(name: &str) -> Option<DType> {
        Some(match name.to_ascii_lowercase().as_str() {
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::Bf16,
            "f32" | "float32" | "float" => DType::F32,
            "f64" | "float64" | "double" => DType::F64,
            "i32" | "int32" | "int" => DType::I32,
            "i64" | "int64" => DType::I64,
            "u8" | "uint8" | "byte" => DType::U8,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::Bf16 | DType::F32 | DType::F64)
    }

    /// The element's little-endian bytes for a number (rounded to nearest for floats,
    /// truncated toward zero and wrapped for integers).
    pub fn encode(self, x: f64, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.size(), 0);
        encode_each(self, &mut out[start..], |_| x);
    }

    /// The number an element's bytes hold.
    pub fn decode(self, bytes: &[u8]) -> f64 {
        let array = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&bytes[..n]);
            a
        };
        match self {
            DType::F16 => f64::from(f16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]]))),
            DType::Bf16 => f64::from(f32::from_bits(u32::from(u16::from_le_bytes([bytes[0], bytes[1]])) << 16)),
            DType::F32 => f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
            DType::F64 => f64::from_le_bytes(array(8)),
            DType::I32 => f64::from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
            DType::I64 => i64::from_le_bytes(array(8)) as f64,
            DType::U8 => f64::from(bytes[0]),
        }
    }
}

/// Round-to-nearest-even conversion to IEEE half precision.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x007f_ffff;
    if exponent == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let unbiased = exponent - 127 + 15;
    if unbiased >= 0x1f {
        return sign | 0x7c00;
    }
    if unbiased <= 0 {
        if unbiased < -10 {
            return sign;
        }
        let full = mantissa | 0x0080_0000;
        let shift = (14 - unbiased) as u32;
        let half = full >> shift;
        let remainder = full & ((1 << shift) - 1);
        let midpoint = 1 << (shift - 1);
        let round_up = remainder > midpoint || (remainder == midpoint && half & 1 == 1);
        return sign | (half + u32::from(round_up)) as u16;
    }
    let half = ((unbiased as u32) << 10) | (mantissa >> 13);
    let remainder = mantissa & 0x1fff;
    let round_up = remainder > 0x1000 || (remainder == 0x1000 && half & 1 == 1);
    sign | (half + u32::from(round_up)) as u16
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise the mantissa.
            let shift = m.leading_zeros() - 21;
            sign | ((127 - 15 + 1 - shift) << 23) | ((m << shift) & 0x3ff) << 13
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    ((bits + round) >> 16) as u16
}

/// How a buffer is filled before tuning starts. Random fills are seeded, so every worker
/// (and every restart of one) sees the same data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    Zeros,
    Ones,
    /// 0, 1, 2, ... (wrapping for narrow integer types).
    Arange,
    Normal {
        mean: f64,
        std: f64,
    },
    Uniform {
        low: f64,
        high: f64,
    },
    /// A NumPy `.npy` file of the same element type and size.
    File(PathBuf),
    /// A file of exactly the buffer's bytes (little-endian elements), as the Python
    /// package writes the user's tensors.
    Raw(PathBuf),
}

/// Elements generated from one seed; chunks are filled in parallel, each from a seed
/// derived from the buffer's and the chunk's index, so the data do not depend on the
/// number of threads.
const CHUNK: usize = 1 << 20;

/// Host contents of a buffer: `len` elements of `dtype` from `init`, with a seed of its own.
pub fn fill(dtype: DType, len: usize, init: &Init, seed: u64) -> Result<Vec<u8>, DataError> {
    match init {
        Init::File(path) => return read_npy(path, dtype, len),
        Init::Raw(path) => {
            let file = path.display().to_string();
            let bytes =
                std::fs::read(path).map_err(|e| DataError::Unreadable { file: file.clone(), reason: e.to_string() })?;
            if bytes.len() != len * dtype.size() {
                return Err(DataError::Bytes { file, holds: bytes.len(), needs: len * dtype.size() });
            }
            return Ok(bytes);
        }
        _ => {}
    }
    let mut out = vec![0u8; len * dtype.size()];
    if matches!(init, Init::Zeros) {
        return Ok(out);
    }
    let chunks: Vec<(usize, &mut [u8])> = out.chunks_mut(CHUNK * dtype.size()).enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(chunks.len().max(1));
    let mut per_thread: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks {
        per_thread[i % threads].push((i, chunk));
    }
    std::thread::scope(|scope| {
        for work in per_thread {
            scope.spawn(move || {
                for (index, chunk) in work {
                    fill_chunk(dtype, init, seed, index, chunk);
                }
            });
        }
    });
    Ok(out)
}

fn fill_chunk(dtype: DType, init: &Init, seed: u64, index: usize, chunk: &mut [u8]) {
    let mut rng = Rng::seeded(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let first = index * CHUNK;
    match init {
        Init::Ones => encode_each(dtype, chunk, |_| 1.0),
        Init::Arange => encode_each(dtype, chunk, |i| (first + i) as f64),
        Init::Normal { mean, std } => {
            let mut normals = Normals::default();
            encode_each(dtype, chunk, |_| mean + std * normals.next(&mut rng));
        }
        Init::Uniform { low, high } if dtype.is_float() => encode_each(dtype, chunk, |_| rng.uniform(*low, *high)),
        Init::Uniform { low, high } => {
            // Integers uniformly in [low, high).
            let span = (high - low).max(1.0) as usize;
            encode_each(dtype, chunk, |_| low + rng.below(span) as f64);
        }
        Init::Zeros | Init::File(_) | Init::Raw(_) => chunk.fill(0),
    }
}

/// Writes `value(i)` as the `i`-th element of `chunk` (`DType::encode`'s rounding and
/// wrapping), with the element type settled once per chunk rather than once per element (a setup fills
/// hundreds of millions of elements: 64M a buffer for an 8192 x 8192 matrix).
fn encode_each(dtype: DType, chunk: &mut [u8], mut value: impl FnMut(usize) -> f64) {
    fn each<const N: usize>(chunk: &mut [u8], mut bytes: impl FnMut(usize) -> [u8; N]) {
        for (i, out) in chunk.chunks_exact_mut(N).enumerate() {
            out.copy_from_slice(&bytes(i));
        }
    }
    match dtype {
        DType::F16 => each(chunk, |i| f32_to_f16(value(i) as f32).to_le_bytes()),
        DType::Bf16 => each(chunk, |i| f32_to_bf16(value(i) as f32).to_le_bytes()),
        DType::F32 => each(chunk, |i| (value(i) as f32).to_le_bytes()),
        DType::F64 => each(chunk, |i| value(i).to_le_bytes()),
        DType::I32 => each(chunk, |i| (value(i) as i64 as i32).to_le_bytes()),
        DType::I64 => each(chunk, |i| (value(i) as i64).to_le_bytes()),
        DType::U8 => each(chunk, |i| [value(i) as i64 as u8]),
    }
}

/// Standard normal numbers for fills, two from each pair of uniforms (Marsaglia's polar
/// method): no trigonometry, and half the logarithms and square roots of a Box–Muller that
/// keeps one of its two numbers.
#[derive(Default)]
struct Normals {
    spare: Option<f64>,
}

impl Normals {
    fn next(&mut self, rng: &mut Rng) -> f64 {
        if let Some(spare) = self.spare.take() {
            return spare;
        }
        loop {
            let u = 2.0 * rng.unit() - 1.0;
            let v = 2.0 * rng.unit() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let scale = (-2.0 * s.ln() / s).sqrt();
                self.spare = Some(v * scale);
                return u * scale;
            }
        }
    }
}

/// The data of a `.npy` file (version 1 to 3, little-endian, C order) whose element type
/// matches `dtype` and whose element count is `len`.
fn read_npy(path: &PathBuf, dtype: DType, len: usize) -> Result<Vec<u8>, DataError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| DataError::Unreadable { file: name.clone(), reason: e.to_string() })?;
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return Err(DataError::NotNpy(name));
    }
    let (header_len, start) = if bytes[6] == 1 {
        (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10)
    } else {
        if bytes.len() < 12 {
            return Err(DataError::TruncatedHeader(name));
        }
        (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
    };
    let header = bytes.get(start..start + header_len).ok_or_else(|| DataError::TruncatedHeader(name.clone()))?;
    let header = String::from_utf8_lossy(header);
    let expected = match dtype {
        DType::F16 => "<f2",
        DType::Bf16 => return Err(DataError::NoBfloat16(name)),
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
    };
    if !header.contains(expected) {
        return Err(DataError::ElementType { file: name, expected, header: header.into_owned() });
    }
    if header.contains("'fortran_order': True") {
        return Err(DataError::FortranOrder(name));
    }
    let data = &bytes[start + header_len..];
    if data.len() != len * dtype.size() {
        return Err(DataError::Elements { file: name, holds: data.len() / dtype.size(), needs: len });
    }
    Ok(data.to_vec())
}

/// The value of a scalar argument as the bytes the kernel receives.
pub fn scalar_bytes(dtype: DType, value: &Value) -> Result<Vec<u8>, DataError> {
    let number = value.as_number().ok_or_else(|| DataError::NotANumber(value.to_string()))?;
    let mut out = Vec::new();
    dtype.encode(number, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_to_nearest_even() {
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(-2.5), 0xc100);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(5.96e-8), 0x0001);
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00, "a tie rounds to even");
        for h in [0x0001u16, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x8001] {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h, "{h:#x}");
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(DType::Bf16.decode(&f32_to_bf16(-3.0).to_le_bytes()), -3.0);
    }

    #[test]
    fn fills_are_seeded_and_typed() {
        let a = fill(DType::F32, 1000, &Init::Normal { mean: 0.0, std: 1.0 }, 7).expect("fills");
        assert_eq!(a, fill(DType::F32, 1000, &Init::Normal { mean: 0.0, std: 1.0 }, 7).expect("fills"));
        assert_ne!(a, fill(DType::F32, 1000, &Init::Normal { mean: 0.0, std: 1.0 }, 8).expect("fills"));
        let ints = fill(DType::I32, 100, &Init::Uniform { low: 3.0, high: 5.0 }, 1).expect("fills");
        assert!(ints.chunks(4).all(|c| (3.0..5.0).contains(&DType::I32.decode(c))));
        let arange = fill(DType::F16, 4, &Init::Arange, 0).expect("fills");
        assert_eq!(arange.chunks(2).map(|c| DType::F16.decode(c)).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0, 3.0]);
        let long = fill(DType::F64, 3 * CHUNK + 5, &Init::Arange, 0).expect("fills");
        assert_eq!(
            DType::F64.decode(&long[(2 * CHUNK + 7) * 8..]),
            (2 * CHUNK + 7) as f64,
            "chunks keep global positions"
        );
        let big = fill(DType::F32, 2 * CHUNK, &Init::Normal { mean: 0.0, std: 1.0 }, 3).expect("fills");
        assert_ne!(big[..64], big[CHUNK * 4..CHUNK * 4 + 64], "chunks draw different numbers");
    }

    #[test]
    fn normal_fills_have_the_asked_mean_and_deviation_in_every_element_type() {
        let init = Init::Normal { mean: 2.0, std: 3.0 };
        for dtype in [DType::F16, DType::Bf16, DType::F32, DType::F64] {
            let bytes = fill(dtype, 1 << 20, &init, 5).expect("fills");
            let values: Vec<f64> = bytes.chunks(dtype.size()).map(|c| dtype.decode(c)).collect();
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
            assert!((mean - 2.0).abs() < 0.02, "{dtype:?}: mean {mean}");
            assert!((variance.sqrt() - 3.0).abs() < 0.02, "{dtype:?}: deviation {}", variance.sqrt());
            let within_one = values.iter().filter(|v| (**v - 2.0).abs() < 3.0).count() as f64 / values.len() as f64;
            assert!((within_one - 0.6827).abs() < 0.01, "{dtype:?}: {within_one} within one deviation");
        }
    }

    #[test]
    fn fills_encode_each_element_as_encode_does() {
        for dtype in [DType::F16, DType::Bf16, DType::F32, DType::F64, DType::I32, DType::I64, DType::U8] {
            let bytes = fill(dtype, 300, &Init::Arange, 0).expect("fills");
            let mut expected = Vec::new();
            (0..300).for_each(|i| dtype.encode(f64::from(i), &mut expected));
            assert_eq!(bytes, expected, "{dtype:?}");
        }
        let uniform = fill(DType::F32, 10_000, &Init::Uniform { low: -1.0, high: 0.5 }, 2).expect("fills");
        assert!(uniform.chunks(4).map(|c| DType::F32.decode(c)).all(|v| (-1.0..0.5).contains(&v)));
        assert!(fill(DType::Bf16, 8, &Init::Ones, 0).expect("fills").chunks(2).all(|c| DType::Bf16.decode(c) == 1.0));
    }

    #[test]
    fn npy_files_are_checked_against_the_argument() {
        let dir = std::env::temp_dir().join(format!("kerntune-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("x.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }          \n";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&1.5f32.to_le_bytes());
        bytes.extend_from_slice(&2.5f32.to_le_bytes());
        std::fs::write(&path, bytes).expect("write");
        let data = fill(DType::F32, 2, &Init::File(path.clone()), 0).expect("reads");
        assert_eq!(DType::F32.decode(&data[4..]), 2.5);
        let file = path.display().to_string();
        assert_eq!(
            fill(DType::F32, 3, &Init::File(path.clone()), 0),
            Err(DataError::Elements { file: file.clone(), holds: 2, needs: 3 })
        );
        assert!(matches!(
            fill(DType::F64, 2, &Init::File(path), 0),
            Err(DataError::ElementType { expected: "<f8", .. })
        ));
    }
}
