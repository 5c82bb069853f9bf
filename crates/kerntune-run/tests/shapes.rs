//! A many-shape run replayed over landscapes of one matmul recorded at five sizes on an H200
//! (`data/landscapes/h200/sizes`): each size learns from the nearest size tuned before it
//! through the store, as the fronts' runs on a GPU do. Deterministic: every figure is a
//! replay of recorded outcomes.

use std::path::Path;

use kerntune_engine::SearchOptions;
use kerntune_run::{Simulation, Transfer, TunedShape};
use kerntune_store::{Landscape, Store};
use serde_json::json;

const SIZES: [(i64, &str); 5] = [
    (16, "matmul_m16_H200.json.gz"),
    (64, "matmul_m64_H200.json.gz"),
    (256, "matmul_m256_H200.json.gz"),
    (1024, "matmul_m1024_H200.json.gz"),
    (4096, "matmul_m4096_H200.json.gz"),
];

/// Per size after the first: optimum / best found within `budget` evaluations, and the
/// first configuration measured; every size learning from the nearest tuned before it, or
/// each on its own.
fn sweep(
    budget: usize,
    seed: u64,
    independent: bool,
    batch: usize,
) -> Vec<(f64, serde_json::Map<String, serde_json::Value>)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/landscapes/h200/sizes");
    let directory = tempfile::tempdir().expect("a temporary folder");
    let store = Store::open(&directory.path().join("results.db")).expect("a store");
    let mut tuned: Vec<TunedShape> = Vec::new();
    let mut found = Vec::new();
    for (m, file) in SIZES {
        let landscape = Landscape::read(&folder.join(file)).expect("a recorded landscape");
        let space = landscape.space().expect("its space");
        let shape = json!({"M": m}).as_object().cloned().expect("a shape");
        let search = SearchOptions { max_fevals: Some(budget), seed: Some(seed), ..SearchOptions::default() };
        let simulation = Simulation {
            landscape: &landscape,
            space: &space,
            search,
            store: Some(&store),
            realtime: None,
            batch,
            transfer: Some(Transfer { shape: shape.clone(), tuned: tuned.clone(), independent }),
        };
        let run = simulation.run(simulation.search().expect("a search"), &mut |_| {}, &|| false).expect("a replay");
        // Ten evaluations drawn at random may all fail: that run found nothing (ratio 0).
        let ratio = run.summary.best.as_ref().map_or(0.0, |b| landscape.optimum().expect("an optimum") / b.objective);
        let first = run.summary.trace.first().expect("an evaluation").id;
        let config =
            space.params().iter().zip(space.values(first)).map(|(p, v)| (p.name().to_string(), v.to_json())).collect();
        found.push((ratio, config));
        tuned.push(TunedShape { shape, tuning: run.tuning.expect("a tuning in the store") });
    }
    found.remove(0);
    found
}

#[test]
fn each_size_first_measures_the_best_configuration_of_the_size_before_it() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/landscapes/h200/sizes");
    let learning = sweep(10, 1, false, 1);
    for (index, (_, first)) in learning.iter().enumerate() {
        let before = Landscape::read(&folder.join(SIZES[index].1)).expect("a landscape");
        let space = before.space().expect("its space");
        // The best within the earlier size's own 10 evaluations, not its optimum: that is what
        // the store holds. It is at least a configuration of that size's space.
        let values = space.values_of_json(first);
        assert!(values.and_then(|v| space.id_of_values(&v)).is_some(), "size {}: {first:?}", index + 2);
    }
    let independent = sweep(10, 1, true, 1);
    assert_ne!(
        learning.iter().map(|(_, c)| c).collect::<Vec<_>>(),
        independent.iter().map(|(_, c)| c).collect::<Vec<_>>(),
        "learning changes what the sizes measure first"
    );
}

/// Mean optimum / best found over the sizes after the first, over `seeds` seeds.
fn mean(budget: usize, seeds: u64, independent: bool, batch: usize) -> f64 {
    let ratios: Vec<f64> =
        (0..seeds).flat_map(|seed| sweep(budget, seed, independent, batch)).map(|(r, _)| r).collect();
    ratios.iter().sum::<f64>() / ratios.len() as f64
}

#[test]
fn learning_from_the_nearest_size_finds_better_configurations_in_ten_evaluations_than_tuning_each_alone() {
    let (learning, alone) = (mean(10, 5, false, 1), mean(10, 5, true, 1));
    assert!(learning > alone + 0.05, "learning {learning:.3} against alone {alone:.3}");
}

/// In batches as wide as a GPU run's first (its compile pool), a size waits for the nearest
/// size's best to be measured before its search asks for more. With every size drawing the
/// same random configurations (one seed for the run, as on a GPU), learning and tuning alone
/// start level; the learning searches pull ahead once their models choose.
#[test]
fn in_batches_of_sixteen_learning_pulls_ahead_by_forty_evaluations() {
    let (learning, alone) = (mean(40, 3, false, 16), mean(40, 3, true, 16));
    assert!(learning > alone + 0.02, "learning {learning:.3} against alone {alone:.3}");
}
