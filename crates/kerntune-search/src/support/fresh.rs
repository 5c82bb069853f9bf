//! Drawing configurations that have not been evaluated (nor are being evaluated).

use kerntune_space::ConfigId;

use crate::Context;

/// Random draws tried before falling back to a scan: a miss is likely only when most of
/// the space is known, and then the scan is short relative to what was spent.
const DRAWS: usize = 64;

/// True when every configuration of the space has been observed or is being evaluated.
pub(crate) fn exhausted(context: &Context<'_>) -> bool {
    context.history.len() + context.history.pending_count() >= context.space.len()
}

/// A uniformly random configuration that is neither known to the history nor in `taken`
/// (proposals of the batch being built); `None` when there is none left.
pub(crate) fn fresh(context: &mut Context<'_>, taken: &[ConfigId]) -> Option<ConfigId> {
    let size = context.space.len();
    if size == 0 || exhausted(context) {
        return None;
    }
    let history = context.history;
    let is_new = |id: &ConfigId| !history.is_known(*id) && !taken.contains(id);
    for _ in 0..DRAWS {
        let id = ConfigId::from(context.rng.below(size));
        if is_new(&id) {
            return Some(id);
        }
    }
    let start = context.rng.below(size);
    (0..size).map(|offset| ConfigId::from((start + offset) % size)).find(is_new)
}

/// Up to `n` distinct fresh configurations (fewer only when the space runs out).
pub(crate) fn fresh_batch(context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
    let mut batch = Vec::with_capacity(n);
    while batch.len() < n {
        match fresh(context, &batch) {
            Some(id) => batch.push(id),
            None => break,
        }
    }
    batch
}
