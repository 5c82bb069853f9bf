use std::path::PathBuf;

use kerntune_space::Value;

use super::*;

fn example(name: &str) -> KernelSpec {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda").join(name).join("spec.toml");
    KernelSpec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda/vector_add")
}

fn parse_error(text: &str) -> String {
    KernelSpec::parse(text, &example_dir().join("test.toml")).unwrap_err().to_string()
}

const MINIMAL: &str = r#"
[kernel]
name = "vector_add"
source = "vector_add.cu"
[problem]
n = 1000
[params]
block_size_x = [32, 64]
tile = [1, 2]
[launch]
problem_size = ["n"]
[[args]]
name = "c"
dtype = "f32"
size = "n"
output = true
"#;

#[test]
fn every_example_spec_loads_and_has_a_space() {
    for (name, expected) in
        [("vector_add", 20), ("matmul_naive", 24), ("matmul_register", 56), ("matmul_sram", 107), ("conv2d", 281)]
    {
        let spec = example(name);
        let space = spec.space().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(space.len(), expected, "{name}");
        for id in space.ids() {
            let config: Vec<Value> = space.values(id).into_iter().cloned().collect();
            spec.geometry(&config).unwrap_or_else(|e| panic!("{name} {}: {e}", space.describe(id)));
        }
    }
}

#[test]
fn matmul_sram_geometry_follows_kernel_tuner() {
    let spec = example("matmul_sram");
    let config = [Value::Int(16), Value::Int(8), Value::Int(4), Value::Int(16)];
    let geometry = spec.geometry(&config).expect("valid");
    assert_eq!(geometry.block, [16, 8, 1]);
    assert_eq!(geometry.grid, [4096 / 64, 4096 / 32, 1]);
    let source = spec.source_for(&config);
    assert!(source.starts_with("#define kerntune 1\n#define kernel_tuner 1\n#define block_size_x 16\n#define block_size_y 8\n#define V 4\n#define S 16\n#line 1 \"matmul.cu\"\n"));
    let tflops = spec.objective_value(&config, 4.92, &Map::new()).expect("evaluates");
    assert!((tflops - 2.0 * 4096f64.powi(3) / 4.92e-3 / 1e12).abs() < 1e-9);
    assert!(spec.objective.higher_is_better);
}

#[test]
fn restrictions_may_use_problem_variables_and_sit_under_params() {
    let spec = example("matmul_register");
    assert!(spec.restrictions.iter().any(|r| r == "(4096) % (block_size_x * V) == 0"), "{:?}", spec.restrictions);
    let spec = example("matmul_naive");
    assert_eq!(spec.restrictions, vec!["32 <= block_size_x * block_size_y <= 1024"]);
    assert_eq!(spec.params.len(), 2);
}

#[test]
fn option_templates_take_parameter_values_and_drop_empty_ones() {
    let text = MINIMAL
        .replace("source = \"vector_add.cu\"", "source = \"vector_add.cu\"\noptions = [\"-O3\", \"{regs}\"]")
        .replace("tile = [1, 2]", "tile = [1, 2]\nregs = [\"\", \"--maxrregcount=64\"]");
    let spec = KernelSpec::parse(&text, &example_dir().join("x.toml")).expect("parses");
    let config = |regs: &str| vec![Value::Int(32), Value::Int(1), Value::Str(regs.into())];
    assert_eq!(spec.options_for(&config("")), vec!["-O3"]);
    assert_eq!(spec.options_for(&config("--maxrregcount=64")), vec!["-O3", "--maxrregcount=64"]);
    assert!(!spec.source_for(&config("")).contains("#define regs"), "option parameters are not #defined");
}

#[test]
fn the_fingerprint_follows_what_is_measured_but_not_search_settings() {
    let path = &example_dir().join("x.toml");
    let base = KernelSpec::parse(MINIMAL, path).expect("parses").fingerprint;
    let searched =
        KernelSpec::parse(&format!("{MINIMAL}\n[search]\nstrategy = \"brute_force\"\n"), path).expect("parses");
    assert_eq!(searched.fingerprint, base);
    let bigger = KernelSpec::parse(&MINIMAL.replace("n = 1000", "n = 2000"), path).expect("parses");
    assert_ne!(bigger.fingerprint, base);
}

