//! Every legality rule refuses the moves it is meant to refuse. Most cases
//! are small listings written in nvdisasm's words, with the control bits in
//! CuAssembler's notation, so that each one shows exactly one reason.

use kerntune_sass::{
    Control, FenceKind, FunctionListing, KernelListing, Label, LatencyTable, ListedInstruction, Move, Refusal,
    Register, SassError,
};

use crate::corpus::corpus;

/// Parses `[B--2---:R-:W1:Y:S04]`.
fn control(notation: &str) -> Control {
    let fields: Vec<&str> = notation.trim_matches(|c| c == '[' || c == ']').split(':').collect();
    let barrier = |field: &str| field[1..].parse::<u8>().ok();
    Control {
        stall: fields[4][1..].parse().expect("a stall count"),
        yield_flag: fields[3] == "Y",
        write_barrier: barrier(fields[2]),
        read_barrier: barrier(fields[1]),
        wait_mask: fields[0][1..].chars().enumerate().filter(|(_, c)| *c != '-').map(|(b, _)| 1 << b).sum(),
        reuse: 0,
    }
}

/// A listing from lines `[control] text` and `label:`.
fn listing(lines: &[&str]) -> Result<KernelListing, SassError> {
    let mut function = FunctionListing { name: "synthetic".into(), ..Default::default() };
    for line in lines {
        let offset = function.instructions.len() as u64 * 16;
        if let Some(name) = line.strip_suffix(':') {
            function.labels.push(Label { name: name.into(), offset });
            continue;
        }
        let (notation, text) = line.split_once(' ').expect("`[control] text`");
        function.instructions.push(ListedInstruction {
            offset,
            text: text.into(),
            words: [0, control(notation).encode(0)],
        });
    }
    KernelListing::from_function(&function, LatencyTable::SM90, &[])
}

fn refusal(lines: &[&str], requested: Move) -> Refusal {
    let listing = listing(lines).expect("a valid listing");
    listing.check(&requested).expect_err("the move must be refused")
}

fn legal(lines: &[&str], requested: Move) {
    let listing = listing(lines).expect("a valid listing");
    if let Err(refusal) = listing.check(&requested) {
        panic!("{requested} refused: {refusal}");
    }
}

#[test]
fn a_register_written_by_one_and_read_by_the_other_pins_both() {
    let lines = ["[B------:R-:W2:Y:S02] LDG.E R4, desc[UR4][R2.64]", "[B------:R-:W-:Y:S04] IADD3 R5, R4, 0x1, RZ"];
    assert_eq!(refusal(&lines, Move::down(0)), Refusal::RegisterDependency { register: Register::General(4) });
}

#[test]
fn the_upper_half_of_a_64_bit_address_is_a_dependency_too() {
    let lines =
        ["[B------:R-:W-:Y:S02] IADD3.X R7, RZ, R9, RZ, P0, !PT", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]"];
    assert_eq!(refusal(&lines, Move::up(1)), Refusal::RegisterDependency { register: Register::General(7) });
}

#[test]
fn a_guard_predicate_written_just_before_pins_the_load() {
    let lines = [
        "[B------:R-:W-:Y:S04] ISETP.GE.AND P0, PT, R9, UR6, PT",
        "[B------:R-:W2:Y:S01] @!P0 LDG.E R0, desc[UR4][R6.64]",
    ];
    assert_eq!(refusal(&lines, Move::up(1)), Refusal::PredicateDependency { register: Register::Predicate(0) });
}

#[test]
fn nothing_moves_into_or_out_of_the_slot_after_a_barrier() {
    // The slot after BAR.SYNC.DEFER_BLOCKING may issue before the barrier resolves: a
    // shared load moved there reads what other threads have not stored yet (found on an
    // H200 by the schedule search, whose verification rejected the candidates).
    let lines = [
        "[B------:R-:W-:Y:S01] BAR.SYNC.DEFER_BLOCKING 0x0",
        "[B------:R-:W-:-:S05] UIADD3 UR4, UR4, 0x10, URZ",
        "[B------:R-:W-:Y:S04] LDS R110, [R60]",
        "[B------:R-:W5:Y:S04] LDS R3, [R57]",
    ];
    assert!(matches!(refusal(&lines, Move::up(2)), Refusal::FenceShadow { .. }));
    let lines = [
        "[B------:R-:W-:Y:S01] BAR.SYNC.DEFER_BLOCKING 0x0",
        "[B------:R-:W-:Y:S04] LDS R110, [R60]",
        "[B------:R-:W-:-:S05] UIADD3 UR4, UR4, 0x10, URZ",
    ];
    assert!(matches!(refusal(&lines, Move::down(1)), Refusal::FenceShadow { .. }));
    let ok = listing(&[
        "[B------:R-:W-:Y:S01] BAR.SYNC.DEFER_BLOCKING 0x0",
        "[B------:R-:W-:-:S15] UIADD3 UR4, UR4, 0x10, URZ",
        "[B------:R-:W-:Y:S04] IADD3 R1, R2, 0x1, RZ",
        "[B------:R-:W-:Y:S04] LDS R110, [R60]",
    ])
    .expect("a valid listing");
    assert!(ok.check(&Move::up(3)).is_ok(), "two slots and 16 cycles after the barrier a swap is fine");
}

