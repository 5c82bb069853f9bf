//! `[verify] sizes` from the spec to what the benchmark worker is told, without a GPU: each
//! edge size's arguments and reference launch in the setup, and each configuration's
//! launch there (or none, where its restrictions exclude it).

use std::cell::Cell;
use std::path::PathBuf;

use kerntune_device::DeviceInfo;
use kerntune_lang_cuda::{CudaLanguage, Instance, KernelSpec};
use kerntune_pipeline::protocol::{ArgSetup, ReferenceSetup, Setup};
use kerntune_pipeline::{Binary, Flush, Language, LanguageError};
use kerntune_space::{Space, Value};

/// Rows of n elements, tiled by block_size_x * tile; tiles of 4 apply only where they
/// divide n (a kernel that skips the tail check, as tiled kernels often do).
const SPEC: &str = r#"
restrictions = ["tile == 1 or n % (block_size_x * tile) == 0"]
[kernel]
name = "vector_add"
source = "vector_add.cu"
[problem]
n = 4096
rows = 2
[params]
block_size_x = [32, 64]
tile = [1, 4]
[launch]
problem_size = ["n"]
grid_div_x = ["block_size_x", "tile"]
[[args]]
name = "c"
dtype = "f32"
size = "n * rows"
output = true
[[args]]
name = "a"
dtype = "f32"
size = "n * rows"
init = "normal"
[[args]]
name = "n"
dtype = "i32"
value = "n"
[verify]
reference = { kernel = "reference", grid = ["n", "rows"], block = [1] }
sizes = [{ n = 4095 }]
"#;

fn spec() -> KernelSpec {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add");
    KernelSpec::parse(SPEC, &folder.join("edges.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn target() -> DeviceInfo {
    DeviceInfo::compile_target("sm_90").expect("a target")
}

/// The setup, with every compile answered by a cubin of one byte; also how many compiles
/// were asked for.
fn setup(language: &CudaLanguage<'_>) -> (Setup, usize) {
    let compiles = Cell::new(0);
    let mut compile = |_| {
        compiles.set(compiles.get() + 1);
        Ok(Binary { cubin: vec![7], launch: None, symbol: Some("_Z9referencev".into()) })
    };
    let setup = language.setup(&target(), &mut compile).unwrap_or_else(|e| panic!("{e}"));
    (setup, compiles.get())
}

fn lengths(args: &[ArgSetup]) -> Vec<usize> {
    args.iter().filter_map(|a| if let ArgSetup::Buffer { len, .. } = a { Some(*len) } else { None }).collect()
}

fn scalar(args: &[ArgSetup]) -> Vec<u8> {
    args.iter()
        .find_map(|a| if let ArgSetup::Scalar { bytes, .. } = a { Some(bytes.0.clone()) } else { None })
        .expect("n")
}

fn reference_grid(setup: &Setup) -> [u32; 3] {
    match &setup.reference {
        Some(ReferenceSetup::Kernel(image)) => image.geometry.grid,
        other => panic!("a reference kernel, not {other:?}"),
    }
}

fn config(space: &Space, block: i64, tile: i64) -> Vec<Value> {
    let values = [Value::Int(block), Value::Int(tile)];
    let id = space.id_of_values(&values).expect("in the space");
    space.values(id).into_iter().cloned().collect()
}

#[test]
fn each_edge_size_has_its_own_arguments_and_reference_launch_from_one_compile() {
    let spec = spec();
    let space = spec.space().expect("a space");
    let (setup, compiles) = setup(&CudaLanguage::new(&spec, &space));
    assert_eq!(compiles, 1, "the reference compiles once: its source does not depend on the problem");
    assert_eq!(lengths(&setup.args), [8192, 8192]);
    assert_eq!(scalar(&setup.args), 4096i32.to_le_bytes());
    assert_eq!(reference_grid(&setup), [4096, 2, 1]);
    let [edge] = setup.edges.as_slice() else { panic!("one edge size: {:?}", setup.edges.len()) };
    assert_eq!(edge.label, "n = 4095");
    assert_eq!(lengths(&edge.setup.args), [8190, 8190], "rows stays 2");
    assert_eq!(scalar(&edge.setup.args), 4095i32.to_le_bytes());
    assert_eq!(reference_grid(&edge.setup), [4095, 2, 1]);
    assert_eq!(edge.setup.tolerances, setup.tolerances);
    assert!(edge.setup.edges.is_empty() && edge.setup.verify_sets == 0, "one check per edge size");
    assert_eq!(edge.setup.timing.flush, Flush::None, "never timed: no flush buffer to allocate");
}

#[test]
fn a_configuration_launches_at_an_edge_size_with_the_geometry_there_unless_excluded() {
    let spec = spec();
    let space = spec.space().expect("a space");
    let language = CudaLanguage::new(&spec, &space);
    let image = |block, tile| {
        let binary = Binary { cubin: vec![1], launch: None, symbol: None };
        language.kernel_image(&config(&space, block, tile), binary).unwrap_or_else(|e| panic!("{e}"))
    };
    let tiled = image(64, 1);
    assert_eq!(tiled.geometry.grid, [64, 1, 1]);
    let edge = tiled.edges.as_slice();
    assert_eq!(edge.len(), 1);
    assert_eq!(edge[0].map(|g| g.grid), Some([64, 1, 1]), "ceil(4095 / 64)");
    assert_eq!(image(32, 1).edges[0].map(|g| g.grid), Some([128, 1, 1]));
    let excluded = image(64, 4);
    assert_eq!(excluded.geometry.grid, [16, 1, 1], "4096 is a multiple of 256: tuned at the spec's size");
    assert_eq!(excluded.edges, [None], "its restriction excludes it at 4095: not checked there");
}

#[test]
fn edge_sizes_count_among_the_verified_sets_and_are_named() {
    let spec = spec();
    let space = spec.space().expect("a space");
    let language = CudaLanguage::new(&spec, &space);
    assert_eq!(language.verified_sets(), 1 + 2 + 1, "the spec's inputs, 2 redrawn, 1 edge size");
    assert_eq!(language.verified_sizes(), ["n = 4095"]);
}

#[test]
fn a_front_with_launch_rules_of_its_own_cannot_take_edge_sizes() {
    let spec = spec();
    let space = spec.space().expect("a space");
    let instance = |config: &[Value]| {
        Ok(Instance {
            source: String::new(),
            name: "k".into(),
            geometry: spec.geometry(config).map_err(|e| e.to_string())?,
        })
    };
    let language = CudaLanguage::new(&spec, &space).with_instances(Box::new(instance));
    let error = language.setup(&target(), &mut |_| Err("no compile".into())).expect_err("refused");
    assert!(
        matches!(&error, LanguageError::Setup(reason) if reason.contains("[verify] sizes needs the spec's own launch rules")),
        "{error}"
    );
}
