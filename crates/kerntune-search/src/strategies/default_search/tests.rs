//! Tests of the default strategy: the refit schedule, the prior of a many-shape run, the
//! local-optima rule, climbs and the rules for batches.

use kerntune_space::{Param, Value};

use super::*;
use crate::History;

/// Refits over a run of `evaluations`, one evaluation per ask, as the schedule decides.
fn refits(evaluations: usize) -> usize {
    let mut fitted_at = None;
    let mut count = 0;
    for history in 0..evaluations {
        if refit_due(fitted_at, history) {
            fitted_at = Some(history);
            count += 1;
        }
    }
    count
}

#[test]
fn refits_before_every_proposal_up_to_two_hundred_evaluations() {
    assert_eq!(refits(FULL_HISTORY + 1), FULL_HISTORY + 1);
}

#[test]
fn refits_grow_with_the_log_of_the_evaluations_past_two_hundred() {
    // Refitting before every proposal would give 4,362 and 100,000 refits; one every
    // history / 50 gives about 200 + 50 ln(evaluations / 200).
    assert!(refits(4_362) < 400, "{} refits for 4,362 evaluations", refits(4_362));
    assert!(refits(100_000) < 600, "{} refits for 100,000 evaluations", refits(100_000));
}

#[test]
fn a_large_history_is_fitted_through_its_best_quarter_and_a_sample_with_failures() {
    let mut rng = Rng::seeded(5);
    let count = 3_000;
    let targets: Vec<f64> = (0..count).map(|r| ((r * 7_919) % count) as f64).collect();
    let valid: Vec<bool> = (0..count).map(|r| r % 3 != 0).collect();
    let rows = training_rows(&targets, &valid, &mut rng);
    assert_eq!(rows.len(), FIT_LIMIT);
    let mut best: Vec<usize> = (0..count).filter(|r| valid[*r]).collect();
    best.sort_by(|a, b| targets[*a].total_cmp(&targets[*b]));
    for r in &best[..FIT_LIMIT / 4] {
        assert!(rows.contains(r), "best row {r} left out");
    }
    let failures = rows.iter().filter(|r| !valid[**r]).count();
    assert!(failures > FIT_LIMIT / 8, "only {failures} failures among {} rows", rows.len());
}

#[test]
fn a_small_history_is_fitted_whole_and_in_order() {
    let mut rng = Rng::seeded(6);
    let targets = vec![1.0; FULL_HISTORY];
    let rows = training_rows(&targets, &[true; FULL_HISTORY], &mut rng);
    assert_eq!(rows, (0..FULL_HISTORY).collect::<Vec<_>>());
}

#[test]
fn the_strategy_refits_on_the_schedule_through_a_whole_space() {
    let ints = |name: &str, n: i64| Param::new(name, (0..n).map(Value::Int).collect()).expect("param");
    let space = Space::new(vec![ints("a", 16), ints("b", 16), ints("c", 4)], &[] as &[&str]).expect("space");
    let options = DefaultOptions { trees: 3, random_candidates: 20, adjacent: 10, ..DefaultOptions::default() };
    let mut strategy = DefaultSearch::new(options);
    let (mut rng, mut history) = (Rng::seeded(7), History::new());
    let (mut fits, mut fitted_at) = (0, None);
    loop {
        let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
        let Some(id) = strategy.ask(&mut context, 1).pop() else { break };
        let now = strategy.forest.as_ref().map(|f| f.history);
        if now != fitted_at {
            fits += 1;
            fitted_at = now;
        }
        let score = (id.index() % 13 != 0).then(|| 1.0 + (id.index() as f64 * 0.37).sin().abs());
        history.observe(Observation { id, score });
    }
    assert_eq!(history.len(), space.len());
    // A refit per proposal would be about 1,014 (all but the random start); the
    // schedule allows about 200 + 50 ln(1,024 / 200), some 280.
    assert!(fits < 350, "{fits} refits over {} evaluations", space.len());
}

