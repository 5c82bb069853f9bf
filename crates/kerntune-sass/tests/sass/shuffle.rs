//! The CPU check of the whole rewriting path: random legal moves on every
//! kernel of the corpus, each result verified with nvdisasm to be exactly the
//! intended permutation of the original.

use kerntune_sass::{random_moves, shuffle, Verifier};

use crate::corpus::corpus;

/// Moves per shuffle; every shuffle is verified, so the total number of
/// verified moves per kernel is their sum.
const MOVE_COUNTS: &[usize] = &[1, 7, 40, 150, 400];

/// Shuffles `kernel` once per entry of `MOVE_COUNTS`, verifies every result,
/// and returns how many moves were applied in all.
fn shuffle_and_verify(kernel: &str) -> usize {
    let corpus = corpus();
    let original = corpus.cubin(kernel);
    let verifier = Verifier::new(&corpus.nvdisasm, original, kernel).expect("the original disassembles");
    let mut applied = 0;
    for (seed, &count) in MOVE_COUNTS.iter().enumerate() {
        let mut schedule = corpus.schedule(kernel);
        let moves = random_moves(&mut schedule, count, seed as u64).expect("legal moves apply");
        assert_eq!(moves.len(), count, "{kernel}: ran out of legal moves");
        let rewritten = schedule.to_cubin().expect("the schedule writes back");
        verifier
            .check(&rewritten, &schedule.permutation())
            .unwrap_or_else(|e| panic!("{kernel}, seed {seed}, {count} moves: {e}"));
        applied += moves.len();
    }
    eprintln!("{kernel}: {applied} random legal moves in {} verified cubins", MOVE_COUNTS.len());
    applied
}

#[test]
fn random_legal_moves_of_vector_add_give_the_intended_permutation() {
    assert_eq!(shuffle_and_verify("vector_add"), MOVE_COUNTS.iter().sum::<usize>());
}

#[test]
fn random_legal_moves_of_a_wgmma_matmul_give_the_intended_permutation() {
    assert_eq!(shuffle_and_verify("tiled_matmul"), MOVE_COUNTS.iter().sum::<usize>());
}

#[test]
fn random_legal_moves_of_a_cp_async_matmul_give_the_intended_permutation() {
    assert_eq!(shuffle_and_verify("pipelined_matmul"), MOVE_COUNTS.iter().sum::<usize>());
}

#[test]
fn random_legal_moves_of_a_looped_softmax_give_the_intended_permutation() {
    assert_eq!(shuffle_and_verify("looped_softmax"), MOVE_COUNTS.iter().sum::<usize>());
}

#[test]
fn random_legal_moves_of_relocated_code_give_the_intended_permutation() {
    assert_eq!(shuffle_and_verify("global_address"), MOVE_COUNTS.iter().sum::<usize>());
}

#[test]
fn shuffles_are_deterministic_for_a_seed_and_differ_across_seeds() {
    let corpus = corpus();
    let cubin = corpus.cubin("tiled_matmul");
    let first = shuffle(cubin, "tiled_matmul", 60, 11, &corpus.nvdisasm).expect("shuffle");
    let again = shuffle(cubin, "tiled_matmul", 60, 11, &corpus.nvdisasm).expect("shuffle");
    let other = shuffle(cubin, "tiled_matmul", 60, 12, &corpus.nvdisasm).expect("shuffle");
    assert_eq!(first.moves, again.moves);
    assert_eq!(first.cubin, again.cubin);
    assert_ne!(first.moves, other.moves);
    assert_ne!(first.permutation, (0..first.permutation.len()).collect::<Vec<_>>(), "60 moves changed nothing");
}

#[test]
fn a_move_followed_by_its_inverse_restores_the_instruction_order() {
    let corpus = corpus();
    let mut schedule = corpus.schedule("vector_add");
    let original = schedule.permutation();
    for chosen in schedule.legal_moves() {
        let mut trial = schedule.clone();
        trial.apply(&chosen).expect("a legal move applies");
        assert_ne!(trial.permutation(), original);
        trial.apply(&chosen.inverse()).expect("the inverse of a legal move is legal");
        assert_eq!(trial.permutation(), original, "{chosen}");
    }
    let first = schedule.legal_moves()[0];
    schedule.apply(&first).expect("a legal move applies");
    assert_eq!(schedule.applied(), [first]);
}

/// Properties of any schedule reached through legal moves, checked on the
/// listing itself after many random moves on every Triton kernel.
#[test]
fn random_moves_keep_dependent_instructions_in_order_and_every_result_waited_for() {
    for kernel in crate::corpus::TRITON_KERNELS {
        let original = corpus().schedule(kernel);
        let mut schedule = original.clone();
        random_moves(&mut schedule, 300, 77).expect("legal moves apply");
        let listing = schedule.listing();
        let positions = listing.positions();
        let before = original.listing().instructions();
        for (i, a) in before.iter().enumerate() {
            for (j, b) in before.iter().enumerate().skip(i + 1) {
                let conflict = a.effects.defs.intersects(&b.effects.accesses())
                    || a.effects.uses.intersects(&b.effects.defs)
                    || a.control.set_mask() & b.control.wait_mask != 0;
                if conflict {
                    assert!(positions[i] < positions[j], "{kernel}: `{}` moved past `{}`", b.text, a.text);
                }
            }
        }
        let now = listing.instructions();
        for block in 0..listing.block_count() {
            let range = listing.block_range(block);
            for producer in range.clone() {
                let p = &now[producer];
                let Some(barrier) = p.control.write_barrier else {
                    continue;
                };
                let reader = (producer + 1..range.end).find(|&c| now[c].effects.uses.intersects(&p.effects.defs));
                if let Some(reader) = reader {
                    assert!(
                        (producer + 1..=reader).any(|w| now[w].control.waits_on(barrier)),
                        "{kernel}: `{}` no longer waits for `{}`",
                        now[reader].text,
                        p.text
                    );
                }
            }
        }
    }
}