#[test]
fn nothing_moves_across_a_barrier_or_a_scoreboard_wait() {
    for fence in ["BAR.SYNC.DEFER_BLOCKING 0x0", "DEPBAR.LE SB0, 0x1", "LDGDEPBAR", "MEMBAR.ALL.CTA"] {
        let lines = [
            "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]",
            &format!("[B------:R-:W-:Y:S01] {fence}"),
            "[B------:R-:W3:Y:S01] LDG.E R1, desc[UR4][R8.64]",
        ];
        for requested in [Move::down(0), Move::up(2)] {
            assert!(
                matches!(refusal(&lines, requested), Refusal::Fence { kind: FenceKind::Synchronization, .. }),
                "{fence}"
            );
        }
    }
}

#[test]
fn a_load_crosses_a_warp_mma_only_if_it_touches_none_of_its_registers() {
    let mma = "[B------:R-:W-:-:S15] HMMA.16816.F32 R12, R28, R36, R12";
    let load = "[B------:R-:W1:Y:S04] LDSM.16.M88.4 R40, [R56+UR8]";
    legal(&[mma, load], Move::up(1));
    legal(&[mma, "[B------:R-:W-:Y:S09] NOP", load], Move::up(2));
    // R38 is B's second register: an anti dependency on the tensor core's operand.
    let overwrites_operand = [mma, "[B------:R-:W1:Y:S04] LDSM.16.MT88.4 R36, [R54+UR9]"];
    assert_eq!(
        refusal(&overwrites_operand, Move::up(1)),
        Refusal::RegisterDependency { register: Register::General(36) }
    );
    // R15 is the last accumulator register: a true dependency on the loaded value.
    let loads_accumulator =
        ["[B------:R-:W1:Y:S04] LDS R15, [R54]", "[B-1----:R-:W-:-:S15] HMMA.16816.F32 R12, R28, R36, R12"];
    assert_eq!(
        refusal(&loads_accumulator, Move::down(0)),
        Refusal::RegisterDependency { register: Register::General(15) }
    );
    // Sparse and integer MMAs are not modelled.
    let sparse = [
        "[B------:R-:W-:Y:S04] HMMA.SP.16832.F32 R12, R28, R36, R12, R40, 0x0",
        "[B------:R-:W1:Y:S04] LDS R60, [R54]",
    ];
    assert!(matches!(refusal(&sparse, Move::up(1)), Refusal::Fence { kind: FenceKind::NotModelled, .. }));
}

#[test]
fn nothing_moves_across_a_label_or_a_branch() {
    let lines = [
        "[B------:R-:W-:Y:S01] IADD3 R5, R5, 0x1, RZ",
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]",
        ".L_x_0:",
        "[B------:R-:W-:Y:S01] IADD3 R7, R7, 0x1, RZ",
        "[B------:R-:W3:Y:S01] LDG.E R1, desc[UR4][R8.64]",
        "[B------:R-:W-:Y:S05] @P0 BRA `(.L_x_0)",
        "[B------:R-:W-:Y:S05] EXIT",
    ];
    assert_eq!(refusal(&lines, Move::down(1)), Refusal::BlockBoundary);
    assert_eq!(refusal(&lines, Move::up(2)), Refusal::NotMovable { text: "IADD3 R7, R7, 0x1, RZ".into() });
    assert!(matches!(refusal(&lines, Move::down(3)), Refusal::Fence { kind: FenceKind::ControlFlow, .. }));
    legal(&lines, Move::up(1));
    legal(&lines, Move::up(3));
}

