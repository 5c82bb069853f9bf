//! Where a setup's buffers get their data: drawn on the GPU where it can
//! ([`kerntune_device::draw`]: normal and uniform floating-point data, the large inputs of
//! most specs), else made on the host ([`kerntune_device::fill`]: integers, ranges, files)
//! and uploaded. A floating-point input's contents are kept the way they came, to be put
//! back after the schedule stage's random inputs: drawn again, or uploaded again.

use kerntune_device::draw::Drawer;
use kerntune_device::driver::{Context, DeviceBuffer};
use kerntune_device::{fill, DType, Init};

use crate::protocol::ArgSetup;

/// How a buffer's setup contents are made again.
pub(super) enum Contents {
    Host(Vec<u8>),
    Drawn { init: Init, seed: u64 },
}

impl Contents {
    /// Puts these contents back into `buffer` (of `len` elements of `dtype`).
    pub fn put_back(
        &self,
        context: &Context,
        buffer: &DeviceBuffer,
        dtype: DType,
        len: usize,
        drawer: Option<&Drawer>,
    ) -> Result<(), String> {
        match (self, drawer) {
            (Contents::Host(data), _) => context.upload(buffer, data).map_err(|e| e.to_string()),
            (Contents::Drawn { init, seed }, Some(drawer)) => {
                drawer.draw(context, buffer, dtype, len, init, *seed).map_err(|e| e.to_string())
            }
            (Contents::Drawn { .. }, None) => Err("an input drawn on the GPU, and no drawer to draw it again".into()),
        }
    }
}

/// Where the data of one setup's buffers come from: the GPU's drawer, if the setup has
/// anything for it to draw and it could be made, else the host. `drawing` counts the
/// seconds spent making data on the host.
pub(super) struct Inputs<'a> {
    pub drawer: Option<Drawer>,
    pub drawing: &'a mut f64,
}

impl Inputs<'_> {
    /// A drawer where any of `args`' buffers is drawn on the GPU. Where NVRTC cannot
    /// compile its kernel the host draws everything: slower, the same checks.
    pub fn drawer_for(context: &Context, args: &[ArgSetup]) -> Option<Drawer> {
        let drawn = |arg: &ArgSetup| matches!(arg, ArgSetup::Buffer { dtype, init, .. } if Drawer::draws(*dtype, init));
        args.iter().any(drawn).then(|| Drawer::new(context).ok())?
    }

    /// A buffer of `len` elements of `dtype` from `init` with `seed`, and how to make its
    /// contents again.
    pub fn buffer(
        &mut self,
        context: &Context,
        dtype: DType,
        len: usize,
        init: &Init,
        seed: u64,
    ) -> Result<(DeviceBuffer, Contents), String> {
        if let Some(drawer) = self.drawer.as_ref().filter(|_| Drawer::draws(dtype, init)) {
            let buffer = context.alloc(len * dtype.size()).map_err(|e| e.to_string())?;
            drawer.draw(context, &buffer, dtype, len, init, seed).map_err(|e| format!("drawing on the GPU: {e}"))?;
            return Ok((buffer, Contents::Drawn { init: init.clone(), seed }));
        }
        let clock = std::time::Instant::now();
        let data = fill(dtype, len, init, seed).map_err(|e| e.to_string())?;
        *self.drawing += clock.elapsed().as_secs_f64();
        let buffer = context.alloc(data.len()).map_err(|e| e.to_string())?;
        context.upload(&buffer, &data).map_err(|e| e.to_string())?;
        Ok((buffer, Contents::Host(data)))
    }
}
