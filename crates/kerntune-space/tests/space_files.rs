//! The search-space files shipped in `data/spaces/` build to exactly the number of valid
//! configurations Kernel Tuner 1.5 counts for them.

use std::path::PathBuf;

use kerntune_space::{Neighbourhood, Rng, SpaceSpec};

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