#[test]
fn mistakes_are_reported_with_their_key() {
    let cases = [
        (MINIMAL.replace("dtype = \"f32\"", "dtype = \"f31\""), "[[args]] c: unknown dtype 'f31'"),
        (MINIMAL.replace("size = \"n\"", "size = \"m\""), "[[args]] c size in 'm' at column 1: unknown name 'm'"),
        (
            MINIMAL.replace("problem_size = [\"n\"]", "problem_size = [\"n\"]\ngrid_div_x = \"blok_size_x\""),
            "[launch] grid_div_x in 'blok_size_x'",
        ),
        (MINIMAL.replace("[launch]", "[launch]\nthreads = 3"), "unknown field `threads`"),
        (MINIMAL.replace("vector_add.cu", "missing.cu"), "[kernel] source"),
        (
            format!("{MINIMAL}\n[verify]\nreference = {{ config = {{ block_size_x = 48, tile = 1 }} }}\n"),
            "48 is not a value of 'block_size_x'",
        ),
        (format!("{MINIMAL}\n[timing]\nflush = \"l3\"\n"), "[timing] flush 'l3'"),
        (format!("restrictions = [\"tile <\"]\n{MINIMAL}"), "restriction in 'tile <'"),
    ];
    for (text, expected) in cases {
        let message = parse_error(&text);
        assert!(message.contains(expected), "expected {expected:?} in {message:?}");
    }
}

#[test]
fn reference_outputs_are_files_per_output_buffer() {
    let text = format!("{MINIMAL}\n[verify]\nreference = {{ outputs = {{ c = \"expected.npy\" }} }}\n");
    let spec = KernelSpec::parse(&text, &example_dir().join("x.toml")).expect("parses");
    let Some(Verify { reference: Reference::Outputs(data), .. }) = &spec.verify else { panic!("outputs reference") };
    assert_eq!(data, &vec![Init::File(example_dir().join("expected.npy"))]);
    let wrong = format!("{MINIMAL}\n[verify]\nreference = {{ outputs = {{ a = \"x.bin\" }} }}\n");
    assert!(parse_error(&wrong).contains("no file for output 'c'"));
}

#[test]
fn a_ptxas_options_parameter_passes_its_flags_to_ptxas() {
    let text = MINIMAL.replace("tile = [1, 2]", "tile = [1, 2]\nptxas_options = [\"\", \"-O1 -dlcm=cg\"]");
    let spec = KernelSpec::parse(&text, &example_dir().join("x.toml")).expect("parses");
    let config = |flags: &str| vec![Value::Int(32), Value::Int(1), Value::Str(flags.into())];
    assert!(spec.options_for(&config("")).is_empty());
    assert_eq!(spec.options_for(&config("-O1 -dlcm=cg")), vec!["--ptxas-options=-O1", "--ptxas-options=-dlcm=cg"]);
    assert!(!spec.source_for(&config("-O1")).contains("ptxas_options"));
    assert_eq!(spec.ptxas_flags(), vec!["-O1", "-dlcm=cg"]);
}

