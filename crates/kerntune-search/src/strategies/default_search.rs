//! The default strategy: forest-guided best-first search.
//!
//! After a few random configurations, a random forest is fitted to everything observed
//! (failed configurations included, as the worst outcome) before every proposal, and the
//! proposal is the candidate with the highest expected improvement under it. Candidates
//! come from one of two places:
//!
//! - a *local* step looks at the best configuration whose neighbourhood (one parameter
//!   changed) still holds unevaluated configurations, and takes from those neighbours and
//!   from random configurations one step away in several parameters. Every neighbour of a
//!   good configuration is eventually tried, in the order the model prefers, so the search
//!   climbs like a local search that knows which move to try first. Once the run stops
//!   improving, only local optima (configurations no evaluated neighbour beats) are climbed
//!   from: a plateau of near-equal configurations is then one parent, not dozens, and the
//!   top of another basin, even one below the plateau, gets its turn;
//! - a *global* step (a share of the proposals) takes from random configurations of the
//!   whole space, which lets the model jump to another basin when it believes one is
//!   better, and keeps the search from circling a plateau;
//! - a *climb* (half of the proposals once a run of more than 100 observations has not
//!   improved in its second half) starts from a random configuration and moves to its best
//!   evaluated neighbour for as long as one beats it, trying the neighbours in the order the
//!   model prefers; at the top it starts again. Best-first climbing keeps a stalled run
//!   around its best basin, and a needle whose basin holds nothing good below its top is
//!   found only by climbing into it, as multi-start local searches do.
//!
//! The forest is what makes this cheap in evaluations: it learns which parameters matter
//! and that some regions fail, from the first few dozen outcomes. Nothing depends on the
//! budget, so the search is the same whether it will be stopped at 25 evaluations or 2000.
//! Asked for a batch, it fills the batch with distinct picks the same way; configurations
//! in flight count towards the random start, so in batches the model guides from the
//! second successful outcome on rather than after the first ten.
//!
//! It can also tell when to stop: before each proposal it estimates the chance that an
//! unevaluated configuration beats the best by more than the noise, from the forest's
//! chances held to the model's record on this run (`surrogate/chance.rs`); a run
//! without a budget stops on it.
//!
//! What keeps it cheap in time: a fit costs about its row count times the log of it, so
//! refitting on the whole history before every proposal costs quadratically in the
//! evaluations (235 s for a 4,362-configuration landscape). Up to [`FULL_HISTORY`]
//! observations nothing changes; past it, the forest is refitted once every
//! history / [`REFITS_PER_DOUBLING`] observations (a constant number of refits per doubling of
//! the history) and fitted to at most [`FIT_LIMIT`] observations: the best quarter of them
//! always, the rest a uniform sample of the others, failures included, so the model still
//! knows where builds fail. Between refits, expected improvement is measured against the
//! current best, so a new best changes the picks at once.

use kerntune_space::{ConfigId, Neighbourhood, Rng, Space};

use crate::support::{exhausted, fresh, fresh_batch, moves};
use crate::surrogate::chance::{chance, most_promising, Calibration};
use crate::surrogate::forest::{Forest, ForestShape};
use crate::surrogate::{expected_improvement, features, log_scale, targets};
use crate::{options, Context, Observation, Strategy};

