//! Everything that names an instruction by its offset follows it when it moves.

use kerntune_sass::{Move, Schedule, Verifier};

use crate::corpus::corpus;

/// The offset of the first instruction whose text contains `needle`.
fn offset_of(listing: &kerntune_sass::FunctionListing, needle: &str) -> u64 {
    listing
        .instructions
        .iter()
        .find(|i| i.text.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {}", listing.name))
        .offset
}

#[test]
fn a_relocated_instruction_keeps_its_relocation_when_a_load_moves_past_it() {
    let corpus = corpus();
    let original = corpus.cubin("global_address");
    let mut schedule = corpus.schedule("global_address");
    let instructions = schedule.listing().instructions();
    let relocated = instructions
        .iter()
        .position(|i| i.text.contains("32@lo(counter_table)"))
        .expect("an instruction with a relocation");
    assert!(instructions[relocated - 1].text.starts_with("LDG"), "the corpus kernel changed shape");
    schedule.apply(&Move::down(relocated - 1)).expect("the load may move past the relocated UMOV");
    let rewritten = schedule.to_cubin().expect("rewrite");

    let after = corpus.nvdisasm.disassemble(&rewritten).expect("disassemble");
    let after = after.function("global_address").expect("the kernel");
    assert_eq!(offset_of(after, "32@lo(counter_table)"), (relocated as u64 - 1) * 16);
    assert!(after.instructions[relocated].text.starts_with("LDG"));
    Verifier::new(&corpus.nvdisasm, original, "global_address")
        .and_then(|v| v.check(&rewritten, &schedule.permutation()))
        .expect("the intended permutation");
}

/// The byte offset, in `cubin`, of the first value of the kernel's
/// `EIATTR_EXIT_INSTR_OFFSETS` list (format 0x04, attribute 0x1c).
fn exit_offsets_field(cubin: &[u8], first_exit: u32) -> usize {
    let position = cubin
        .windows(8)
        .position(|w| w[..2] == [0x04, 0x1c] && w[4..8] == first_exit.to_le_bytes())
        .expect("the EXIT_INSTR_OFFSETS attribute");
    position + 4
}

#[test]
fn instruction_offset_attributes_follow_a_moved_instruction() {
    // Point the first EXIT_INSTR_OFFSETS entry at a load that can move, so
    // that the list must change when the load moves.
    let corpus = corpus();
    let schedule = corpus.schedule("vector_add");
    let first_exit =
        schedule.listing().instructions().iter().position(|i| i.syntax.opcode == "EXIT").expect("an EXIT") as u32 * 16;
    let chosen = schedule
        .legal_moves()
        .into_iter()
        .find(|m| schedule.listing().instructions()[m.index].syntax.opcode == "LDG")
        .expect("a load that can move");
    let mut patched = corpus.cubin("vector_add").to_vec();
    let field = exit_offsets_field(&patched, first_exit);
    patched[field..field + 4].copy_from_slice(&(chosen.index as u32 * 16).to_le_bytes());

    let mut schedule = Schedule::from_cubin(&patched, "vector_add", &corpus.nvdisasm).expect("patched cubin");
    schedule.apply(&chosen).expect("legal");
    let rewritten = schedule.to_cubin().expect("rewrite");
    let listed = corpus.nvdisasm.disassemble(&rewritten).expect("disassemble");
    let exits =
        listed.offset_attributes.iter().find(|a| a.name == "EIATTR_EXIT_INSTR_OFFSETS").expect("EXIT_INSTR_OFFSETS");
    assert_eq!(exits.offsets[0], chosen.destination() as u32 * 16);
    Verifier::new(&corpus.nvdisasm, &patched, "vector_add")
        .and_then(|v| v.check(&rewritten, &schedule.permutation()))
        .expect("the intended permutation");
}

#[test]
fn exit_offsets_still_name_exits_after_many_moves() {
    let corpus = corpus();
    let shuffled = kerntune_sass::shuffle(corpus.cubin("looped_softmax"), "looped_softmax", 200, 5, &corpus.nvdisasm)
        .expect("shuffle");
    let listed = corpus.nvdisasm.disassemble(&shuffled.cubin).expect("disassemble");
    let code = listed.function("looped_softmax").expect("the kernel");
    let exits = listed.offset_attributes.iter().find(|a| a.name == "EIATTR_EXIT_INSTR_OFFSETS").expect("exits");
    assert!(!exits.offsets.is_empty());
    for &offset in &exits.offsets {
        let instruction = &code.instructions[offset as usize / 16];
        assert!(instruction.text.ends_with("EXIT"), "{offset:#x}: {}", instruction.text);
    }
}

#[test]
fn verification_catches_a_wrong_permutation_and_a_corrupted_cubin() {
    let corpus = corpus();
    let original = corpus.cubin("vector_add");
    let shuffled = kerntune_sass::shuffle(original, "vector_add", 20, 3, &corpus.nvdisasm).expect("shuffle");
    let verifier = Verifier::new(&corpus.nvdisasm, original, "vector_add").expect("verifier");
    let identity: Vec<usize> = (0..shuffled.permutation.len()).collect();
    assert_ne!(shuffled.permutation, identity);
    assert!(verifier.check(&shuffled.cubin, &identity).is_err(), "the identity is not what was applied");
    let mut corrupted = shuffled.cubin.clone();
    let last = corrupted.len() - 1;
    corrupted[last] ^= 0xff;
    assert!(verifier.check(&corrupted, &shuffled.permutation).is_err(), "a byte outside the rewritten ranges changed");
    verifier.check(&shuffled.cubin, &shuffled.permutation).expect("the real permutation");
}

#[test]
fn a_kernel_with_an_unknown_info_attribute_is_refused() {
    // EIATTR_SW_WAR (format 0x04, id 0x36, 4 bytes) renamed to an id this
    // crate does not know: it might hold instruction offsets.
    let corpus = corpus();
    let mut patched = corpus.cubin("vector_add").to_vec();
    let at = patched.windows(4).position(|w| w == [0x04, 0x36, 0x04, 0x00]).expect("the EIATTR_SW_WAR attribute");
    patched[at + 1] = 0x7e;
    match Schedule::from_cubin(&patched, "vector_add", &corpus.nvdisasm) {
        Err(kerntune_sass::SassError::Unsupported { reason, .. }) => {
            assert!(reason.contains("unknown"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_unknown_attribute_without_a_payload_is_accepted() {
    // EIATTR_MAXREG_COUNT (format 0x03: the value sits in the header) renamed to an unknown
    // id, as newer ptxas versions emit: a 16-bit value holds no offset list.
    let corpus = corpus();
    let mut patched = corpus.cubin("vector_add").to_vec();
    let at = patched.windows(2).position(|w| w == [0x03, 0x1b]).expect("the EIATTR_MAXREG_COUNT attribute");
    patched[at + 1] = 0x4c;
    Schedule::from_cubin(&patched, "vector_add", &corpus.nvdisasm).expect("accepted");
}

#[test]
fn truncated_or_corrupted_cubins_are_errors_not_panics() {
    let original = corpus().cubin("tiled_matmul");
    for length in (0..original.len()).step_by(97) {
        if let Ok(cubin) = kerntune_sass::Cubin::parse(&original[..length]) {
            for kernel in cubin.kernels() {
                let _ = cubin.kernel_text(&kernel);
            }
        }
    }
    // A fixed pseudo-random sequence (Knuth's MMIX generator): the same corruptions every run.
    let mut state = 1u64;
    let mut below = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    for _ in 0..2000 {
        let mut corrupted = original.to_vec();
        // Corrupt the ELF header or the section headers at the end of the file.
        let at = if below(2) == 0 { below(64) } else { original.len() - 1 - below(1024) };
        corrupted[at] = below(256) as u8;
        if let Ok(cubin) = kerntune_sass::Cubin::parse(&corrupted) {
            for kernel in cubin.kernels() {
                let _ = cubin.kernel_text(&kernel);
            }
        }
    }
    assert!(kerntune_sass::Cubin::parse(&original[..original.len() / 2]).is_err());
}
