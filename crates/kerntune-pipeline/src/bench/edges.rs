//! Edge sizes for the checked run. A configuration whose tiles divide the setup's problem
//! size never exercises its bounds checks there: one that forgets a check, or skips the
//! tail, passes at 4096 and is wrong at 4095. Where the setup names other sizes
//! ([`Setup::edges`](crate::protocol::Setup)), every configuration is also run once at
//! each, on arguments of that size, and checked against the reference's outputs there.
//!
//! Each edge is a worker of its own (its arguments, its reference's outputs computed once
//! at setup, its comparer), so that the setup's buffers, which the timed runs use, are
//! never touched; the configuration's module is the one loaded for the setup's size,
//! launched with the geometry the language gave for the edge ([`KernelImage::edges`]).

use kerntune_device::driver::{Context, Function};

use super::{check_limits, launch_image, Ended, Worker};
use crate::error::FailureKind;
use crate::protocol::{EdgeSetup, KernelImage};

/// The worker of one edge size, and its label (`n = 4095`) for reasons.
pub(super) struct Edge {
    label: String,
    worker: Worker,
}

/// Sets up a worker for each edge size, its drawing time added to `drawing`; an error names
/// the size.
pub(super) fn open(context: &Context, edges: Vec<EdgeSetup>, drawing: &mut f64) -> Result<Vec<Edge>, String> {
    edges
        .into_iter()
        .map(|EdgeSetup { label, setup }| {
            let worker = Worker::new(context, setup, drawing).map_err(|e| format!("at the edge size {label}: {e}"))?;
            Ok(Edge { label, worker })
        })
        .collect()
}

impl Worker {
    /// Checks a configuration, loaded as `function`, at every edge size where `kernel`
    /// has a launch; `passed` counts the sizes it passed. A failure names the size.
    pub(super) fn verify_edges(
        &mut self,
        context: &Context,
        function: &Function<'_>,
        kernel: &KernelImage,
        passed: &mut u32,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let total = self.edges.len();
        for (index, edge) in self.edges.iter_mut().enumerate() {
            let Some(geometry) = kernel.edges.get(index).copied().flatten() else { continue };
            let image = KernelImage { geometry, edges: Vec::new(), ..kernel.clone() };
            edge.worker.checked_run(context, function, &image, waiting).map_err(|mut ended| {
                ended.reason = format!(
                    "at the edge size {} ({} of {total}; the setup's size passed): {}",
                    edge.label,
                    index + 1,
                    ended.reason
                );
                ended
            })?;
            *passed += 1;
        }
        Ok(())
    }

    /// One launch of `kernel` on poisoned outputs, checked against this worker's reference.
    fn checked_run(
        &mut self,
        context: &Context,
        function: &Function<'_>,
        kernel: &KernelImage,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let attributes = function
            .attributes()
            .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "reading the kernel's attributes", e))?;
        check_limits(context, &attributes, kernel)?;
        function
            .allow_dynamic_shared(kernel.geometry.shared_bytes)
            .map_err(|e| Ended::cuda(FailureKind::InvalidConfig, "raising the dynamic shared memory limit", e))?;
        let (mut pointers, _scratch) = self
            .kernel_pointers(context, kernel)
            .map_err(|e| Ended::cuda(FailureKind::Device, "allocating scratch memory", e))?;
        self.prepare_outputs(context).map_err(|e| Ended::cuda(FailureKind::Device, "poisoning the outputs", e))?;
        launch_image(context, function, kernel, &mut pointers)
            .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "launching", e))?;
        waiting(1);
        context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
        self.verify(context)
    }
}