options! {
    /// Options of the default strategy (forest-guided best-first search). `initial_samples`,
    /// `global_share` and `min_leaf` were chosen by leave-one-kernel-out cross-validation on
    /// recorded landscapes (bench/cross_validate.sh, docs/strategies.md).
    pub struct DefaultOptions {
        /// Random configurations observed before the model guides the search.
        initial_samples: usize = 10,
        /// Successful outcomes back before the model guides a pick, however many are in
        /// flight (in batches, those in flight count towards `initial_samples`).
        #[range(min = 2)]
        guided_after: usize = 2,
        /// Trees in the forest.
        #[range(min = 1)]
        trees: usize = 30,
        /// Observations a leaf of a tree holds at least.
        min_leaf: usize = 1,
        /// Share of the parameters considered at each split of a tree.
        #[range(min = 0.0, max = 1.0)]
        feature_fraction: f64 = 0.7,
        /// Share of the proposals chosen among random configurations of the whole space.
        #[range(min = 0.0, max = 1.0)]
        global_share: f64 = 0.3,
        /// Random configurations scored in a global step.
        random_candidates: usize = 500,
        /// Random configurations scored in a global step once the run has stalled: past 100
        /// observations, with no improvement beyond the noise in the second half of them
        /// (0: `random_candidates` always). A model that has seen one basin ranks
        /// the whole space by it, so its pick among 500 lands in that basin again; among a
        /// few, it is nearly a random restart. 0 (the default): 10 helped the one fitting
        /// landscape with a needle and cost the others (docs/strategies.md, "Twelfth
        /// session").
        explore_candidates: usize = 0,
        /// Once the run has stalled (as for `explore_candidates`), a share of the proposals
        /// (`climb_share`) climb from a new start instead: the model's pick among this many
        /// random configurations (1: a random one), climbed one parameter at a time, the
        /// model choosing which neighbour to try first, until no neighbour beats it; then a
        /// new start (0: never). Best-first climbing keeps a stalled run around its best
        /// basin and misses a needle whose basin holds nothing good below its top. 1 and 0.5
        /// were chosen on the 23 fitting landscapes (docs/strategies.md, "Thirteenth session").
        climb_candidates: usize = 1,
        /// Share of a stalled run's proposals that climb (`climb_candidates`); the others are
        /// local and global steps as before.
        #[range(min = 0.0, max = 1.0)]
        climb_share: f64 = 0.5,
        /// At the start of a run in batches, while fewer outcomes are back than `early_until`
        /// times the configurations in flight, each pick is the model's choice among this
        /// many random configurations instead of a local or global step. The first outcomes
        /// back are those quickest to evaluate (on a GPU, to compile), and where those are the
        /// poorest kernels, climbing from the best of them wastes the picks. 0 (the default):
        /// never; 16 traded one shortfall for another (docs/strategies.md, "Tenth session").
        early_candidates: usize = 0,
        /// Outcomes back per configuration in flight below which a pick is an early one.
        #[range(min = 0.0)]
        early_until: f64 = 0.5,
        /// Draws of configurations one step away in several parameters, scored in a local step.
        adjacent: usize = 200,
        /// Chance that each parameter moves in such a draw.
        #[range(min = 0.0, max = 1.0)]
        adjacent_rate: f64 = 0.5,
        /// Relative difference that counts as measurement noise when a run without a budget
        /// decides whether more evaluations could still pay (0.02: beating the best by 2%).
        #[range(min = 0.0, max = 1.0)]
        noise: f64 = 0.02,
        /// Observations without an improvement beyond the noise after which local steps
        /// climb only from local optima: configurations no evaluated neighbour beats (0:
        /// never). Chosen on the fitting landscapes (docs/strategies.md).
        optima_after: usize = 1,
    }
}

/// Observations before which a run is never taken as stalled: the default budget, so runs of
/// up to 100 evaluations search as before.
const STALLED_AFTER: usize = 100;

/// Observations up to which the forest is refitted to the whole history before every
/// proposal. The comparison's budgets (25 to 200) all fall below it, so the searches that
/// chose the options are unchanged; past it the cost of a fit starts to tell.
const FULL_HISTORY: usize = 200;

/// Refits per doubling of the history past [`FULL_HISTORY`]: one every history / this many
/// observations, which makes the total cost of fitting grow with the log of the evaluations.
const REFITS_PER_DOUBLING: usize = 50;

/// Observations a forest is fitted to at most, past [`FULL_HISTORY`].
const FIT_LIMIT: usize = 256;

#[derive(Debug)]
pub(crate) struct DefaultSearch {
    options: DefaultOptions,
    /// The last forest fitted, kept between refits past [`FULL_HISTORY`].
    forest: Option<Fitted>,
    /// The estimated chance, at the last proposal, that an unevaluated configuration beats
    /// the best by more than the noise.
    chance: Option<f64>,
    /// The model's record of chances given and improvements delivered.
    calibration: Calibration,
    /// The best target observed (on the scale the model is fitted on).
    best_target: Option<f64>,
    /// Observations when the best last improved by more than the noise.
    improved_at: usize,
    /// The head of the climb of a stalled run (`climb_candidates`).
    climb: Option<ConfigId>,
    /// Outcomes at other sizes of the same kernel, fitted beside this run's own, their
    /// value indexes followed by their size's columns ([`SizeColumns`]).
    prior: Vec<Prior>,
    /// This run's size as features of the model, beside the other sizes'.
    size: SizeColumns,
}

