//! Small pieces the strategies share: running a step's proposals as a batch
//! ([`Stepper`]), drawing configurations nobody has evaluated yet ([`fresh`]), moves in
//! the space of value indexes ([`moves`]), hill climbing ([`descent`]) and climbs restarted
//! one after another ([`climbs`]).

mod batch;
pub(crate) mod climbs;
mod descent;
mod fresh;
pub(crate) mod moves;

pub(crate) use batch::{Stepper, Stepwise};
pub(crate) use fresh::{exhausted, fresh, fresh_batch};

/// A score as something to minimise where a failed configuration is the worst possible
/// outcome: strategies that rank candidates rank failures last.
pub(crate) fn cost(score: Option<f64>) -> f64 {
    score.unwrap_or(f64::INFINITY)
}

/// The Metropolis rule of annealing-style searches: a better cost is always taken, a failed
/// one never, and a worse one with chance exp(-relative worsening / temperature).
pub(crate) fn metropolis(rng: &mut kerntune_space::Rng, candidate: f64, current: f64, temperature: f64) -> bool {
    if candidate < current {
        return true;
    }
    if !candidate.is_finite() {
        return false;
    }
    let worsening = (candidate - current) / current.abs().max(f64::MIN_POSITIVE);
    rng.chance((-worsening / temperature.max(f64::MIN_POSITIVE)).exp())
}