#[test]
fn a_store_and_a_load_that_may_alias_keep_their_order() {
    let lines =
        ["[B------:R0:W-:Y:S01] STG.E desc[UR4][R4.64], R9", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]"];
    assert!(matches!(refusal(&lines, Move::up(1)), Refusal::MemoryAlias { .. }));
    let overlapping =
        ["[B------:R0:W-:Y:S01] STG.E.64 desc[UR4][R4.64], R8", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R4.64+0x4]"];
    assert!(matches!(refusal(&overlapping, Move::up(1)), Refusal::MemoryAlias { .. }));
}

#[test]
fn accesses_that_cannot_alias_may_swap() {
    let disjoint =
        ["[B------:R0:W-:Y:S01] STG.E.64 desc[UR4][R4.64], R8", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R4.64+0x8]"];
    legal(&disjoint, Move::up(1));
    let other_space = ["[B------:R0:W-:Y:S01] STS [R3], R9", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]"];
    legal(&other_space, Move::up(1));
    let two_loads =
        ["[B------:R-:W1:Y:S01] LDG.E R1, desc[UR4][R4.64]", "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]"];
    legal(&two_loads, Move::up(1));
}

#[test]
fn a_barrier_set_by_one_and_waited_on_by_the_other_keeps_their_order() {
    let lines = ["[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]", "[B--2---:R-:W-:Y:S04] IADD3 R10, R11, 0x1, RZ"];
    assert_eq!(refusal(&lines, Move::down(0)), Refusal::ScoreboardOrder { barrier: 2 });
}

#[test]
fn setters_of_a_partly_waited_barrier_keep_their_order() {
    let without_depbar = [
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]",
        "[B------:R-:W2:Y:S01] LDG.E R1, desc[UR4][R8.64]",
        "[B------:R-:W-:Y:S01] EXIT",
    ];
    legal(&without_depbar, Move::down(0));
    let with_depbar = [
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R6.64]",
        "[B------:R-:W2:Y:S01] LDG.E R1, desc[UR4][R8.64]",
        "[B------:R-:W-:Y:S01] DEPBAR.LE SB2, 0x1",
    ];
    assert_eq!(refusal(&with_depbar, Move::down(0)), Refusal::ScoreboardOrder { barrier: 2 });
}

#[test]
fn an_instruction_does_not_move_above_the_wait_that_protects_its_operands() {
    let lines = [
        "[B------:R-:W2:Y:S01] LDG.E R8, desc[UR4][R6.64]",
        "[B--2---:R-:W-:Y:S04] IADD3 R10, R11, 0x1, RZ",
        "[B------:R-:W-:Y:S01] STS [R12], R8",
    ];
    assert!(matches!(refusal(&lines, Move::up(2)), Refusal::WaitGuard { barrier: 2, .. }));
}

#[test]
fn a_move_may_not_shorten_a_fixed_latency_dependency_below_its_bound() {
    let tight = [
        "[B------:R-:W-:Y:S01] IADD3 R4, R2, 0x10, RZ",
        "[B------:R-:W-:Y:S05] IMAD R9, R10, R11, RZ",
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R4.64]",
    ];
    assert!(matches!(refusal(&tight, Move::up(2)), Refusal::StallShortened { before: 6, after: 1, bound: 26, .. }));
    let with_slack = [
        "[B------:R-:W-:Y:S15] IADD3 R4, R2, 0x10, RZ",
        "[B------:R-:W-:Y:S15] IADD3 R6, R3, 0x10, RZ",
        "[B------:R-:W-:Y:S02] IMAD R9, R10, R11, RZ",
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R4.64]",
    ];
    legal(&with_slack, Move::up(3));
}

