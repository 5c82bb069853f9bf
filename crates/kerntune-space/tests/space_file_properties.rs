//! Properties of the space-file reader on arbitrary input: random bytes, and documents with
//! random parameters (values of every JSON type) and random restrictions, never make
//! reading or building a space panic.

use kerntune_space::SpaceSpec;
use proptest::prelude::*;
use serde_json::{json, Value as Json};

fn value() -> impl Strategy<Value = Json> {
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        (-1e6f64..1e6).prop_map(Json::from),
        "[a-z]{0,3}".prop_map(Json::from),
        Just(json!([1, 2])),
        Just(json!({})),
    ]
}

fn document() -> impl Strategy<Value = Json> {
    let params = proptest::collection::btree_map(
        "[a-d]",
        prop_oneof![proptest::collection::vec(value(), 0..4).prop_map(Json::from), value()],
        0..4,
    );
    let restriction = prop_oneof![
        "[a-d] [<>=!]=? [0-9]".prop_map(Json::from),
        "[a-d ()+*/%<>=!0-9]{0,12}".prop_map(Json::from),
        value(),
    ];
    (params, proptest::collection::vec(restriction, 0..3), any::<bool>()).prop_map(|(params, restrictions, as_list)| {
        let params: serde_json::Map<String, Json> = params.into_iter().collect();
        if as_list {
            json!({"tune_params": params, "restrictions": restrictions})
        } else {
            json!({"tune_params": params, "restrictions": restrictions.first().cloned().unwrap_or(Json::Null)})
        }
    })
}

fn check(text: &str) {
    if let Ok(spec) = serde_json::from_str::<SpaceSpec>(text) {
        let _ = spec.build();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_space_documents_never_panic(document in document()) {
        check(&document.to_string());
    }
}

/// The properties above are only as good as their inputs: generated documents must also
/// build spaces, not only be refused, for `build` to be exercised past its checks.
#[test]
fn the_generated_documents_reach_a_built_space() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = document();
    let built = (0..256)
        .filter(|_| {
            let document = strategy.new_tree(&mut runner).expect("generates").current();
            serde_json::from_str::<SpaceSpec>(&document.to_string()).is_ok_and(|spec| spec.build().is_ok())
        })
        .count();
    assert!(built >= 16, "{built} of 256 generated documents built a space");
}
