//! The search-space files shipped in `data/spaces/` build to exactly the number of valid
//! configurations Kernel Tuner 1.5 counts for them.

use std::path::PathBuf;

use kerntune_space::{MemoryCap, Neighbourhood, Rng, SpaceError, SpaceSpec, BYTES_PER_CONFIG};

fn spec(name: &str) -> SpaceSpec {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/spaces").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("valid space file")
}

#[test]
fn shipped_spaces_have_kernel_tuners_counts() {
    for (name, count) in
        [("clblast_gemm_full", 241_600), ("triton_matmul_wide", 443_100), ("triton_matmul_huge", 3_755_808)]
    {
        assert_eq!(spec(name).build().expect("builds").len(), count, "{name}");
    }
}

#[test]
fn every_sampled_config_satisfies_the_restrictions_and_its_neighbours_too() {
    let spec = spec("triton_matmul_wide");
    let space = spec.build().expect("builds");
    let mut rng = Rng::seeded(5);
    for _ in 0..200 {
        let id = space.sample(&mut rng).expect("non-empty");
        let neighbours = space.neighbours(id, Neighbourhood::Hamming);
        for config in std::iter::once(id).chain(neighbours) {
            let values: Vec<_> = space.values(config).into_iter().cloned().collect();
            for restriction in space.restrictions() {
                assert_eq!(restriction.holds_with(&values), Ok(true), "{}", space.describe(config));
            }
            assert_eq!(space.id_of(&space.indexes(config)), Some(config));
        }
    }
}

/// Parameters `p0`, `p1`, ... of the values 1 to 20 each.
fn twenty_values_each(params: usize, restrictions: &[&str]) -> SpaceSpec {
    let values: Vec<u32> = (1..=20).collect();
    SpaceSpec {
        name: None,
        tune_params: (0..params).map(|p| (format!("p{p}"), serde_json::json!(values))).collect(),
        restrictions: kerntune_space::Restrictions::Many(restrictions.iter().map(|r| r.to_string()).collect()),
        max_threads: None,
    }
}

/// Issue 17 item 1: twelve parameters of twenty values under a restriction that keeps about
/// half of them (2 x 10^15 configurations, 24 PB at 12 bytes each) used to eat memory at
/// 400 MB/s until the machine died. It is refused with its estimate, before any large
/// allocation, in a few milliseconds.
#[test]
fn a_space_far_over_the_memory_cap_is_refused_with_its_estimate() {
    let spec = twenty_values_each(12, &["p0 + p1 <= 21"]);
    let clock = std::time::Instant::now();
    let error = spec.build_with_memory_cap(MemoryCap::DEFAULT).unwrap_err();
    assert!(clock.elapsed().as_secs_f64() < 2.0, "the refusal took {:?}", clock.elapsed());
    let SpaceError::TooMuchMemory { estimate, cap } = &error else { panic!("{error}") };
    assert_eq!(*cap, MemoryCap::DEFAULT);
    assert_eq!(estimate.product, 20u64.pow(12));
    // 210 of the 400 (p0, p1) pairs pass: 52.5%.
    let share = estimate.accepted as f64 / estimate.sampled as f64;
    assert!((share - 0.525).abs() < 0.03, "{share}");
    let message = error.to_string();
    for part in [
        "too large to enumerate",
        "of a product of 4096000000000000",
        "over the 1.0 GiB cap",
        "--sample",
        "KERNTUNE_SPACE_MEMORY",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

#[test]
fn a_space_under_its_cap_enumerates_fully_and_one_cap_lower_is_refused() {
    let spec = spec("triton_matmul_wide");
    let exact = MemoryCap(443_100 * BYTES_PER_CONFIG);
    assert_eq!(spec.build_with_memory_cap(exact).expect("fits exactly").len(), 443_100);
    // The estimate may fall either side of the cap this close to it: whichever error it is,
    // the space is refused, not enumerated past the cap.
    let error = spec.build_with_memory_cap(MemoryCap(exact.0 - BYTES_PER_CONFIG)).unwrap_err();
    assert!(
        matches!(error, SpaceError::TooMuchMemory { .. } | SpaceError::MemoryCapReached { configs: 443_099, .. }),
        "{error}"
    );
}

#[test]
fn sampling_without_enumerating_draws_valid_configs_of_a_space_too_large_to_build() {
    let spec = twenty_values_each(12, &["p0 + p1 <= 21", "p2 % 4 == 0"]);
    let configs = spec.sample(1000, &mut Rng::seeded(1)).expect("samples");
    assert_eq!(configs.len(), 1000);
    for config in &configs {
        let value = |name: &str| config[name].as_i64().expect("int");
        assert!(value("p0") + value("p1") <= 21 && value("p2") % 4 == 0, "{config:?}");
    }
    assert_eq!(spec.sample(1000, &mut Rng::seeded(1)).expect("samples"), configs, "the seed decides");
}

#[test]
fn sampling_a_space_the_restrictions_almost_empty_gives_up_with_the_counts() {
    let spec = twenty_values_each(8, &["p0 + p1 + p2 + p3 + p4 + p5 + p6 + p7 == 8"]);
    let error = spec.sample(1, &mut Rng::seeded(1)).unwrap_err();
    let SpaceError::TooRareToSample { wanted: 1, found: 0, attempts } = error else { panic!("{error}") };
    assert_eq!(attempts, kerntune_space::Space::MAX_SAMPLE_ATTEMPTS);
}

#[test]
fn a_build_reports_its_progress_rising_to_the_whole() {
    let spec: SpaceSpec = serde_json::from_str(
        r#"{"tune_params": {"a": [1, 2, 3, 4], "b": [1, 2, 3], "c": [1, 2]}, "restrictions": ["a * b > 2"]}"#,
    )
    .expect("a space file");
    let mut shares = Vec::new();
    let space = spec.build_with_progress(MemoryCap::DEFAULT, &mut |done| shares.push(done)).expect("builds");
    assert_eq!(space.len(), spec.build().expect("builds").len());
    assert!(shares.windows(2).all(|w| w[0] <= w[1]), "{shares:?}");
    assert!(shares.len() >= 4 && (shares.last().copied().unwrap_or(0.0) - 1.0).abs() < 1e-12, "{shares:?}");
}
