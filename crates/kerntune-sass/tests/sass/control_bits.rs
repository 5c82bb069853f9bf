//! The control-bit layout, checked against what nvdisasm prints and what
//! ptxas relies on, over every instruction of the corpus.

use kerntune_sass::{KernelListing, Role};

use crate::corpus::{corpus, TRITON_KERNELS};

fn listings() -> Vec<KernelListing> {
    TRITON_KERNELS.iter().map(|k| corpus().schedule(k).listing().clone()).collect()
}

#[test]
fn reuse_bits_match_the_reuse_flags_nvdisasm_prints() {
    let mut flagged = 0;
    for listing in listings() {
        for instruction in listing.instructions() {
            let printed = instruction.text.matches(".reuse").count();
            assert_eq!(instruction.control.reuse.count_ones() as usize, printed, "{}", instruction.text);
            flagged += printed;
        }
    }
    assert!(flagged > 20, "the corpus should exercise reuse flags, found {flagged}");
}

#[test]
fn every_reader_of_a_scoreboarded_result_is_behind_a_wait_on_its_barrier() {
    let mut checked = 0;
    for listing in listings() {
        let instructions = listing.instructions();
        for block in 0..listing.block_count() {
            let range = listing.block_range(block);
            for producer in range.clone() {
                let p = &instructions[producer];
                let (Some(barrier), false) = (p.control.write_barrier, matches!(p.role, Role::Fence(_))) else {
                    continue;
                };
                let Some(reader) =
                    (producer + 1..range.end).find(|&c| instructions[c].effects.uses.intersects(&p.effects.defs))
                else {
                    continue;
                };
                let waited = (producer + 1..=reader).any(|w| instructions[w].control.waits_on(barrier));
                assert!(
                    waited,
                    "`{}` reads the result of `{}` without waiting on barrier {barrier}",
                    instructions[reader].text, p.text
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} scoreboarded results were checked");
}

#[test]
fn fixed_latency_results_are_read_at_least_a_cycle_later() {
    let mut checked = 0;
    for listing in listings() {
        let instructions = listing.instructions();
        for block in 0..listing.block_count() {
            let range = listing.block_range(block);
            for producer in range.clone() {
                let p = &instructions[producer];
                if p.control.write_barrier.is_some() || p.role != Role::Plain || p.effects.must_defs.is_empty() {
                    continue;
                }
                let Some(reader) =
                    (producer + 1..range.end).find(|&c| instructions[c].effects.uses.intersects(&p.effects.must_defs))
                else {
                    continue;
                };
                let cycles: u32 = instructions[producer..reader].iter().map(|i| u32::from(i.control.stall)).sum();
                assert!(cycles >= 1, "`{}` reads `{}` after {cycles} stall cycles", instructions[reader].text, p.text);
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} fixed-latency results were checked");
}

#[test]
fn memory_instructions_neither_set_nor_need_reuse_flags() {
    // Clearing the flags of the swapped instructions is then enough: the
    // order of the instructions that do use the operand reuse cache does not change.
    for listing in listings() {
        for instruction in listing.instructions() {
            if matches!(instruction.role, Role::Memory(_)) {
                assert_eq!(instruction.control.reuse, 0, "{}", instruction.text);
            }
        }
    }
}