/// A space of one parameter x in 0..50, and outcomes at another size whose best is x = 37.
fn line_with_prior() -> (Space, Vec<Prior>) {
    let space = Space::new(vec![Param::new("x", (0..50).map(Value::Int).collect()).expect("param")], &[] as &[&str])
        .expect("space");
    let prior = (0..50u32).map(|x| Prior {
        indexes: vec![x],
        relative: Some((x as f64 - 37.0).abs() * 0.05),
        size: Vec::new(),
    });
    (space, prior.collect())
}

/// The x that `strategy` proposes on the line after the two `observed` outcomes (x, score).
fn first_guided_pick(strategy: &mut DefaultSearch, space: &Space, observed: [(usize, f64); 2]) -> i64 {
    let (mut rng, mut history) = (Rng::seeded(11), History::new());
    let ids: Vec<ConfigId> = space.ids().collect();
    for (x, score) in observed {
        history.start(ids[x]);
        history.observe(Observation { id: ids[x], score: Some(score) });
    }
    let mut context = Context { space, rng: &mut rng, history: &history, remaining: None };
    strategy.ask(&mut context, 1)[0].index() as i64
}

#[test]
fn outcomes_at_another_size_guide_the_first_picks_to_what_was_best_there() {
    let (space, prior) = line_with_prior();
    let mut strategy = DefaultSearch::with_prior(DefaultOptions::default(), prior, &[]);
    let pick = first_guided_pick(&mut strategy, &space, [(3, 10.0), (45, 12.0)]);
    assert!((pick - 37).abs() <= 2, "picked x = {pick}, far from the other size's best (37)");
}

#[test]
fn outcomes_at_another_size_are_set_aside_once_the_run_has_its_own_initial_design() {
    let (space, prior) = line_with_prior();
    let ids: Vec<ConfigId> = space.ids().collect();
    let pick = |own: usize, prior: Vec<Prior>| -> ConfigId {
        let mut history = History::new();
        for (x, id) in ids.iter().enumerate().take(own) {
            history.start(*id);
            history.observe(Observation { id: *id, score: Some(10.0 + x as f64) });
        }
        let mut rng = Rng::seeded(11);
        let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
        DefaultSearch::with_prior(DefaultOptions::default(), prior, &[]).ask(&mut context, 1)[0]
    };
    let initial = DefaultOptions::default().initial_samples;
    assert_ne!(pick(initial - 1, prior.clone()), pick(initial - 1, Vec::new()), "the prior guides a young run");
    assert_eq!(pick(initial, prior), pick(initial, Vec::new()), "a run with its own design ignores the prior");
}

/// A space of two parameters of four values each.
fn four_by_four() -> Space {
    let ints = |name: &str| Param::new(name, (0..4).map(Value::Int).collect()).expect("param");
    Space::new(vec![ints("a"), ints("b")], &[] as &[&str]).expect("space")
}

/// A forest of five trees fitted to all of `history` on `space`, with the best target.
fn small_forest(space: &Space, history: &History, rng: &mut Rng) -> (Forest, f64) {
    let (ids, targets) = targets(history);
    let features: Vec<Vec<u32>> = ids.iter().map(|id| features(space, *id, &[])).collect();
    let cardinality: Vec<usize> = space.params().iter().map(|p| p.len()).collect();
    let shape = ForestShape { trees: 5, min_leaf: 1, feature_fraction: 1.0 };
    let forest = Forest::fit(&features, &targets, &cardinality, shape, rng);
    (forest, targets.iter().copied().fold(f64::INFINITY, f64::min))
}

