//! Particle swarm optimisation in the unit cube; each particle is evaluated at the valid
//! configuration nearest to its position.
//!
//! A move of the whole swarm is one batch. A particle whose configuration fails keeps its
//! personal best, so failures repel without stopping the swarm. When the swarm has
//! collapsed (moves keep landing on known configurations) it is scattered again, keeping
//! the global best as an attractor.

use kerntune_space::ConfigId;

use crate::support::{cost, fresh_batch, Stepwise};
use crate::{options, Context};

options! {
    /// Options of particle swarm optimisation.
    pub struct PsoOptions {
        /// Particles in the swarm.
        #[range(min = 1)]
        swarm_size: usize = 20,
        /// Share of its velocity a particle keeps from one move to the next (w).
        inertia: f64 = 0.5,
        /// Pull towards the particle's own best position (c1).
        cognitive: f64 = 2.0,
        /// Pull towards the swarm's best position (c2).
        social: f64 = 1.0,
        /// Largest change of a coordinate in one move, in units of the cube's side.
        #[range(min = 0.0)]
        max_velocity: f64 = 0.5,
    }
}

#[derive(Debug, Clone)]
struct Particle {
    position: Vec<f64>,
    velocity: Vec<f64>,
    best: Vec<f64>,
    best_cost: f64,
}

#[derive(Debug)]
pub(crate) struct Pso {
    options: PsoOptions,
    particles: Vec<Particle>,
    global: Option<(Vec<f64>, f64)>,
    /// Scatter the swarm at the next step.
    scatter: bool,
}

impl Pso {
    pub(crate) fn new(options: PsoOptions) -> Pso {
        Pso { options, particles: Vec::new(), global: None, scatter: true }
    }
}

impl Stepwise for Pso {
    fn propose(&mut self, context: &mut Context<'_>, _n: usize) -> Vec<ConfigId> {
        let space = context.space;
        if std::mem::take(&mut self.scatter) || self.particles.is_empty() {
            let ids = fresh_batch(context, self.options.swarm_size.max(1));
            self.particles = ids
                .iter()
                .map(|id| {
                    let position = space.to_unit(*id);
                    let velocity = position.iter().map(|_| context.rng.uniform(-0.1, 0.1)).collect();
                    Particle { best: position.clone(), position, velocity, best_cost: f64::INFINITY }
                })
                .collect();
            return ids;
        }
        let global = self.global.as_ref().map(|g| g.0.clone());
        let limit = self.options.max_velocity;
        let mut ids = Vec::with_capacity(self.particles.len());
        for particle in &mut self.particles {
            let attractor = global.as_ref().unwrap_or(&particle.best);
            let coordinates =
                particle.position.iter_mut().zip(&mut particle.velocity).zip(&particle.best).zip(attractor);
            for (((position, velocity), own_best), swarm_best) in coordinates {
                let (r1, r2) = (context.rng.unit(), context.rng.unit());
                let pulled = self.options.inertia * *velocity
                    + self.options.cognitive * r1 * (own_best - *position)
                    + self.options.social * r2 * (swarm_best - *position);
                *velocity = pulled.clamp(-limit, limit);
                *position = (*position + *velocity).clamp(0.0, 1.0);
            }
            ids.extend(space.snap(&particle.position));
        }
        ids
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        for ((particle, id), score) in self.particles.iter_mut().zip(proposed).zip(scores) {
            let value = cost(*score);
            if value < particle.best_cost {
                particle.best = context.space.to_unit(*id);
                particle.best_cost = value;
            }
            if self.global.as_ref().is_none_or(|g| value < g.1) {
                self.global = Some((context.space.to_unit(*id), value));
            }
        }
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.scatter = true;
    }
}