/// The two single moves the GPU audit (`bench/schedule_audit.py`) found computing wrong
/// results on an H200 under the earlier bounds, in Triton matmuls of the example.
#[test]
fn moves_the_gpu_audit_caught_are_refused() {
    // A copy whose zero-fill predicate came 13 cycles after its ISETP, ptxas's
    // smallest distance from an ISETP to a memory instruction: one cycle less
    // and 4 of the 16.8 million outputs came out wrong.
    let predicate = [
        "[B------:R-:W-:Y:S02] ISETP.NE.U32.AND P4, PT, R28, RZ, PT",
        "[B------:R-:W-:Y:S02] SEL R28, RZ, 0x10, P2",
        "[B------:R-:W-:Y:S01] SEL R24, R24, RZ, P1",
        "[B------:R1:W-:Y:S01] LDGSTS.E.BYPASS.128 [R25+0x2800], desc[UR10][R14.64], P3",
        "[B------:R-:W-:-:S02] SEL R26, R26, RZ, P1",
        "[B------:R-:W-:Y:S01] SEL R27, R27, RZ, P1",
        "[B------:R2:W-:Y:S01] LDGSTS.E.BYPASS.128 [R25+0x3000], desc[UR10][R16.64], P5",
        "[B------:R-:W-:Y:S02] SEL R28, R28, RZ, P1",
        "[B------:R-:W-:Y:S01] ISETP.NE.U32.AND P2, PT, R24, RZ, PT",
        "[B------:R3:W-:Y:S01] LDGSTS.E.BYPASS.128 [R25+0x3800], desc[UR10][R18.64], P4",
    ];
    assert!(matches!(
        refusal(&predicate, Move::up(9)),
        Refusal::StallShortened { before: 13, after: 12, bound: 26, .. }
    ));
    // A shared load 6 cycles after a barrier, ptxas's smallest distance: at 3
    // cycles it read data other warps had not stored yet.
    let barrier = [
        "[B------:R-:W-:Y:S01] BAR.SYNC.DEFER_BLOCKING 0x0",
        "[B------:R-:W-:Y:S02] IMAD R27, R27, R52, RZ",
        "[B------:R-:W-:-:S03] IMAD R26, R52, 0x20, R26",
        "[B------:R-:W1:Y:S02] LDS.128 R28, [R141+UR5]",
    ];
    assert!(matches!(refusal(&barrier, Move::up(3)), Refusal::StallShortened { before: 6, after: 3, bound: 12, .. }));
}

#[test]
fn a_move_may_not_shorten_a_dependency_that_crosses_a_block_boundary() {
    let lines = [
        "[B------:R-:W-:Y:S01] IADD3 R4, R2, 0x10, RZ",
        "[B------:R-:W-:Y:S01] @P0 BRA `(.L_x_1)",
        ".L_x_1:",
        "[B------:R-:W-:Y:S04] IMAD R9, R10, R11, RZ",
        "[B------:R-:W2:Y:S01] LDG.E R0, desc[UR4][R4.64]",
        "[B------:R-:W-:Y:S01] EXIT",
    ];
    assert!(matches!(refusal(&lines, Move::up(3)), Refusal::StallShortened { before: 6, after: 2, .. }));
}

#[test]
fn only_modelled_memory_instructions_move_and_only_within_the_kernel() {
    let lines = [
        "[B------:R-:W2:Y:S01] LDG.E.STRONG.GPU R0, desc[UR4][R6.64]",
        "[B------:R-:W-:Y:S01] @!PT LDS RZ, [RZ]",
        "[B------:R-:W3:Y:S01] LDG.E R1, desc[UR4][R8.64]",
    ];
    assert!(matches!(refusal(&lines, Move::down(0)), Refusal::NotMovable { .. }));
    assert!(matches!(refusal(&lines, Move::up(2)), Refusal::Fence { kind: FenceKind::NeverExecutes, .. }));
    assert_eq!(refusal(&lines, Move::down(2)), Refusal::OutOfRange);
    assert_eq!(refusal(&lines, Move::up(7)), Refusal::OutOfRange);
}

#[test]
fn a_kernel_with_an_indirect_branch_is_refused() {
    let synthetic = listing(&["[B------:R-:W-:Y:S05] BRX R4 -0x70", "[B------:R-:W-:Y:S05] EXIT"]);
    assert!(matches!(synthetic, Err(SassError::Unsupported { .. })));
    let corpus = corpus();
    let compiled =
        kerntune_sass::Schedule::from_cubin(corpus.cubin("indirect_branch"), "indirect_branch", &corpus.nvdisasm);
    match compiled {
        Err(SassError::Unsupported { reason, .. }) => {
            assert!(reason.contains("indirect"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn applying_an_illegal_move_fails_and_leaves_the_schedule_unchanged() {
    let mut schedule = corpus().schedule("pipelined_matmul");
    let instructions = schedule.listing().instructions();
    let before_commit = instructions
        .windows(2)
        .position(|pair| pair[0].syntax.opcode == "LDGSTS" && pair[1].syntax.opcode == "LDGDEPBAR")
        .expect("an LDGSTS right before LDGDEPBAR");
    let permutation = schedule.permutation();
    let error = schedule.apply(&Move::down(before_commit)).expect_err("crossing LDGDEPBAR is illegal");
    assert!(
        matches!(
            error,
            SassError::IllegalMove { refusal: Refusal::Fence { kind: FenceKind::Synchronization, .. }, .. }
        ),
        "{error}"
    );
    assert_eq!(schedule.permutation(), permutation);
    assert!(schedule.applied().is_empty());
}