/// A plateau and a basin below it: the best (0, 0) has every neighbour evaluated, (1, 0)
/// just behind it is one of those neighbours, and (3, 3) tops another basin at 2.0.
/// Climbing from whatever is best next expands (1, 0); climbing from local optima skips
/// it, beaten by its neighbour (0, 0), and expands (3, 3).
#[test]
fn once_stalled_local_steps_climb_from_local_optima_not_from_the_plateau() {
    let space = four_by_four();
    let at = |a: usize, b: usize| space.id_of(&[a, b]).expect("in the space");
    let mut history = History::new();
    let scored = [
        ((0, 0), 1.0),
        ((1, 0), 1.1),
        ((3, 3), 2.0),
        ((2, 0), 3.0),
        ((3, 0), 3.0),
        ((0, 1), 3.0),
        ((0, 2), 3.0),
        ((0, 3), 3.0),
        ((1, 3), 4.0),
    ];
    for ((a, b), score) in scored {
        history.observe(Observation { id: at(a, b), score: Some(score) });
    }
    let ranked: Vec<ConfigId> = scored.iter().map(|((a, b), _)| at(*a, *b)).collect();
    let mut rng = Rng::seeded(3);
    let (forest, best) = small_forest(&space, &history, &mut rng);
    let model = Model { forest: &forest, best, size: &[] };
    let strategy = DefaultSearch::new(DefaultOptions { adjacent: 0, ..DefaultOptions::default() });
    let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
    let plateau = [at(1, 1), at(1, 2)];
    let basin = [at(2, 3), at(3, 1), at(3, 2)];
    let pick = strategy.local(&mut context, &model, &ranked, &[], false).expect("a pick");
    assert!(plateau.contains(&pick), "climbing from the next best picked {}", space.describe(pick));
    let pick = strategy.local(&mut context, &model, &ranked, &[], true).expect("a pick");
    assert!(basin.contains(&pick), "climbing from local optima picked {}", space.describe(pick));
}

/// A 4 x 4 space: the climb's head (0, 0) is beaten by its evaluated neighbour (1, 0), so
/// the climb moves there and picks among (1, 0)'s unevaluated neighbours; once (1, 0)'s
/// neighbours are all evaluated and none beats it, or where the head failed, it starts
/// again away from the head.
#[test]
fn a_climb_moves_to_a_better_neighbour_and_starts_again_at_the_top() {
    let space = four_by_four();
    let at = |a: usize, b: usize| space.id_of(&[a, b]).expect("in the space");
    let mut history = History::new();
    for ((a, b), score) in [((0, 0), 2.0), ((1, 0), 1.5), ((0, 1), 3.0), ((3, 3), 1.0)] {
        history.observe(Observation { id: at(a, b), score: Some(score) });
    }
    let mut rng = Rng::seeded(3);
    let (forest, best) = small_forest(&space, &history, &mut rng);
    let model = Model { forest: &forest, best, size: &[] };
    let strategy = DefaultSearch::new(DefaultOptions { climb_candidates: 1, ..DefaultOptions::default() });
    let step = |history: &History, head: &mut Option<ConfigId>, rng: &mut Rng| {
        let mut context = Context { space: &space, rng, history, remaining: None };
        strategy.climb(&mut context, &model, &[], head)
    };
    let mut head = Some(at(0, 0));
    let pick = step(&history, &mut head, &mut rng).expect("a pick");
    assert_eq!(head, Some(at(1, 0)), "the climb stayed at (0, 0)");
    let climbed = [at(2, 0), at(3, 0), at(1, 1), at(1, 2), at(1, 3)];
    assert!(climbed.contains(&pick), "picked {} from (1, 0)", space.describe(pick));
    // Every neighbour of (1, 0) evaluated, none better: a new start.
    for id in climbed {
        history.observe(Observation { id, score: Some(4.0) });
    }
    let pick = step(&history, &mut head, &mut rng).expect("a pick");
    assert_eq!(head, Some(pick));
    assert!(!climbed.contains(&pick) && !history.is_known(pick), "a new start, not {}", space.describe(pick));
    // Until the start's outcome is back, the climb waits (in a batch, the pick is another step).
    history.start(pick);
    assert_eq!(step(&history, &mut head, &mut rng), None);
    assert_eq!(head, Some(pick));
    // A failed head ends its climb too.
    history.observe(Observation { id: pick, score: None });
    let again = step(&history, &mut head, &mut rng).expect("a pick");
    assert_eq!(head, Some(again));
    assert!(!history.is_known(again), "started again from {}", space.describe(again));
}