/// One outcome of a configuration at another problem size of the same kernel (a many-shape
/// run): its parameters' value indexes in this run's space, its score relative to the
/// best at that size (`ln(score / best)`, 0 for that size's best), or `None` where it failed,
/// and that size's problem variables (`size`, in the order of the run's own; empty where the
/// size is not a feature of the model).
/// The forest is fitted to these beside the run's own outcomes, placed relative to the run's
/// own best, so that before the run knows much the model already prefers what was good at
/// the other sizes; once the run has `initial_samples` successes of its own, its forest is
/// fitted to those alone. A many-shape run passes the nearest size's outcomes without their
/// size: outcomes of every earlier size with the size as a feature did worse where the
/// prior matters most, at 10 evaluations (docs/strategies.md, "The problem size as a feature").
#[derive(Debug, Clone, PartialEq)]
pub struct Prior {
    pub indexes: Vec<u32>,
    pub relative: Option<f64>,
    pub size: Vec<f64>,
}

/// The problem variables that differ between a run and its prior, as features of the model:
/// each variable's distance from this run's value, in half octaves (`round(2 |log2(v /
/// here)|)`; for a value that is not positive, 0 where equal and 1 otherwise). A split on a
/// distance keeps this run's size (distance 0) with the sizes nearest it, so the model can
/// set farther sizes apart without ever grouping this one with them before the nearer ones.
#[derive(Debug, Default)]
struct SizeColumns {
    /// This run's columns (all 0), appended to the value indexes of every configuration it
    /// scores.
    here: Vec<u32>,
    /// Distinct values of each column.
    cardinality: Vec<usize>,
}

impl SizeColumns {
    /// The columns of the variables of `here` (this run's size) that take another value in
    /// `prior`, whose rows get their own distances appended to their value indexes.
    fn new(here: &[f64], prior: &mut [Prior]) -> SizeColumns {
        let mut columns = SizeColumns::default();
        let mut distances: Vec<Vec<u32>> = vec![Vec::new(); prior.len()];
        for (variable, value) in here.iter().enumerate() {
            let distance = |row: &Prior| {
                let other = row.size.get(variable).copied().unwrap_or(f64::NAN);
                match *value > 0.0 && other > 0.0 {
                    true => (2.0 * (other / value).log2().abs()).round() as u32,
                    false => u32::from(other.total_cmp(value).is_ne()),
                }
            };
            let farthest = prior.iter().map(distance).max().unwrap_or(0);
            if farthest == 0 {
                continue;
            }
            columns.here.push(0);
            columns.cardinality.push(farthest as usize + 1);
            for (row, distances) in prior.iter().zip(&mut distances) {
                distances.push(distance(row));
            }
        }
        for (row, distances) in prior.iter_mut().zip(distances) {
            row.indexes.extend(distances);
        }
        columns
    }
}

/// A forest and what it was fitted to.
#[derive(Debug)]
struct Fitted {
    forest: Forest,
    /// History length when it was fitted.
    history: usize,
}

/// The forest to score with, and the best target observed so far.
struct Model<'a> {
    forest: &'a Forest,
    best: f64,
    /// The size's columns appended to a configuration's value indexes.
    size: &'a [u32],
}

impl Model<'_> {
    /// The candidate with the highest expected improvement (the first of equals).
    fn pick(&self, space: &Space, candidates: impl IntoIterator<Item = ConfigId>) -> Option<ConfigId> {
        let mut top: Option<(ConfigId, f64)> = None;
        for id in candidates {
            let (mean, deviation) = self.forest.predict(&features(space, id, self.size));
            let score = expected_improvement(self.best, mean, deviation);
            if top.is_none_or(|(_, best)| score > best) {
                top = Some((id, score));
            }
        }
        top.map(|(id, _)| id)
    }
}

