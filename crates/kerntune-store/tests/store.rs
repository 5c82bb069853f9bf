//! The results store keeps every row across reopening, and the two file formats survive a
//! trip through the store unchanged.

use std::path::PathBuf;

use kerntune_store::{formats, Costs, Evaluation, Landscape, Status, Store};
use serde_json::json;

fn landscape(name: &str) -> Landscape {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/landscapes").join(name);
    Landscape::read(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn rows_survive_reopening_and_a_rerecord_replaces() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("results.db");
    let info = landscape("pnpoly_RTX_3090.json.gz").tuning();
    let config = json!({"between_method": 0}).as_object().cloned().expect("object");
    {
        let store = Store::open(&path).expect("opens");
        let tuning = store.tuning(&info).expect("tuning");
        store.record(tuning, &config, &Evaluation::failed(Status::Timeout, "hung", Costs::default())).expect("records");
        store
            .record(tuning, &config, &Evaluation::ok(1.5, vec![1.5, 1.6], Costs { compile_s: 0.5, ..Costs::default() }))
            .expect("records");
    }
    let store = Store::open(&path).expect("reopens");
    let tuning = store.find_tuning(&info).expect("query").expect("tuning exists");
    let rows = store.evaluations(tuning).expect("reads");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].evaluation.status, Status::Ok);
    assert_eq!(rows[0].evaluation.samples, vec![1.5, 1.6]);
    assert_eq!(rows[0].evaluation.costs.compile_s, 0.5);
    let summary = store.tunings().expect("lists");
    assert_eq!((summary.len(), summary[0].evaluations, summary[0].info.params.len()), (1, 1, 4));
}

#[test]
fn a_file_that_is_not_sqlite_is_reported_as_such() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notes.db");
    std::fs::write(&path, "these are not results, just a text file that is long enough to have a header")
        .expect("write");
    let error = Store::open(&path).unwrap_err().to_string();
    assert!(error.contains("not a kerntune results database"), "{error}");
}

fn round_trip(
    name: &str,
    write: fn(&kerntune_store::TuningInfo, &[kerntune_store::StoredEvaluation]) -> serde_json::Value,
) {
    let original = landscape(name);
    let store = Store::in_memory().expect("opens");
    let space = original.space().expect("space");
    let tuning = store.tuning(&original.tuning()).expect("tuning");
    for record in &original.records {
        let id = space.id_of(&record.config).expect("recorded config is in its space");
        store.record(tuning, &space.config_json(id), &record.evaluation).expect("records");
    }
    let exported = write(&original.tuning(), &store.evaluations(tuning).expect("reads")).to_string();
    let again = Landscape::parse(exported.as_bytes(), "exported", &original.kernel_name).expect("parses");
    assert_eq!(again.records.len(), original.records.len());
    assert_eq!(again.optimum(), original.optimum());
    let failures = |l: &Landscape| l.records.iter().filter(|r| r.evaluation.status.is_failure()).count();
    assert_eq!(failures(&again), failures(&original));
    for (a, b) in original.records.iter().zip(&again.records) {
        let values = |l: &Landscape, r: &kerntune_store::Record| {
            r.config.iter().enumerate().map(|(p, i)| l.params[p].values()[*i].clone()).collect::<Vec<_>>()
        };
        assert_eq!(values(&original, a), values(&again, b));
        assert_eq!(a.evaluation.status, b.evaluation.status);
        assert_eq!(a.evaluation.objective, b.evaluation.objective);
        assert!((a.evaluation.costs.total() - b.evaluation.costs.total()).abs() < 1e-9);
    }
}

#[test]
fn kernel_tuner_cache_round_trips_through_the_store() {
    round_trip("convolution_A100.json.gz", formats::kernel_tuner::write);
}

#[test]
fn t4_round_trips_through_the_store() {
    round_trip("convolution_A4000_T4.json.gz", formats::t4::write);
}

#[test]
fn shipped_landscapes_read_with_their_failures() {
    let kt = landscape("convolution_A100.json.gz");
    assert_eq!((kt.records.len(), kt.params.len()), (4362, 10));
    let count = |l: &Landscape, s: Status| l.records.iter().filter(|r| r.evaluation.status == s).count();
    assert_eq!((count(&kt, Status::RuntimeFailed), count(&kt, Status::CompileFailed)), (155, 6));
    assert_eq!(kt.optimum(), Some(0.5536000076681376));
    let t4 = landscape("convolution_A4000_T4.json.gz");
    assert_eq!(
        (count(&t4, Status::RuntimeFailed), count(&t4, Status::CompileFailed), count(&t4, Status::Ok)),
        (155, 6, 4201)
    );
}
