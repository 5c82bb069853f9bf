//! `show`: the table and the JSON report of a kernel.

use kerntune_sass::{show, Nvdisasm, SassError};

use crate::corpus::corpus;

#[test]
fn show_reports_every_instruction_with_control_bits_and_legal_moves() {
    let corpus = corpus();
    let report = show(corpus.cubin("vector_add"), "vector_add", &corpus.nvdisasm).expect("report");
    let schedule = corpus.schedule("vector_add");
    assert_eq!(report.instructions.len(), schedule.listing().instructions().len());
    assert_eq!(report.legal_moves, schedule.legal_moves().len());
    let movable = report.instructions.iter().filter(|r| r.can_move_up || r.can_move_down).count();
    assert!(movable > 0);
    assert!(report.instructions.iter().all(|r| r.role == "memory" || (r.up.is_none() && r.down.is_none())));

    let table = report.to_string();
    assert!(table.starts_with("kernel vector_add: "));
    assert!(table.contains("[B------:R-:W0:Y:S01]"), "control bits in CuAssembler notation");
    assert!(table.lines().any(|l| l.contains("LDG.E") && l.contains("up")));

    let json = serde_json::to_value(&report).expect("serializable");
    let first = &json["instructions"][0];
    assert_eq!(first["offset"], 0);
    assert!(first["control"]["stall"].is_number());
    assert!(first["defs"].is_array());
}

#[test]
fn a_missing_kernel_and_a_missing_nvdisasm_are_reported_by_name() {
    let corpus = corpus();
    let missing = show(corpus.cubin("vector_add"), "no_such_kernel", &corpus.nvdisasm).expect_err("no such kernel");
    assert!(
        matches!(&missing, SassError::KernelNotFound { available, .. } if available.contains("vector_add")),
        "{missing}"
    );
    let broken = Nvdisasm::at("/nonexistent/nvdisasm");
    let failed = show(corpus.cubin("vector_add"), "vector_add", &broken).expect_err("no nvdisasm there");
    assert!(matches!(failed, SassError::NvdisasmFailed { .. }), "{failed}");
}
