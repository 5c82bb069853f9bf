//! Extra input sets for the checked run. Where the reference is a kernel, every
//! configuration that may win (timed, not stopped early) is checked on
//! [`Setup::verify_sets`](crate::protocol::Setup) input sets beyond the setup's own: the arguments drawn from a random [`Init`] are drawn again with
//! other seeds, and the reference's outputs on each set are computed once, at setup. A
//! configuration right on one set of inputs by accident (a bound the data happen to
//! respect, a race the data hide) is caught on the next.
//!
//! Where the reference is data (Triton's route: the front computed the expected outputs),
//! the front may give further input sets with their expected outputs, loaded as they are.
//!
//! The sets live on the device, so that a configuration's extra checks cost copies and
//! launches, not uploads: each set takes as much memory as the random arguments and the
//! outputs.

use std::ffi::c_void;

use kerntune_device::driver::{Context, CudaError, DeviceBuffer};
use kerntune_device::{fill, Init};

use super::inputs::Inputs;
use super::{Ended, Worker};
use crate::error::FailureKind;
use crate::protocol::{ArgSetup, GivenSet};

/// Whether an argument's data change from one input set to the next: its `Init` draws
/// random numbers, and the kernel reads what the buffer holds (an input, or an output
/// restored rather than poisoned before each launch, and not zeroed). A fixed `Init`
/// (zeros, a range, a file) would give the same data again.
pub fn refillable(init: &Init, output: bool, poison: bool, reset: bool) -> bool {
    matches!(init, Init::Normal { .. } | Init::Uniform { .. }) && !reset && !(output && poison)
}

/// The positions of the arguments that get new data in each extra set.
pub(super) fn refilled(args: &[ArgSetup]) -> Vec<usize> {
    args.iter()
        .enumerate()
        .filter(|(_, arg)| {
            matches!(arg, ArgSetup::Buffer { init, output, poison, reset, .. }
                if refillable(init, *output, *poison, *reset))
        })
        .map(|(position, _)| position)
        .collect()
}

