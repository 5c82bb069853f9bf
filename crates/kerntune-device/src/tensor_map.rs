//! Hopper's TMA descriptors (`CUtensorMap`): what a kernel that takes a host-side tensor
//! descriptor receives by value, encoded here over a device buffer with
//! `cuTensorMapEncodeTiled`.
//!
//! [`TensorMapSpec`] is the description a compiler hands over (Triton's `tensordesc_meta`
//! and the descriptor's shape, strides and block shape, in Triton's order: outermost
//! dimension first, strides in elements); [`TensorMap::encode`] turns it into the 128-byte
//! descriptor at a given device address. The driver wants the innermost dimension first and
//! strides in bytes without the innermost one: the conversion lives here, once.

use cudarc::driver::sys;
use serde::{Deserialize, Serialize};

use crate::driver::CudaError;

/// A tiled TMA descriptor's parameters, before the address of its tensor is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMapSpec {
    /// `CUtensorMapDataType` (the host's numbering).
    pub data_type: u32,
    /// Bytes per element.
    pub elem_size: u32,
    /// The tensor's extent per dimension, outermost first.
    pub shape: Vec<u64>,
    /// Elements between neighbours along each dimension, outermost first; the last is 1.
    pub strides: Vec<u64>,
    /// The tile one TMA copy moves, per dimension, outermost first.
    pub block: Vec<u32>,
    /// `CUtensorMapSwizzle`.
    pub swizzle: u32,
    /// Out-of-bounds elements read as NaN (Triton's `padding="nan"`) instead of zero.
    #[serde(default)]
    pub nan_fill: bool,
}

/// An encoded descriptor, aligned as the driver and a kernel parameter require.
#[derive(Clone, Copy)]
pub struct TensorMap(sys::CUtensorMap);

impl std::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TensorMap")
    }
}

fn request(message: String) -> CudaError {
    CudaError::Request { call: "cuTensorMapEncodeTiled", message }
}

fn data_type(code: u32) -> Result<sys::CUtensorMapDataType, CudaError> {
    use sys::CUtensorMapDataType as T;
    Ok(match code {
        0 => T::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        1 => T::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        2 => T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        3 => T::CU_TENSOR_MAP_DATA_TYPE_INT32,
        4 => T::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        5 => T::CU_TENSOR_MAP_DATA_TYPE_INT64,
        6 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        7 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        8 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        9 => T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        10 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
        11 => T::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
        12 => T::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
        other => return Err(request(format!("data type {other} is not one kerntune knows"))),
    })
}

fn swizzle(code: u32) -> Result<sys::CUtensorMapSwizzle, CudaError> {
    use sys::CUtensorMapSwizzle as S;
    Ok(match code {
        0 => S::CU_TENSOR_MAP_SWIZZLE_NONE,
        1 => S::CU_TENSOR_MAP_SWIZZLE_32B,
        2 => S::CU_TENSOR_MAP_SWIZZLE_64B,
        3 => S::CU_TENSOR_MAP_SWIZZLE_128B,
        other => return Err(request(format!("swizzle {other} is not one kerntune knows"))),
    })
}

/// A descriptor's dimensions as the driver takes them: innermost first, strides in bytes of
/// every dimension but the innermost, and the box likewise reversed.
#[derive(Debug)]
struct DriverOrder {
    dims: Vec<u64>,
    strides: Vec<u64>,
    block: Vec<u32>,
}

impl TensorMapSpec {
    fn driver_order(&self) -> Result<DriverOrder, CudaError> {
        let rank = self.shape.len();
        if !(1..=5).contains(&rank) || self.strides.len() != rank || self.block.len() != rank {
            return Err(request(format!(
                "shape {:?}, strides {:?} and block {:?} must have one rank of 1 to 5",
                self.shape, self.strides, self.block
            )));
        }
        if self.strides[rank - 1] != 1 {
            return Err(request(format!("the innermost stride is {}, not 1", self.strides[rank - 1])));
        }
        let dims = self.shape.iter().rev().copied().collect();
        let strides = self.strides[..rank - 1].iter().rev().map(|s| s * u64::from(self.elem_size)).collect();
        let block = self.block.iter().rev().copied().collect();
        Ok(DriverOrder { dims, strides, block })
    }
}

impl TensorMap {
    /// The descriptor of `spec` over the tensor at device address `address`. Needs a CUDA
    /// context current on this thread (the benchmark worker's).
    pub fn encode(spec: &TensorMapSpec, address: u64) -> Result<TensorMap, CudaError> {
        let DriverOrder { dims, strides, block } = spec.driver_order()?;
        let element_strides = vec![1u32; dims.len()];
        let fill = if spec.nan_fill {
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
        } else {
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
        };
        // SAFETY: CUtensorMap is plain data (16 u64); the driver overwrites all of it.
        let mut map: sys::CUtensorMap = unsafe { std::mem::zeroed() };
        // SAFETY: every array holds `dims.len()` entries (strides one fewer), as the rank
        // passed says; they and `map` live through the call, which only writes `map`.
        let status = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                data_type(spec.data_type)?,
                dims.len() as u32,
                address as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                block.as_ptr(),
                element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle(spec.swizzle)?,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                fill,
            )
        };
        status.result().map_err(|e| CudaError::Call {
            call: "cuTensorMapEncodeTiled",
            code: format!("{e:?} (shape {:?}, strides {:?}, block {:?})", spec.shape, spec.strides, spec.block),
            sticky: false,
        })?;
        Ok(TensorMap(map))
    }

    /// The descriptor's bytes, as a kernel parameter passed by value.
    pub fn as_mut_ptr(&mut self) -> *mut std::ffi::c_void {
        (&mut self.0 as *mut sys::CUtensorMap).cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TensorMapSpec {
        TensorMapSpec {
            data_type: 6,
            elem_size: 2,
            shape: vec![512, 256],
            strides: vec![256, 1],
            block: vec![128, 64],
            swizzle: 3,
            nan_fill: false,
        }
    }

    #[test]
    fn the_driver_gets_the_innermost_dimension_first_and_byte_strides_without_it() {
        let DriverOrder { dims, strides, block } = spec().driver_order().expect("valid");
        assert_eq!(dims, [256, 512]);
        assert_eq!(strides, [512]);
        assert_eq!(block, [64, 128]);
    }

    #[test]
    fn a_strided_innermost_dimension_or_a_rank_mismatch_is_refused_before_the_driver() {
        let mut strided = spec();
        strided.strides = vec![512, 2];
        assert!(strided.driver_order().unwrap_err().to_string().contains("innermost stride is 2"));
        let mut short = spec();
        short.block = vec![64];
        assert!(short.driver_order().unwrap_err().to_string().contains("one rank"));
    }

    #[test]
    fn unknown_data_types_and_swizzles_are_errors_not_undefined_enums() {
        assert!(data_type(99).is_err());
        assert!(swizzle(7).is_err());
        assert!(matches!(swizzle(3), Ok(sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B)));
    }
}