#[test]
fn in_a_batch_the_model_guides_once_guided_after_configurations_succeeded() {
    let (space, history) = first_batch();
    let mut rng = Rng::seeded(8);
    let options = DefaultOptions { trees: 3, random_candidates: 20, adjacent: 10, ..DefaultOptions::default() };
    let mut shipped = DefaultSearch::new(options.clone());
    let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
    assert_eq!(shipped.ask(&mut context, 1).len(), 1);
    assert!(shipped.forest.is_some(), "two successes are enough to guide by default");
    let mut waiting = DefaultSearch::new(DefaultOptions { guided_after: 3, ..options });
    assert_eq!(waiting.ask(&mut context, 1).len(), 1);
    assert!(waiting.forest.is_none(), "with two successes of three needed, the pick is random");
}

/// A first batch of 16 in flight on an 8 x 8 space, three back (one failed, the best is
/// configuration 0).
fn first_batch() -> (Space, History) {
    let ints = |name: &str| Param::new(name, (0..8).map(Value::Int).collect()).expect("param");
    let space = Space::new(vec![ints("a"), ints("b")], &[] as &[&str]).expect("space");
    let mut history = History::new();
    for index in 0..16 {
        history.start(ConfigId(index));
    }
    for (index, score) in [(0, Some(1.0)), (1, None), (2, Some(2.0))] {
        history.observe(Observation { id: ConfigId(index), score });
    }
    (space, history)
}

#[test]
fn early_in_a_batch_picks_are_not_climbs_from_the_first_outcomes_back() {
    let (space, history) = first_batch();
    let neighbours = space.neighbours(ConfigId(0), Neighbourhood::Hamming);
    // Only local steps, and those only among the best's neighbours.
    let options = DefaultOptions {
        trees: 3,
        global_share: 0.0,
        adjacent: 0,
        random_candidates: 20,
        early_candidates: 16,
        ..DefaultOptions::default()
    };
    let picks = |options: &DefaultOptions| -> Vec<ConfigId> {
        (0..10)
            .map(|seed| {
                let mut rng = Rng::seeded(seed);
                let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
                DefaultSearch::new(options.clone()).ask(&mut context, 1)[0]
            })
            .collect()
    };
    let climbing = picks(&DefaultOptions { early_candidates: 0, ..options.clone() });
    assert!(climbing.iter().all(|p| neighbours.contains(p)), "without the rule every pick climbs from the best");
    let early = picks(&options);
    let away = early.iter().filter(|p| !neighbours.contains(p)).count();
    assert!(away > 0, "early picks all climbed from the best: {early:?}");
    // Once half as many outcomes are back as are in flight, the picks climb again.
    let mut later = history;
    for index in 3..8 {
        later.observe(Observation { id: ConfigId(index), score: Some(3.0) });
    }
    let mut rng = Rng::seeded(0);
    let mut context = Context { space: &space, rng: &mut rng, history: &later, remaining: None };
    let pick = DefaultSearch::new(options).ask(&mut context, 1)[0];
    assert!(neighbours.contains(&pick), "with 8 back and 8 in flight the pick climbs from the best");
}

/// The picks of a run one at a time with seed `seed`: each pick is asked, scored by
/// `score` and told before the next.
fn picks_one_at_a_time(
    space: &Space,
    options: DefaultOptions,
    seed: u64,
    evaluations: usize,
    score: impl Fn(ConfigId) -> f64,
) -> Vec<ConfigId> {
    let mut strategy = DefaultSearch::new(options);
    let (mut rng, mut history) = (Rng::seeded(seed), History::new());
    let mut asked = Vec::new();
    for _ in 0..evaluations {
        let mut context = Context { space, rng: &mut rng, history: &history, remaining: None };
        let id = strategy.ask(&mut context, 1)[0];
        let observation = Observation { id, score: Some(score(id)) };
        history.start(id);
        history.observe(observation);
        let mut context = Context { space, rng: &mut rng, history: &history, remaining: None };
        strategy.tell(&mut context, observation);
        asked.push(id);
    }
    asked
}

