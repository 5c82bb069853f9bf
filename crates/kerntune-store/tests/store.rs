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
    assert_eq!((summary.len(), summary[0].evaluations), (1, 1), "one tuning, its one row replaced");
    assert_eq!(summary[0].info, info, "the tuning reads back as it was recorded");
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
fn an_early_stopped_entry_keeps_its_time_and_its_status_through_a_kernel_tuner_cache() {
    let original = landscape("pnpoly_RTX_3090.json.gz");
    let store = Store::in_memory().expect("opens");
    let space = original.space().expect("space");
    let tuning = store.tuning(&original.tuning()).expect("tuning");
    let record = original.records.iter().find(|r| r.evaluation.status == Status::Ok).expect("a valid record");
    let mut stopped = record.evaluation.clone();
    stopped.status = Status::EarlyStopped;
    stopped.objective = stopped.objective.map(|t| t * 3.0);
    let config = space.config_json(space.id_of(&record.config).expect("in its space"));
    store.record(tuning, &config, &stopped).expect("records");
    let exported = formats::kernel_tuner::write(&original.tuning(), &store.evaluations(tuning).expect("reads"));
    let entry = exported["cache"].as_object().and_then(|c| c.values().next()).expect("one entry");
    assert_eq!(entry["time"].as_f64(), stopped.objective, "Kernel Tuner reads the measured time");
    let again = Landscape::parse(exported.to_string().as_bytes(), "exported", "pnpoly").expect("parses");
    let read = &again.records[0].evaluation;
    assert_eq!((read.status, read.objective), (Status::EarlyStopped, stopped.objective));
    assert_eq!(read.valid_objective(), None, "an early-stopped configuration never competes for best");
}

#[test]
fn t4_round_trips_through_the_store() {
    round_trip("convolution_A4000_T4.json.gz", formats::t4::write);
}

/// What a landscape file says of itself, read from its JSON without kerntune's reader:
/// (parameters, entries, valid, failed at run time, failed to compile, fastest valid time).
/// Kernel Tuner caches mark failures with a string in `time` and list `tune_params`; T4
/// files mark them with `invalidity` and name the parameters in each `configuration`.
fn stated_in_file(name: &str) -> (usize, usize, usize, usize, usize, f64) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/landscapes").join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let document: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(file)).expect("gzipped JSON");
    let (kinds, times): (Vec<&str>, Vec<Option<f64>>) = if let Some(cache) = document["cache"].as_object() {
        cache
            .values()
            .map(|entry| match &entry["time"] {
                serde_json::Value::String(failure) if failure == "RuntimeFailedConfig" => ("runtime", None),
                serde_json::Value::String(failure) if failure == "CompilationFailedConfig" => ("compile", None),
                serde_json::Value::String(other) => panic!("{name}: unknown failure {other}"),
                time => ("correct", Some(time.as_f64().expect("a numeric time"))),
            })
            .unzip()
    } else {
        let results = document["results"].as_array().expect("T4 results");
        results
            .iter()
            .map(|result| {
                let kind = result["invalidity"].as_str().expect("invalidity");
                let time =
                    result["measurements"].as_array().expect("measurements").iter().find(|m| m["name"] == "time");
                (kind, if kind == "correct" { time.and_then(|m| m["value"].as_f64()) } else { None })
            })
            .unzip()
    };
    let params = match document["tune_params"].as_object() {
        Some(params) => params,
        None => document["results"][0]["configuration"].as_object().expect("a configuration"),
    };
    let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
    let fastest = times.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    (params.len(), kinds.len(), count("correct"), count("runtime"), count("compile"), fastest)
}

#[test]
fn shipped_landscapes_read_with_their_failures() {
    let count = |l: &Landscape, s: Status| l.records.iter().filter(|r| r.evaluation.status == s).count();
    // Both files hold the same 4362 convolution entries: 4201 valid, 155 that failed at run
    // time, 6 that failed to compile; counted here from the files themselves.
    for name in ["convolution_A100.json.gz", "convolution_A4000_T4.json.gz"] {
        let (params, entries, valid, runtime, compile, fastest) = stated_in_file(name);
        assert!(runtime > 0 && compile > 0, "{name} has failures of both kinds to read");
        let read = landscape(name);
        assert_eq!((read.params.len(), read.records.len()), (params, entries), "{name}");
        assert_eq!(
            (count(&read, Status::Ok), count(&read, Status::RuntimeFailed), count(&read, Status::CompileFailed)),
            (valid, runtime, compile),
            "{name}"
        );
        assert_eq!(read.optimum(), Some(fastest), "{name}");
    }
}

#[test]
fn artifacts_of_one_kind_are_read_across_tunings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("results.db")).expect("opens");
    let first = store.tuning(&landscape("pnpoly_RTX_3090.json.gz").tuning()).expect("tuning");
    let second = store.tuning(&landscape("convolution_A100.json.gz").tuning()).expect("tuning");
    let config = json!({"between_method": 0}).as_object().cloned().expect("object");
    store.save_artifact(first, &config, "inductor_choice", b"one", "test").expect("saves");
    store.save_artifact(second, &config, "inductor_choice", b"two", "test").expect("saves");
    store.save_artifact(second, &config, "cubin", b"binary", "test").expect("saves");
    let found = store.artifacts_of_kind("inductor_choice").expect("reads");
    let seen: Vec<(_, &[u8])> = found.iter().map(|(tuning, artifact)| (*tuning, artifact.data.as_slice())).collect();
    assert_eq!(seen, vec![(first, b"one".as_slice()), (second, b"two".as_slice())]);
    assert!(store.artifacts_of_kind("schedule").expect("reads").is_empty());
}
