//! Requests about two kernels at once, for the stages after the search: their outputs
//! compared bit for bit on many random input sets (the schedule stage's check of a
//! rewritten binary), and their times taken in alternating rounds (finalists, schedule).

use kerntune_device::draw::Drawer;
use kerntune_device::driver::{Context, CudaError, DeviceBuffer};
use kerntune_device::verify::Comparer;
use kerntune_device::Init;

use super::{launch_image, Worker};
use crate::protocol::KernelImage;
use crate::sampling::ClockSpan;
use crate::schedule::Interleaved;

/// How `interleave` times two kernels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Interleaving {
    pub rounds: u32,
    pub blocks: u32,
    pub seed: u64,
}

impl Worker {
    /// Runs `original` and `candidate` on `sets` sets of random floating-point inputs (uniform
    /// in [-1, 1), drawn on the GPU) and
    /// compares their outputs bit for bit; returns how many sets differed and the first
    /// difference. The setup's inputs are restored afterwards.
    pub(super) fn compare(
        &mut self,
        context: &Context,
        original: &KernelImage,
        candidate: &KernelImage,
        sets: u32,
        seed: u64,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(u32, Option<String>), String> {
        let comparer = self.comparer.take().map_or_else(|| Comparer::new(context), Ok)?;
        let drawer = self.drawer.take().map_or_else(|| Drawer::new(context), Ok)?;
        let outcome = self.compare_with(context, &comparer, &drawer, original, candidate, sets, seed, waiting);
        self.comparer = Some(comparer);
        for argument in &self.arguments {
            if let (Some(buffer), Some(contents)) = (&argument.buffer, &argument.contents) {
                contents.put_back(context, buffer, argument.dtype, argument.len, Some(&drawer))?;
            }
        }
        self.drawer = Some(drawer);
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    fn compare_with(
        &mut self,
        context: &Context,
        comparer: &Comparer,
        drawer: &Drawer,
        original: &KernelImage,
        candidate: &KernelImage,
        sets: u32,
        seed: u64,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(u32, Option<String>), String> {
        let text = |e: CudaError| e.to_string();
        let random = Init::Uniform { low: -1.0, high: 1.0 };
        let original_module = self.load(context, original).map_err(text)?;
        let candidate_module = self.load(context, candidate).map_err(text)?;
        let original_function = original_module.function(&original.name).map_err(text)?;
        let candidate_function = candidate_module.function(&candidate.name).map_err(text)?;
        for (function, image) in [(&original_function, original), (&candidate_function, candidate)] {
            function.allow_dynamic_shared(image.geometry.shared_bytes).map_err(text)?;
        }
        let outputs: Vec<usize> = self.tolerances.iter().map(|(p, _, _)| *p).collect();
        let expected: Vec<DeviceBuffer> = outputs
            .iter()
            .map(|p| context.alloc(self.arguments[*p].buffer.as_ref().map_or(0, DeviceBuffer::bytes)))
            .collect::<Result<_, _>>()
            .map_err(text)?;
        let (mut differing, mut first) = (0u32, None);
        for set in 0..sets {
            if set % 100 == 0 {
                waiting(300);
            }
            for (position, argument) in self.arguments.iter().enumerate() {
                let (Some(buffer), Some(_)) = (&argument.buffer, &argument.contents) else { continue };
                let set_seed = seed ^ (u64::from(set) << 20) ^ position as u64;
                drawer.draw(context, buffer, argument.dtype, argument.len, &random, set_seed).map_err(text)?;
            }
            self.prepare_outputs(context).map_err(text)?;
            let (mut pointers, _scratch) = self.kernel_pointers(context, original).map_err(text)?;
            launch_image(context, &original_function, original, &mut pointers).map_err(text)?;
            for (position, copy) in outputs.iter().zip(&expected) {
                if let Some(buffer) = &self.arguments[*position].buffer {
                    context.copy(buffer, copy).map_err(text)?;
                }
            }
            self.prepare_outputs(context).map_err(text)?;
            let (mut pointers, _scratch) = self.kernel_pointers(context, candidate).map_err(text)?;
            launch_image(context, &candidate_function, candidate, &mut pointers).map_err(text)?;
            let mut bad = false;
            for (position, copy) in outputs.iter().zip(&expected) {
                let argument = &self.arguments[*position];
                let Some(buffer) = &argument.buffer else { continue };
                let found = comparer
                    .compare(context, buffer, copy, argument.dtype, argument.len, 0.0, 0.0, true)
                    .map_err(text)?;
                if found.bad > 0 && first.is_none() {
                    first = Some(format!(
                        "input set {set}: output #{position} differs in {} of {} elements, first at index {}",
                        found.bad, argument.len, found.first_bad
                    ));
                }
                bad |= found.bad > 0;
            }
            differing += u32::from(bad);
        }
        Ok((differing, first))
    }

    /// Times two kernels alternately, `plan.rounds` times each, with the usual flush.
    ///
    /// Where the driver places a module's code matters: on an H200 the same 7 µs kernel,
    /// loaded twice, ran up to 8% faster or slower depending on which load it was, and the
    /// advantage changed sides from one load to the next. So the rounds are split into
    /// blocks, each of which loads both kernels afresh, the one loaded first drawn at
    /// random, and within a block the one launched first alternates. Neither kernel then
    /// keeps the better place for the whole comparison.
    pub(super) fn interleave(
        &mut self,
        context: &Context,
        kernels: [&KernelImage; 2],
        plan: Interleaving,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<Interleaved, String> {
        let text = |e: CudaError| e.to_string();
        let mut rng = kerntune_space::Rng::seeded(plan.seed);
        let mut span = self.gauge.as_ref().map(|_| ClockSpan::default());
        let mut read_clocks = |worker: &Worker| {
            if let (Some(span), Some(gauge)) = (span.as_mut(), &worker.gauge) {
                span.add(&gauge.read());
            }
        };
        let blocks = plan.blocks.clamp(1, plan.rounds.max(1));
        let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let chunk = 16u32;
        self.ensure_events(context, 2 * chunk as usize).map_err(text)?;
        for block in 0..blocks {
            read_clocks(self);
            let rounds = plan.rounds / blocks + u32::from(block < plan.rounds % blocks);
            let order: [usize; 2] = if rng.chance(0.5) { [0, 1] } else { [1, 0] };
            let mut modules = Vec::with_capacity(2);
            for &k in &order {
                modules.push((k, self.load(context, kernels[k]).map_err(text)?));
            }
            modules.sort_by_key(|(k, _)| *k);
            let functions = [
                modules[0].1.function(&kernels[0].name).map_err(text)?,
                modules[1].1.function(&kernels[1].name).map_err(text)?,
            ];
            for (function, image) in functions.iter().zip(kernels) {
                function.allow_dynamic_shared(image.geometry.shared_bytes).map_err(text)?;
            }
            let (mut pointers_a, _scratch_a) = self.kernel_pointers(context, kernels[0]).map_err(text)?;
            let (mut pointers_b, _scratch_b) = self.kernel_pointers(context, kernels[1]).map_err(text)?;
            let pointers = [&mut pointers_a, &mut pointers_b];
            // The first launch of each after loading is not timed. Every launch finds the
            // `reset_to_zero` buffers at zero, as in the search (zeroed before the start event).
            for k in 0..2 {
                self.reset_buffers(context).map_err(text)?;
                launch_image(context, &functions[k], kernels[k], pointers[k]).map_err(text)?;
            }
            let mut done = 0;
            while done < rounds {
                let count = chunk.min(rounds - done) as usize;
                for round in 0..count {
                    let first = (done as usize + round) % 2;
                    for k in [first, 1 - first] {
                        self.reset_buffers(context).map_err(text)?;
                        self.flush(context).map_err(text)?;
                        let (start, stop) = &self.events[2 * round + k];
                        start.record(context).map_err(text)?;
                        launch_image(context, &functions[k], kernels[k], pointers[k]).map_err(text)?;
                        stop.record(context).map_err(text)?;
                    }
                }
                waiting(2 * count);
                context.synchronize().map_err(text)?;
                for round in 0..count {
                    for (k, samples) in times.iter_mut().enumerate() {
                        let (start, stop) = &self.events[2 * round + k];
                        samples.push(start.elapsed_ms(stop).map_err(text)?);
                    }
                }
                done += count as u32;
            }
        }
        read_clocks(self);
        let [a, b] = times;
        Ok(Interleaved { a, b, clocks: span })
    }
}
