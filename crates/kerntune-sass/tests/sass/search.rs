//! The schedule searches, driven by a synthetic objective on the CPU: the
//! energy of a cubin is the sum of the positions of its memory instructions
//! (recognised by the opcode bits of their low word), so moving them earlier
//! lowers it. On a GPU the objective is a verified timing.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use kerntune_sass::{anneal, hill_climb, AnnealingOptions, Cubin, HillClimbOptions, Role, SassError, Verifier};

use crate::corpus::corpus;

const KERNEL: &str = "tiled_matmul";

fn opcode_bits(word: &[u8]) -> u64 {
    u64::from_le_bytes(word[..8].try_into().unwrap_or_default()) & 0xfff
}

/// The opcode bits of the kernel's memory instructions.
fn memory_opcodes() -> &'static BTreeSet<u64> {
    static OPCODES: OnceLock<BTreeSet<u64>> = OnceLock::new();
    OPCODES.get_or_init(|| {
        let schedule = corpus().schedule(KERNEL);
        schedule
            .listing()
            .instructions()
            .iter()
            .filter(|i| matches!(i.role, Role::Memory(_)))
            .map(|i| i.words[0] & 0xfff)
            .collect()
    })
}

fn load_positions(cubin: &[u8]) -> Result<f64, SassError> {
    let cubin = Cubin::parse(cubin)?;
    let text = cubin.kernel_text(KERNEL)?;
    let opcodes = memory_opcodes();
    Ok(text
        .chunks_exact(16)
        .enumerate()
        .filter(|(_, word)| opcodes.contains(&opcode_bits(word)))
        .map(|(position, _)| position as f64)
        .sum())
}

fn objective(cubin: &[u8]) -> Result<Option<f64>, SassError> {
    load_positions(cubin).map(Some)
}

fn verify_best(outcome: &kerntune_sass::SearchOutcome) {
    let corpus = corpus();
    Verifier::new(&corpus.nvdisasm, corpus.cubin(KERNEL), KERNEL)
        .and_then(|v| v.check(&outcome.best_cubin, &outcome.best_permutation))
        .expect("the best schedule is the permutation it claims to be");
}

#[test]
fn annealing_lowers_the_energy_reproducibly_and_returns_a_verified_schedule() {
    let start = corpus().schedule(KERNEL);
    let options = AnnealingOptions { initial_temperature: 1e-5, cooling: 0.95, steps: 60, moves_per_step: 2 };
    let outcome = anneal(&start, &mut objective, &options, 1).expect("search");
    assert!(outcome.best_energy < outcome.baseline_energy, "{} !< {}", outcome.best_energy, outcome.baseline_energy);
    assert_eq!(load_positions(&outcome.best_cubin).expect("energy"), outcome.best_energy);
    assert!(outcome.evaluations.iter().any(|e| e.accepted));
    let again = anneal(&start, &mut objective, &options, 1).expect("search");
    assert_eq!(again.best_moves, outcome.best_moves);
    assert_eq!(again.evaluations, outcome.evaluations);
    verify_best(&outcome);
}

#[test]
fn hill_climbing_with_restarts_lowers_the_energy_and_returns_a_verified_schedule() {
    let start = corpus().schedule(KERNEL);
    let options =
        HillClimbOptions { evaluations: 150, restarts: 3, perturbation: 4, patience: 40, min_improvement: 0.0 };
    let outcome = hill_climb(&start, &mut objective, &options, 9).expect("search");
    assert!(outcome.best_energy < outcome.baseline_energy);
    assert!(outcome.evaluations.len() <= options.evaluations + options.restarts);
    assert_eq!(load_positions(&outcome.best_cubin).expect("energy"), outcome.best_energy);
    let again = hill_climb(&start, &mut objective, &options, 9).expect("search");
    assert_eq!(again.best_moves, outcome.best_moves);
    verify_best(&outcome);
}

#[test]
fn the_leaders_are_the_fastest_verified_candidates_fastest_first() {
    let start = corpus().schedule(KERNEL);
    let original = start.to_cubin().expect("cubin");
    // Energies divisible by 5 fail verification, so that the leaders must skip them.
    let mut some_fail = |cubin: &[u8]| -> Result<Option<f64>, SassError> {
        let energy = load_positions(cubin)?;
        Ok((energy % 5.0 != 0.0).then_some(energy))
    };
    let options =
        HillClimbOptions { evaluations: 150, restarts: 3, perturbation: 4, patience: 40, min_improvement: 0.0 };
    let outcome = hill_climb(&start, &mut some_fail, &options, 9).expect("search");
    let leaders = &outcome.leaders;
    assert_eq!(leaders.len(), kerntune_sass::LEADERS, "150 candidates give a full list");
    assert!(leaders.windows(2).all(|pair| pair[0].energy <= pair[1].energy));
    let mut verified: Vec<f64> = outcome.evaluations.iter().filter_map(|e| e.energy).collect();
    verified.sort_by(f64::total_cmp);
    assert!(outcome.failed_verifications() > 0, "the objective never failed; the test proves nothing");
    let energies: Vec<f64> = leaders.iter().map(|leader| leader.energy).collect();
    assert_eq!(energies, verified[..kerntune_sass::LEADERS]);
    for leader in leaders {
        assert!(leader.cubin != original, "the original is not a leader");
        assert_eq!(load_positions(&leader.cubin).expect("energy"), leader.energy);
        assert!(!leader.moves.is_empty());
    }
    assert!(outcome.best_energy < outcome.baseline_energy);
    assert!(leaders[0].cubin == outcome.best_cubin, "the first leader is the search's best");
}

#[test]
fn a_candidate_that_fails_verification_is_never_the_result() {
    let start = corpus().schedule(KERNEL);
    let original = start.to_cubin().expect("cubin");
    let baseline = load_positions(&original).expect("energy");
    // Pretend that every schedule better than the original computes wrong
    // results: the search must return the original.
    let mut failing_when_better = |cubin: &[u8]| -> Result<Option<f64>, SassError> {
        let energy = load_positions(cubin)?;
        Ok((energy >= baseline).then_some(energy))
    };
    let options = AnnealingOptions { initial_temperature: 1e-5, cooling: 0.95, steps: 60, moves_per_step: 2 };
    let outcome = anneal(&start, &mut failing_when_better, &options, 4).expect("search");
    assert!(outcome.failed_verifications() > 0, "the objective never failed; the test proves nothing");
    assert_eq!(outcome.best_energy, baseline);
    assert_eq!(outcome.best_cubin, original);
    assert!(outcome.best_moves.is_empty());
    assert!(outcome.evaluations.iter().all(|e| e.energy.is_some() || !e.accepted));
}

#[test]
fn a_search_refuses_an_original_that_fails_verification() {
    let start = corpus().schedule(KERNEL);
    let mut always_wrong = |_: &[u8]| -> Result<Option<f64>, SassError> { Ok(None) };
    let result = anneal(&start, &mut always_wrong, &AnnealingOptions::default(), 0);
    assert!(matches!(result, Err(SassError::Objective(_))));
}