/// A stand-in for ptxas that answers `--version` as ptxas 13.3.73 (or `version`) does.
fn fake_ptxas(dir: &std::path::Path, version: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("ptxas");
    let script = format!("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\necho 'Cuda compilation tools, release 13.3, V{version}'\n");
    std::fs::write(&path, script).expect("writes");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[test]
fn ptxas_knobs_in_compiler_controls_are_parameters_that_reach_ptxas_not_the_source() {
    let text = format!("{MINIMAL}\n[compiler.controls]\nmaxrregcount = [0, 128]\nopt_level = [3, 1]\n");
    let spec = KernelSpec::parse(&text, &example_dir().join("x.toml")).expect("parses");
    assert_eq!(spec.names(), ["n", "block_size_x", "tile", "maxrregcount", "opt_level"]);
    assert_eq!(spec.space().expect("space").len(), 16);
    let config = vec![Value::Int(32), Value::Int(1), Value::Int(128), Value::Int(1)];
    assert_eq!(spec.options_for(&config), ["--ptxas-options=--maxrregcount=128", "--ptxas-options=-O1"]);
    assert!(!spec.source_for(&config).contains("maxrregcount"), "a control is not #defined");
    assert_eq!(spec.ptxas_step(&config).expect("no chosen ptxas"), None);
}

#[test]
fn compiler_controls_that_are_unknown_or_need_a_chosen_ptxas_are_refused_in_one_line() {
    let unknown = parse_error(&format!("{MINIMAL}\n[compiler.controls]\nfast = [true]\n"));
    assert!(unknown.contains("[compiler.controls] 'fast' is not a compiler control (acf, ptxas_options"), "{unknown}");
    let renamed = parse_error(&format!("{MINIMAL}\n[compiler.controls]\ncutlass_name = [false, true]\n"));
    assert!(renamed.ends_with("cutlass_name renames the kernel in its PTX: it needs [compiler] ptxas"), "{renamed}");
    let missing = parse_error(&format!("{MINIMAL}\n[compiler.controls]\nacf = [\"none\", \"gone.acf\"]\n"));
    assert!(missing.contains("acf = \"gone.acf\": no such file"), "{missing}");
    let ptxas = parse_error(&format!("{MINIMAL}\n[compiler]\nptxas = \"./no-such-ptxas\"\n"));
    assert!(ptxas.ends_with("no-such-ptxas: no such file"), "{ptxas}");
    assert_eq!(ptxas.lines().count(), 1);
}

#[test]
fn a_chosen_ptxas_assembles_every_configuration_and_its_version_is_in_the_fingerprint() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(example_dir().join("vector_add.cu"), dir.path().join("vector_add.cu")).expect("copies");
    std::fs::write(dir.path().join("tuned.acf"), b"controls").expect("writes");
    let spec_with = |version: &str| {
        let ptxas = fake_ptxas(dir.path(), version);
        let text = format!(
            "{MINIMAL}\n[compiler]\nptxas = \"{}\"\n[compiler.controls]\nacf = [\"none\", \"tuned.acf\"]\ncutlass_name = [false, true]\n",
            ptxas.display()
        );
        KernelSpec::parse(&text, &dir.path().join("x.toml")).expect("parses")
    };
    let spec = spec_with("13.3.73");
    assert_eq!(spec.ptxas.as_ref().map(|p| p.version.as_str()), Some("13.3.73"));
    let plain = vec![Value::Int(32), Value::Int(1), Value::Str("none".into()), Value::Bool(false)];
    let step = spec.ptxas_step(&plain).expect("step").expect("a chosen ptxas");
    assert!(step.args.is_empty() && step.prefix.is_none(), "{step:?}");
    let tuned = vec![Value::Int(32), Value::Int(1), Value::Str("tuned.acf".into()), Value::Bool(true)];
    let step = spec.ptxas_step(&tuned).expect("step").expect("a chosen ptxas");
    assert_eq!(step.args, [format!("--apply-controls={}", dir.path().join("tuned.acf").display())]);
    assert_eq!(step.prefix.as_deref(), Some("cutlass_"));
    assert!(spec.options_for(&tuned).is_empty(), "controls go to the chosen ptxas, not NVRTC's");
    assert_ne!(spec.fingerprint, spec_with("13.3.80").fingerprint, "another ptxas, other results");
}

#[test]
fn a_spec_given_as_json_reads_like_its_toml() {
    let from_toml = KernelSpec::parse(MINIMAL, &example_dir().join("test.toml")).expect("parses");
    let json: Json = toml::from_str(MINIMAL).expect("TOML");
    let from_json = KernelSpec::from_json(&json.to_string(), &example_dir(), "test.toml").expect("parses");
    assert_eq!(from_json.fingerprint, from_toml.fingerprint);
    assert_eq!(
        from_json.geometry(&[Value::Int(64), Value::Int(2)]),
        from_toml.geometry(&[Value::Int(64), Value::Int(2)])
    );
}