impl DefaultSearch {
    pub(crate) fn new(options: DefaultOptions) -> DefaultSearch {
        DefaultSearch {
            options,
            forest: None,
            chance: None,
            calibration: Calibration::default(),
            best_target: None,
            improved_at: 0,
            climb: None,
            prior: Vec::new(),
            size: SizeColumns::default(),
        }
    }

    /// The strategy at the problem size `size` (its variables, in the order of the prior's),
    /// with outcomes at other sizes to learn from (see [`Prior`]).
    pub(crate) fn with_prior(options: DefaultOptions, mut prior: Vec<Prior>, size: &[f64]) -> DefaultSearch {
        let size = SizeColumns::new(size, &mut prior);
        DefaultSearch { prior, size, ..DefaultSearch::new(options) }
    }

    /// Refits the forest when [`refit_due`] says so; `valid[r]` tells whether observation
    /// `r` (of `ids` and `targets`) succeeded.
    fn refit(&mut self, context: &mut Context<'_>, ids: &[ConfigId], targets: &[f64], valid: &[bool]) {
        let history = context.history;
        let fitted_at = self.forest.as_ref().map(|f| f.history);
        if refit_due(fitted_at, history.len()) {
            let rows = training_rows(targets, valid, context.rng);
            let space = context.space;
            let mut features: Vec<Vec<u32>> = rows.iter().map(|r| features(space, ids[*r], &self.size.here)).collect();
            let mut targets_fitted: Vec<f64> = rows.iter().map(|r| targets[*r]).collect();
            // The other sizes' outcomes stand in for the random initial design: once the run
            // has as many successes of its own, its model is its own (a size's landscape is
            // not its neighbour's, and fitted as if it were, the neighbour misleads).
            let successes = valid.iter().filter(|v| **v).count();
            if !self.prior.is_empty() && log_scale(history) && successes < self.options.initial_samples {
                let own = || targets.iter().zip(valid).filter(|(_, v)| **v).map(|(t, _)| *t);
                let (best, worst) = (own().fold(f64::INFINITY, f64::min), own().fold(f64::NEG_INFINITY, f64::max));
                if best.is_finite() {
                    for row in &self.prior {
                        features.push(row.indexes.clone());
                        targets_fitted.push(row.relative.map_or(worst, |relative| best + relative));
                    }
                }
            }
            let cardinality: Vec<usize> =
                space.params().iter().map(|p| p.len()).chain(self.size.cardinality.iter().copied()).collect();
            let shape = ForestShape {
                trees: self.options.trees,
                min_leaf: self.options.min_leaf,
                feature_fraction: self.options.feature_fraction,
            };
            let forest = Forest::fit(&features, &targets_fitted, &cardinality, shape, context.rng);
            self.forest = Some(Fitted { forest, history: history.len() });
        }
    }

    /// The model's pick among the unevaluated neighbours of the best configuration that
    /// still has some (`ranked` holds the valid observations, best first), and among
    /// random configurations one step away from it in several parameters.
    fn local(
        &self,
        context: &mut Context<'_>,
        model: &Model<'_>,
        ranked: &[ConfigId],
        taken: &[ConfigId],
        optima: bool,
    ) -> Option<ConfigId> {
        let space = context.space;
        let history = context.history;
        let is_new = |id: &ConfigId| !history.is_known(*id) && !taken.contains(id);
        for parent in ranked {
            let neighbours = space.neighbours(*parent, Neighbourhood::Hamming);
            if optima {
                let own = history.score(*parent).flatten().unwrap_or(f64::INFINITY);
                if neighbours.iter().any(|n| history.score(*n).flatten().is_some_and(|s| s < own)) {
                    continue;
                }
            }
            let mut candidates: Vec<ConfigId> = neighbours.into_iter().filter(is_new).collect();
            if candidates.is_empty() {
                continue;
            }
            for _ in 0..self.options.adjacent {
                match moves::adjacent_step(space, context.rng, *parent, self.options.adjacent_rate) {
                    Some(id) if is_new(&id) && !candidates.contains(&id) => candidates.push(id),
                    _ => {}
                }
            }
            return model.pick(space, candidates);
        }
        None
    }