/// The seed of an argument's data in input set `set`, from the setup's seed of it (set 0
/// is the setup's own data).
pub(super) fn set_seed(seed: u64, set: u32) -> u64 {
    seed ^ u64::from(set).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The extra input sets on the device, and the setup's own data of the same arguments, to
/// put back after each configuration's checks.
pub(super) struct ExtraSets {
    /// How the sets' inputs came about, for the reason of a failure.
    origin: &'static str,
    positions: Vec<usize>,
    original: Vec<DeviceBuffer>,
    sets: Vec<ExtraSet>,
}

struct ExtraSet {
    /// The data of the refilled arguments, in the order of `positions`.
    inputs: Vec<DeviceBuffer>,
    /// The reference's outputs, in the order of the tolerances.
    expected: Vec<DeviceBuffer>,
}

impl Worker {
    /// The buffer an argument's data go to: its initial contents for an output restored
    /// before each launch, else the buffer itself.
    fn data_buffer(&self, position: usize) -> Option<&DeviceBuffer> {
        let argument = &self.arguments[position];
        argument.initial.as_ref().or(argument.buffer.as_ref())
    }

    fn copy_of(&self, context: &Context, buffer: Option<&DeviceBuffer>) -> Result<DeviceBuffer, CudaError> {
        let source = buffer.expect("refilled arguments are buffers");
        let copy = context.alloc(source.bytes())?;
        context.copy(source, &copy)?;
        Ok(copy)
    }

    /// Puts one set's data (or the setup's own) into the refilled arguments.
    fn load_set(&self, context: &Context, positions: &[usize], data: &[DeviceBuffer]) -> Result<(), CudaError> {
        for (position, buffer) in positions.iter().zip(data) {
            if let Some(target) = self.data_buffer(*position) {
                context.copy(buffer, target)?;
            }
        }
        Ok(())
    }

    /// Draws `count` extra input sets from the setup's arguments and runs the reference on
    /// each through `run_reference` (which launches it on the current arguments and waits).
    /// `None` when there are none to draw: no argument's data is random.
    pub(super) fn draw_sets(
        &self,
        context: &Context,
        args: &[ArgSetup],
        count: u32,
        run_reference: &mut dyn FnMut(&Worker) -> Result<(), String>,
        inputs: &mut Inputs<'_>,
    ) -> Result<Option<ExtraSets>, String> {
        let positions = refilled(args);
        if count == 0 || positions.is_empty() {
            return Ok(None);
        }
        let text = |e: CudaError| e.to_string();
        let original: Vec<DeviceBuffer> = positions
            .iter()
            .map(|p| self.copy_of(context, self.data_buffer(*p)))
            .collect::<Result<_, _>>()
            .map_err(text)?;
        let mut sets = Vec::new();
        for set in 1..=count {
            let mut set_inputs = Vec::new();
            for &position in &positions {
                let ArgSetup::Buffer { name, dtype, len, init, seed, .. } = &args[position] else { continue };
                let (buffer, _) = inputs
                    .buffer(context, *dtype, *len, init, set_seed(*seed, set))
                    .map_err(|e| format!("argument {name}, input set {set}: {e}"))?;
                set_inputs.push(buffer);
            }
            self.load_set(context, &positions, &set_inputs).map_err(text)?;
            run_reference(self).map_err(|e| format!("input set {set}: {e}"))?;
            let mut expected = Vec::new();
            for (position, _, _) in &self.tolerances {
                let copy = self.copy_of(context, self.arguments[*position].buffer.as_ref()).map_err(text)?;
                self.reference_defined(context, *position, &copy)
                    .map_err(|e| format!("on input set {set} (inputs drawn with another seed), {e}; [verify] sets = 0 checks the setup's inputs only"))?;
                expected.push(copy);
            }
            sets.push(ExtraSet { inputs: set_inputs, expected });
        }
        self.load_set(context, &positions, &original).map_err(text)?;
        Ok(Some(ExtraSets { origin: "inputs drawn with another seed", positions, original, sets }))
    }

    /// Puts input sets given as data (each with its expected outputs) on the device.
    /// `None` when there are none. Every set must give the same arguments.
    pub(super) fn load_given_sets(&self, context: &Context, given: &[GivenSet]) -> Result<Option<ExtraSets>, String> {
        let Some(first) = given.first() else { return Ok(None) };
        let positions: Vec<usize> = first.inputs.iter().map(|(position, _)| *position).collect();
        let text = |e: CudaError| e.to_string();
        let upload = |dtype, len, init: &Init| -> Result<DeviceBuffer, String> {
            let data = fill(dtype, len, init, 0).map_err(|e| e.to_string())?;
            let buffer = context.alloc(data.len()).map_err(text)?;
            context.upload(&buffer, &data).map_err(text)?;
            Ok(buffer)
        };
        let mut sets = Vec::new();
        for (index, set) in given.iter().enumerate() {
            let name = index + 2;
            let these: Vec<usize> = set.inputs.iter().map(|(position, _)| *position).collect();
            if these != positions || set.expected.len() != self.tolerances.len() {
                return Err(format!("input set {name} gives other arguments or outputs than set 2"));
            }
            let mut inputs = Vec::new();
            for (position, init) in &set.inputs {
                let argument = self.arguments.get(*position).filter(|_| self.data_buffer(*position).is_some());
                let argument =
                    argument.ok_or_else(|| format!("input set {name}: argument #{position} is no buffer"))?;
                inputs.push(upload(argument.dtype, argument.len, init).map_err(|e| format!("input set {name}: {e}"))?);
            }
            let mut expected = Vec::new();
            for ((position, _, _), init) in self.tolerances.iter().zip(&set.expected) {
                let argument = &self.arguments[*position];
                let buffer = upload(argument.dtype, argument.len, init)
                    .map_err(|e| format!("expected outputs of input set {name}: {e}"))?;
                self.reference_defined(context, *position, &buffer)
                    .map_err(|e| format!("expected outputs of input set {name}: {e}"))?;
                expected.push(buffer);
            }
            sets.push(ExtraSet { inputs, expected });
        }
        let original: Vec<DeviceBuffer> = positions
            .iter()
            .map(|p| self.copy_of(context, self.data_buffer(*p)))
            .collect::<Result<_, _>>()
            .map_err(text)?;
        Ok(Some(ExtraSets { origin: "inputs given with the outputs expected on them", positions, original, sets }))
    }

    /// Checks a configuration on every extra input set, `launch` running it on the current
    /// arguments through `pointers`; `passed` counts the sets it passed. The setup's data are
    /// back in place afterwards, whatever happened.
    pub(super) fn verify_sets(
        &self,
        context: &Context,
        pointers: &mut [*mut c_void],
        launch: &dyn Fn(&mut [*mut c_void]) -> Result<(), CudaError>,
        passed: &mut u32,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let Some(extra) = &self.extra_sets else { return Ok(()) };
        let checked = self.verify_each_set(context, extra, pointers, launch, passed, waiting);
        let restored = self
            .load_set(context, &extra.positions, &extra.original)
            .and_then(|()| self.prepare_outputs(context))
            .map_err(|e| Ended::cuda(FailureKind::Device, "restoring the inputs", e));
        checked.and(restored)
    }

    fn verify_each_set(
        &self,
        context: &Context,
        extra: &ExtraSets,
        pointers: &mut [*mut c_void],
        launch: &dyn Fn(&mut [*mut c_void]) -> Result<(), CudaError>,
        passed: &mut u32,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let total = extra.sets.len() + 1;
        for (index, set) in extra.sets.iter().enumerate() {
            self.load_set(context, &extra.positions, &set.inputs)
                .and_then(|()| self.prepare_outputs(context))
                .map_err(|e| Ended::cuda(FailureKind::Device, "loading an input set", e))?;
            launch(pointers).map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "launching", e))?;
            waiting(1);
            context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
            let references: Vec<Option<&DeviceBuffer>> = set.expected.iter().map(Some).collect();
            self.verify_against(context, &references).map_err(|mut ended| {
                ended.reason = format!(
                    "on input set {} of {total} ({}; the setup's passed): {}",
                    index + 2,
                    extra.origin,
                    ended.reason
                );
                ended
            })?;
            *passed += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerntune_device::DType;
    use std::path::PathBuf;

    fn buffer(name: &str, init: Init, output: bool, poison: bool, reset: bool) -> ArgSetup {
        ArgSetup::Buffer { name: name.into(), dtype: DType::F32, len: 4, init, output, poison, seed: 7, reset }
    }

    #[test]
    fn extra_sets_redraw_random_inputs_and_restored_outputs_only() {
        let normal = Init::Normal { mean: 0.0, std: 1.0 };
        let uniform = Init::Uniform { low: 0.0, high: 1.0 };
        let args = [
            buffer("a", normal.clone(), false, true, false),
            buffer("indices", Init::Arange, false, true, false),
            buffer("data", Init::Raw(PathBuf::from("x.bin")), false, true, false),
            buffer("out", normal.clone(), true, true, false),
            buffer("accumulated", uniform, true, false, false),
            buffer("counter", normal, true, false, true),
            ArgSetup::Scalar { name: "n".into(), bytes: Default::default() },
        ];
        assert_eq!(refilled(&args), vec![0, 4]);
    }

    #[test]
    fn set_zero_is_the_setups_own_seed_and_every_other_set_differs() {
        assert_eq!(set_seed(12, 0), 12);
        let seeds: std::collections::BTreeSet<u64> = (0..64).map(|set| set_seed(12, set)).collect();
        assert_eq!(seeds.len(), 64);
    }

    #[test]
    fn a_redrawn_input_holds_other_data_of_the_same_init() {
        let init = Init::Uniform { low: -1.0, high: 1.0 };
        let setup = fill(DType::F32, 256, &init, set_seed(3, 0)).expect("fills");
        let extra = fill(DType::F32, 256, &init, set_seed(3, 1)).expect("fills");
        assert_ne!(setup, extra);
        let values = extra.chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        assert!(values.clone().all(|v| (-1.0..=1.0).contains(&v)));
    }
}
