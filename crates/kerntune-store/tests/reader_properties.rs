//! Properties of the landscape readers on arbitrary input: `Landscape::parse` never panics
//! on random bytes, nor on Kernel Tuner cache documents with random parameters and entries
//! (wrong types, missing keys, failures, negative times); what it accepts builds a space.

use kerntune_store::Landscape;
use proptest::prelude::*;
use serde_json::{json, Map, Value as Json};

/// A JSON value of any shape, small.
fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        (-1e3f64..1e3).prop_map(Json::from),
        "[a-z0-9,]{0,6}".prop_map(Json::from),
        Just(json!("RuntimeFailedConfig")),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Json::from),
            proptest::collection::btree_map("[a-c]", inner, 0..3).prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Mostly one of a few small integers, sometimes any JSON: parameter values and the entries'
/// settings then agree often enough for documents to get past the parameters to the entries.
fn mostly_small_int(values: std::ops::Range<i64>) -> impl Strategy<Value = Json> {
    prop_oneof![3 => values.prop_map(Json::from), 1 => any_json()]
}

/// A Kernel Tuner cache document: parameters `a` and `b`, entries that may or may not match.
fn cache_document() -> impl Strategy<Value = Json> {
    let entry = (
        mostly_small_int(0..4),
        mostly_small_int(1..3),
        prop_oneof![any_json(), (-5.0f64..5.0).prop_map(Json::from)],
        any_json(),
    );
    (proptest::collection::vec(mostly_small_int(0..4), 0..4), proptest::collection::vec(entry, 0..6)).prop_map(
        |(values, entries)| {
            let cache: Map<String, Json> = entries
                .into_iter()
                .enumerate()
                .map(|(i, (a, b, time, times))| (i.to_string(), json!({"a": a, "b": b, "time": time, "times": times})))
                .collect();
            json!({"tune_params": {"a": values, "b": [1, 2]}, "objective": "time", "cache": cache})
        },
    )
}

fn check(bytes: &[u8]) {
    if let Ok(landscape) = Landscape::parse(bytes, "property", "property") {
        let _ = landscape.space();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check(&bytes);
    }

    #[test]
    fn random_json_never_panics(document in any_json()) {
        check(document.to_string().as_bytes());
    }

    #[test]
    fn random_cache_documents_never_panic(document in cache_document()) {
        check(document.to_string().as_bytes());
    }
}

/// The properties above are only as good as their inputs: if no generated cache document
/// ever parsed, they would test the refusals alone and never `space()`.
#[test]
fn the_generated_cache_documents_reach_the_accepting_path() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = cache_document();
    let accepted = (0..256)
        .filter(|_| {
            let document = strategy.new_tree(&mut runner).expect("generates").current();
            Landscape::parse(document.to_string().as_bytes(), "property", "property")
                .is_ok_and(|landscape| landscape.space().is_ok())
        })
        .count();
    assert!(accepted >= 8, "{accepted} of 256 generated cache documents parsed and built a space");
}