    /// The next step of the climb of a stalled run: the model's pick among the unevaluated
    /// neighbours of the climb's head, once the head has moved to its best evaluated
    /// neighbour for as long as one beats it; or, where the head has no unevaluated
    /// neighbour left (or failed), the start of a new climb; or none while the head is in
    /// flight.
    fn climb(
        &self,
        context: &mut Context<'_>,
        model: &Model<'_>,
        taken: &[ConfigId],
        head: &mut Option<ConfigId>,
    ) -> Option<ConfigId> {
        let space = context.space;
        let history = context.history;
        let is_new = |id: &ConfigId| !history.is_known(*id) && !taken.contains(id);
        while let Some(at) = *head {
            // A head still in flight (in a batch) is not climbed from before its outcome is
            // back: the pick is a local or global step instead. A failed head ends the climb.
            let own = match history.score(at) {
                Some(Some(score)) => score,
                Some(None) => break,
                None => return None,
            };
            let neighbours = space.neighbours(at, Neighbourhood::Hamming);
            let better = neighbours
                .iter()
                .filter_map(|n| history.score(*n).flatten().map(|s| (*n, s)))
                .filter(|(_, s)| *s < own)
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((next, _)) = better {
                *head = Some(next);
                continue;
            }
            let candidates: Vec<ConfigId> = neighbours.into_iter().filter(is_new).collect();
            if candidates.is_empty() {
                break;
            }
            return model.pick(space, candidates);
        }
        let start = self.sampled(context, model, taken, self.options.climb_candidates);
        *head = start;
        start
    }

    /// The model's pick among random unevaluated configurations: `random_candidates` of
    /// them, or `explore_candidates` once the run has `stalled`.
    fn global(
        &self,
        context: &mut Context<'_>,
        model: &Model<'_>,
        taken: &[ConfigId],
        stalled: bool,
    ) -> Option<ConfigId> {
        let count = match stalled && self.options.explore_candidates > 0 {
            true => self.options.explore_candidates,
            false => self.options.random_candidates,
        };
        self.sampled(context, model, taken, count)
    }

    /// The model's pick among `count` random unevaluated configurations.
    fn sampled(
        &self,
        context: &mut Context<'_>,
        model: &Model<'_>,
        taken: &[ConfigId],
        count: usize,
    ) -> Option<ConfigId> {
        let mut candidates = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            match fresh(context, taken) {
                Some(id) => candidates.push(id),
                None => break,
            }
        }
        model.pick(context.space, candidates)
    }
}