/// The picks of a run of 200 one at a time on a rugged landscape, where improvements soon
/// become rare and the run stalls, with `options` changed by `change`.
fn stalling_run(change: impl Fn(&mut DefaultOptions)) -> Vec<ConfigId> {
    let ints = |name: &str, n: i64| Param::new(name, (0..n).map(Value::Int).collect()).expect("param");
    let space = Space::new(vec![ints("a", 8), ints("b", 8), ints("c", 4)], &[] as &[&str]).expect("space");
    let mut options = DefaultOptions { trees: 3, random_candidates: 50, adjacent: 10, ..DefaultOptions::default() };
    change(&mut options);
    picks_one_at_a_time(&space, options, 4, 200, |id| ((id.index() * 7_919) % 257) as f64)
}

#[test]
fn exploring_once_stalled_leaves_the_first_hundred_picks_alone_and_changes_later_ones() {
    let (shipped, exploring) = (stalling_run(|_| {}), stalling_run(|o| o.explore_candidates = 3));
    assert_eq!(shipped[..STALLED_AFTER], exploring[..STALLED_AFTER]);
    assert_ne!(shipped, exploring, "a run that stalled past 100 evaluations explores");
}

#[test]
fn climbing_once_stalled_leaves_the_first_hundred_picks_alone_and_changes_later_ones() {
    let (plain, climbing) = (stalling_run(|o| o.climb_candidates = 0), stalling_run(|o| o.climb_candidates = 1));
    assert_eq!(plain[..STALLED_AFTER], climbing[..STALLED_AFTER]);
    assert_ne!(plain, climbing, "a run that stalled past 100 evaluations climbs");
}

#[test]
fn one_at_a_time_the_early_rule_changes_nothing() {
    let ints = |name: &str| Param::new(name, (0..6).map(Value::Int).collect()).expect("param");
    let space = Space::new(vec![ints("a"), ints("b"), ints("c")], &[] as &[&str]).expect("space");
    let search = |early_candidates: usize| -> Vec<ConfigId> {
        let options = DefaultOptions {
            trees: 3,
            random_candidates: 20,
            adjacent: 10,
            early_candidates,
            ..DefaultOptions::default()
        };
        picks_one_at_a_time(&space, options, 3, 40, |id| {
            let [a, b, c] = space.indexes(id)[..] else { panic!("three parameters") };
            ((a * 7 + b * 3 + c * 5) % 11) as f64
        })
    };
    assert_eq!(search(16), search(0));
}

#[test]
fn problem_variables_that_differ_become_columns_of_their_distance_in_half_octaves() {
    let row = |x: u32, m: f64| Prior { indexes: vec![x], relative: Some(0.0), size: vec![m, 4096.0] };
    let mut prior = vec![row(0, 64.0), row(1, 8.0), row(2, 64.0)];
    let size = SizeColumns::new(&[32.0, 4096.0], &mut prior);
    assert_eq!((size.here, size.cardinality), (vec![0], vec![5]), "M is 1 and 2 octaves away; N the same everywhere");
    let indexes: Vec<Vec<u32>> = prior.into_iter().map(|row| row.indexes).collect();
    assert_eq!(indexes, [vec![0, 2], vec![1, 4], vec![2, 2]]);
}

#[test]
fn a_size_between_two_learns_from_the_nearer_ones_best() {
    let (space, prior) = line_with_prior();
    let sized = prior.into_iter().map(|row| Prior { size: vec![1.0], ..row });
    let far =
        (0..50u32).map(|x| Prior { indexes: vec![x], relative: Some((x as f64 - 5.0).abs() * 0.05), size: vec![8.0] });
    let mut strategy = DefaultSearch::with_prior(DefaultOptions::default(), sized.chain(far).collect(), &[2.0]);
    let pick = first_guided_pick(&mut strategy, &space, [(20, 10.0), (25, 12.0)]);
    assert!((pick - 37).abs() <= 2, "picked x = {pick}, far from the nearer size's best (37)");
}