#[test]
fn kernel_tuner_conventions_enter_the_identity_and_stand_in_for_the_launch() {
    let mut json: Json = toml::from_str(MINIMAL).expect("TOML");
    json.as_object_mut().expect("table").remove("launch");
    let without = KernelSpec::from_json(&json.to_string(), &example_dir(), "job").unwrap_err().to_string();
    assert!(without.contains("problem_size"), "{without}");
    json["kernel_tuner"] = serde_json::json!({"problem_size": 1000, "grid_div": [null, null, null]});
    let one = KernelSpec::from_json(&json.to_string(), &example_dir(), "job").expect("parses");
    json["kernel_tuner"]["problem_size"] = serde_json::json!(2000);
    let other = KernelSpec::from_json(&json.to_string(), &example_dir(), "job").expect("parses");
    assert_ne!(one.fingerprint, other.fingerprint);
}

#[test]
fn a_reference_config_checks_two_extra_input_sets_unless_sets_says_otherwise() {
    let reference = "[verify]\nreference = { config = { block_size_x = 64, tile = 1 } }\n";
    let spec = KernelSpec::parse(&format!("{MINIMAL}\n{reference}"), &example_dir().join("x.toml")).expect("parses");
    assert_eq!(spec.verify.as_ref().map(|v| v.sets), Some(kerntune_pipeline::protocol::DEFAULT_VERIFY_SETS));
    let spec =
        KernelSpec::parse(&format!("{MINIMAL}\n{reference}sets = 5\n"), &example_dir().join("x.toml")).expect("parses");
    assert_eq!(spec.verify.as_ref().map(|v| v.sets), Some(5));
}

#[test]
fn expected_outputs_check_the_specs_own_inputs_only_and_refuse_extra_sets() {
    let reference = "[verify]\nreference = { outputs = { c = \"expected.npy\" } }\n";
    let spec = KernelSpec::parse(&format!("{MINIMAL}\n{reference}"), &example_dir().join("x.toml")).expect("parses");
    assert_eq!(spec.verify.as_ref().map(|v| v.sets), Some(0));
    let message = parse_error(&format!("{MINIMAL}\n{reference}sets = 2\n"));
    assert!(message.contains("expected outputs fit the spec's own inputs only"), "{message}");
}

fn verified_sets(init: &str, verify: &str) -> u32 {
    use kerntune_pipeline::Language;
    let input = format!("[[args]]\nname = \"a\"\ndtype = \"f32\"\nsize = \"n\"\ninit = \"{init}\"\n");
    let spec =
        KernelSpec::parse(&format!("{MINIMAL}{input}\n{verify}"), &example_dir().join("x.toml")).expect("parses");
    let space = spec.space().expect("a space");
    let sets = crate::CudaLanguage::new(&spec, &space).verified_sets();
    sets
}

#[test]
fn a_reference_kernel_checks_random_inputs_on_extra_sets_and_fixed_inputs_on_one() {
    let verify = "[verify]\nreference = { config = { block_size_x = 32, tile = 1 } }\nsets = 3\n";
    assert_eq!(verified_sets("normal", verify), 4);
    assert_eq!(verified_sets("arange", verify), 1);
}

#[test]
fn expected_outputs_check_one_input_set_and_no_verify_none() {
    assert_eq!(verified_sets("normal", "[verify]\nreference = { outputs = { c = \"c.npy\" } }\n"), 1);
    assert_eq!(verified_sets("normal", ""), 0);
}