impl Strategy for DefaultSearch {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if exhausted(context) || n == 0 {
            return Vec::new();
        }
        let history = context.history;
        let mut ranked: Vec<Observation> =
            history.observations().iter().filter(|o| o.score.is_some()).copied().collect();
        // Configurations in flight count towards the initial design: in batches of 16 the
        // first ask already holds more random ones than the design needs, and the model
        // guides every later pick once `guided_after` (2) of them have succeeded.
        // With outcomes at other sizes to learn from, the model guides from the start.
        let initial_samples = match self.prior.is_empty() {
            true => self.options.initial_samples,
            false => self.options.guided_after,
        };
        if history.len() + history.pending_count() < initial_samples || ranked.len() < self.options.guided_after {
            return fresh_batch(context, n);
        }
        ranked.sort_by(|a, b| a.score.unwrap_or(f64::INFINITY).total_cmp(&b.score.unwrap_or(f64::INFINITY)));
        let ranked: Vec<ConfigId> = ranked.into_iter().map(|o| o.id).collect();
        let (ids, targets) = targets(history);
        let valid: Vec<bool> = ids.iter().map(|id| history.score(*id).flatten().is_some()).collect();
        self.refit(context, &ids, &targets, &valid);
        let Some(fitted) = &self.forest else { return fresh_batch(context, n) };
        let best = targets.iter().zip(&valid).filter(|(_, v)| **v).map(|(t, _)| *t).fold(f64::INFINITY, f64::min);
        let margin = match log_scale(history) {
            true => self.options.noise.ln_1p(),
            false => self.options.noise * best.abs(),
        };
        let size = &self.size.here;
        let promised = most_promising(&fitted.forest, context.space, size, history, &ranked, best, margin);
        // A run that still improved in its second half is not converged, whatever a young
        // model believes: it may be sure of itself after a few dozen observations.
        self.chance = match history.len() < 2 * self.improved_at {
            true => Some(1.0),
            false => Some(self.calibration.calibrate(promised)),
        };
        let model = Model { forest: &fitted.forest, best, size };
        let optima = self.options.optima_after > 0 && history.len() >= self.improved_at + self.options.optima_after;
        let stalled = history.len() >= STALLED_AFTER && history.len() >= 2 * self.improved_at;
        let early = self.options.early_candidates > 0
            && (history.len() as f64) < self.options.early_until * history.pending_count() as f64;
        let mut head = self.climb;
        let mut batch = Vec::with_capacity(n);
        while batch.len() < n {
            let pick = if early {
                self.sampled(context, &model, &batch, self.options.early_candidates)
            } else {
                let climbing =
                    stalled && self.options.climb_candidates > 0 && context.rng.chance(self.options.climb_share);
                let climbed = match climbing {
                    true => self.climb(context, &model, &batch, &mut head),
                    false => None,
                };
                climbed
                    .or_else(|| match context.rng.chance(self.options.global_share) {
                        true => None,
                        false => self.local(context, &model, &ranked, &batch, optima),
                    })
                    .or_else(|| self.global(context, &model, &batch, stalled))
            };
            match pick {
                Some(id) => batch.push(id),
                None => break,
            }
        }
        self.climb = head;
        for id in &batch {
            let features = features(context.space, *id, &self.size.here);
            self.calibration.proposed(*id, chance(&fitted.forest, &features, best, margin));
        }
        batch
    }

    fn tell(&mut self, context: &mut Context<'_>, observation: Observation) {
        let log = log_scale(context.history);
        let Some(score) = observation.score else {
            self.calibration.observed(observation.id, false);
            return;
        };
        let target = if log { score.signum() * score.abs().ln() } else { score };
        let margin = match log {
            true => self.options.noise.ln_1p(),
            false => self.options.noise * target.abs(),
        };
        let improved = self.best_target.is_none_or(|best| target < best - margin);
        self.calibration.observed(observation.id, improved);
        if improved {
            self.improved_at = context.history.len();
        }
        if self.best_target.is_none_or(|best| target < best) {
            self.best_target = Some(target);
        }
    }

    fn improvement_chance(&self) -> Option<f64> {
        self.chance
    }

    fn stops_by_itself(&self) -> bool {
        true
    }
}

/// Whether the forest fitted at history length `fitted_at` (`None`: never) is to be refitted
/// now that the history holds `history` observations: always up to [`FULL_HISTORY`], then
/// once every `history / REFITS_PER_DOUBLING` observations.
fn refit_due(fitted_at: Option<usize>, history: usize) -> bool {
    match fitted_at {
        None => true,
        Some(_) if history <= FULL_HISTORY => true,
        Some(at) => history >= at + (history / REFITS_PER_DOUBLING).max(1),
    }
}

/// The rows (indexes into `targets`) a forest is fitted to: all of them, in order, up to
/// [`FIT_LIMIT`]; beyond it the best quarter of the valid ones (`valid[r]`) and a uniform
/// sample of the others, valid or failed, to make up the limit.
fn training_rows(targets: &[f64], valid: &[bool], rng: &mut Rng) -> Vec<usize> {
    let count = targets.len();
    if count <= FIT_LIMIT.max(FULL_HISTORY) {
        return (0..count).collect();
    }
    let mut ranked: Vec<usize> = (0..count).filter(|r| valid[*r]).collect();
    ranked.sort_by(|a, b| targets[*a].total_cmp(&targets[*b]));
    let elite = ranked.len().min(FIT_LIMIT / 4);
    let mut kept = vec![false; count];
    for r in &ranked[..elite] {
        kept[*r] = true;
    }
    let mut others: Vec<usize> = (0..count).filter(|r| !kept[*r]).collect();
    rng.shuffle(&mut others);
    let mut rows: Vec<usize> = ranked[..elite].iter().chain(&others[..FIT_LIMIT - elite]).copied().collect();
    rows.sort_unstable();
    rows
}

#[cfg(test)]
mod tests;