fn parse(text: &str) -> KernelSpec {
    KernelSpec::parse(text, &example_dir().join("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_energy_objective_requires_the_counter_and_reads_the_measured_values() {
    let spec = parse(&format!("{MINIMAL}\n[objective]\nname = \"energy\"\n"));
    assert_eq!(spec.timing.energy, EnergyMode::Require);
    assert!(!spec.objective.higher_is_better);
    let config = [Value::Int(32), Value::Int(1)];
    let Json::Object(metrics) = serde_json::json!({"energy_J": 0.002, "power_W": 300.0}) else { unreachable!() };
    assert_eq!(spec.objective_value(&config, 1.0, &metrics), Ok(0.002));
    let missing = spec.objective_value(&config, 1.0, &Map::new()).expect_err("not measured");
    assert!(missing.contains("energy was not measured"), "{missing}");
    // A slower configuration may use less energy: no early stop on time.
    use kerntune_pipeline::Language as _;
    let space = spec.space().expect("a space");
    assert!(!crate::CudaLanguage::new(&spec, &space).early_stop_applies());
    let timed = parse(MINIMAL);
    assert!(crate::CudaLanguage::new(&timed, &space).early_stop_applies());

    let per_element =
        parse(&format!("{MINIMAL}\n[objective]\nname = \"nJ/element\"\nexpression = \"energy_J * 1e9 / n\"\n"));
    assert_eq!(per_element.objective_value(&config, 1.0, &metrics), Ok(2000.0));
    assert_eq!(per_element.timing.energy, EnergyMode::Require);
    assert_eq!(parse(MINIMAL).timing.energy, EnergyMode::Off);
}

#[test]
fn an_objective_over_an_unknown_name_is_a_spec_error() {
    let error = parse_error(&format!("{MINIMAL}\n[objective]\nname = \"x\"\nexpression = \"enrgy * time\"\n"));
    assert!(error.contains("[objective] expression") && error.contains("unknown name 'enrgy'"), "{error}");
}

#[test]
fn settings_from_the_command_line_change_the_results_identity() {
    let base = parse(MINIMAL);
    let mut energy = parse(MINIMAL);
    energy.set_objective("edp", None).expect("valid");
    assert_eq!((energy.objective.name.as_str(), energy.timing.energy), ("edp", EnergyMode::Require));
    assert_ne!(energy.fingerprint, base.fingerprint);
    let mut graph = parse(MINIMAL);
    graph.set_graph_timing(true);
    assert!(graph.timing.graph && graph.fingerprint != base.fingerprint);
    let mut observed = parse(MINIMAL);
    observed.observe_energy();
    assert_eq!(observed.timing.energy, EnergyMode::Observe);
    assert_ne!(observed.fingerprint, base.fingerprint);
    let mut unchanged = parse(MINIMAL);
    unchanged.set_graph_timing(false);
    assert_eq!(unchanged.fingerprint, base.fingerprint, "the default changes nothing");
    assert!(parse(MINIMAL).set_objective("time * block", None).is_err());
}

#[test]
fn timing_graph_and_energy_are_read_from_the_timing_table() {
    let spec = parse(&format!("{MINIMAL}\n[timing]\ngraph = true\nenergy = true\n"));
    assert!(spec.timing.graph);
    assert_eq!(spec.timing.energy, EnergyMode::Observe);
}

#[test]
fn each_size_of_a_many_shape_spec_is_the_spec_with_its_problem_values_and_its_own_identity() {
    let sweep = format!("shapes = [{{ n = 4096 }}, {{ n = 64 }}]\n{MINIMAL}");
    let spec = KernelSpec::parse(&sweep, &example_dir().join("test.toml")).expect("a spec with shapes");
    let shapes = spec.shapes.clone().expect("its sizes");
    assert_eq!(shapes.len(), 2);
    let alone = KernelSpec::parse(MINIMAL, &example_dir().join("test.toml")).expect("the spec alone");
    assert_eq!(spec.fingerprint, alone.fingerprint, "the list of sizes is not part of what is measured");
    let large = spec.at(&shapes[0]).expect("the first size");
    assert_eq!(large.problem, vec![("n".to_string(), Value::Int(4096))]);
    assert_eq!(large.geometry(&[Value::Int(64), Value::Int(1)]).expect("a geometry").grid, [64, 1, 1]);
    assert_ne!(large.tuning_info("GPU").problem, alone.tuning_info("GPU").problem);
    let error = spec.at(&serde_json::json!({"m": 64}).as_object().cloned().unwrap()).unwrap_err().to_string();
    assert!(error.contains("shapes: 'm' is not a [problem] variable (the spec has n)"), "{error}");
}
