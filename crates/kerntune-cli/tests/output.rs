//! What users see: snapshots of `kerntune`'s human and JSON output, its help and its
//! one-line errors with their exit codes, so that every change to them is reviewed as a diff.
//!
//! Snapshots live in `tests/snapshots/`; `cargo insta review` shows what changed (see
//! docs/contributing.md). Wall-clock times, timestamps, temporary paths, the checkout's
//! path and the version are replaced by placeholders; simulated results are deterministic
//! for a seed and are kept as they are.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use insta::Settings;
use serde_json::Value as Json;
use tempfile::TempDir;

/// A temporary folder for a test's files and databases, and the filters that make its
/// snapshots the same on every machine and run.
struct Session {
    dir: TempDir,
    settings: Settings,
}

/// One run of `kerntune`: the command line as typed, its exit code and its two streams.
struct Run {
    command: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Session {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut settings = Settings::clone_current();
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        for path in [dir.path().to_path_buf(), dir.path().canonicalize().expect("temp dir exists")] {
            settings.add_filter(&regex_literal(&path.display().to_string()), "[TEMP]");
        }
        settings.add_filter(&regex_literal(&checkout().display().to_string()), "[REPO]");
        // Wall-clock times: building a space, checking a dry run, the strategy's own time
        // (the simulated clock and the recorded costs are deterministic and stay).
        settings.add_filter(&format!(r"(built|checked) in {DURATION}"), "$1 in [WALL]");
        settings.add_filter(&format!(r"strategy {DURATION}"), "strategy [WALL]");
        settings.add_filter(&format!(r"(?m)  {DURATION}$"), "  [WALL]");
        settings.add_filter(
            r#""(seconds|strategy_seconds|strategy_time|search_algorithm)": [0-9.eE+-]+"#,
            r#""$1": "[WALL]""#,
        );
        settings.add_filter(r#""timestamp": "[^"]*""#, r#""timestamp": "[TIMESTAMP]""#);
        settings.add_filter(r"kerntune \d+\.\d+\.\d+\S*", "kerntune [VERSION]");
        Session { dir, settings }
    }

    /// A path in the session's temporary folder, as an argument.
    fn temp(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Writes a file into the temporary folder and returns its path.
    fn write(&self, name: &str, contents: &str) -> String {
        std::fs::write(self.dir.path().join(name), contents).expect("writes");
        self.temp(name)
    }

    /// Runs `kerntune` as a user's shell would, but with a fixed terminal width, no
    /// terminal on any stream (so no progress bar and no colour) and a database default
    /// inside the temporary folder.
    fn run(&self, args: &[&str]) -> Run {
        let output = Command::new(common::kerntune_binary())
            .args(args)
            .stdin(Stdio::null())
            .env("COLUMNS", "100")
            .env("KERNTUNE_DB", self.temp("default.db"))
            .env_remove("KERNTUNE_SPACE_MEMORY")
            .env_remove("CLICOLOR_FORCE")
            .output()
            .expect("kerntune runs");
        Run {
            command: format!("kerntune {}", args.join(" ")),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The run's exit code and both streams, as they appeared.
    fn snapshot(&self, name: &str, run: &Run) {
        self.settings.bind(|| insta::assert_snapshot!(name, run.transcript(&run.stdout)));
    }

    /// The same, with standard output checked to be one JSON value on one line and shown
    /// indented, so that a change to one field is a one-line diff.
    fn snapshot_json(&self, name: &str, run: &Run) {
        assert_eq!(run.stdout.lines().count(), 1, "{}: not one line:\n{}", run.command, run.stdout);
        let value: Json =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{}: {e}: {}", run.command, run.stdout));
        let pretty = serde_json::to_string_pretty(&value).expect("serialises") + "\n";
        self.settings.bind(|| insta::assert_snapshot!(name, run.transcript(&pretty)));
    }
}

impl Run {
    fn transcript(&self, stdout: &str) -> String {
        let code = self.code.map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
        format!("$ {}\nexit code: {code}\n--- stdout\n{stdout}--- stderr\n{}", self.command, self.stderr)
    }
}

/// The checkout, without `..` so that it matches the paths kerntune prints.
fn checkout() -> PathBuf {
    Path::new(&common::repo("")).canonicalize().expect("the checkout exists")
}

/// A file of the checkout, as an argument.
fn shipped(path: &str) -> String {
    checkout().join(path).display().to_string()
}

/// `text` as a regular expression that matches exactly it.
fn regex_literal(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// A duration as `render::duration` writes it: `350 ms`, `4.2 s`, `4m 39s`, `2h 05m`.
const DURATION: &str = r"(?:\d+(?:\.\d+)? m?s|\d+m \d{2}s|\d+h \d{2}m)\b";

const PNPOLY: &str = "data/landscapes/pnpoly_RTX_3090.json.gz";

mod simulate {
    use super::*;

    #[test]
    fn the_shipped_landscape_with_the_default_strategy() {
        let session = Session::new();
        let run = session.run(&["simulate", "--max-fevals", "20", "--seed", "3"]);
        session.snapshot("simulate_default", &run);
    }

    #[test]
    fn the_shipped_landscape_as_json() {
        let session = Session::new();
        let run = session.run(&["simulate", "--max-fevals", "20", "--seed", "3", "--json"]);
        session.snapshot_json("simulate_default_json", &run);
    }

    #[test]
    fn a_given_landscape_with_a_strategy_its_options_and_a_seed() {
        let session = Session::new();
        let landscape = shipped(PNPOLY);
        let run = session.run(&[
            "simulate",
            &landscape,
            "--strategy",
            "genetic_algorithm",
            "--option",
            "population_size=8",
            "--max-fevals",
            "30",
            "--seed",
            "7",
        ]);
        session.snapshot("simulate_pnpoly_genetic_algorithm", &run);
    }

    #[test]
    fn a_given_landscape_as_json() {
        let session = Session::new();
        let landscape = shipped(PNPOLY);
        let run = session.run(&["simulate", &landscape, "--strategy", "random_sample", "--max-fevals", "10", "--json"]);
        session.snapshot_json("simulate_pnpoly_random_sample_json", &run);
    }

    #[test]
    fn brute_force_runs_the_whole_space_and_says_so() {
        let session = Session::new();
        let landscape = shipped(PNPOLY);
        let run = session.run(&["simulate", &landscape, "--strategy", "brute_force"]);
        session.snapshot("simulate_pnpoly_brute_force", &run);
    }

    #[test]
    fn a_second_run_with_a_database_is_answered_by_the_store() {
        let session = Session::new();
        let landscape = shipped(PNPOLY);
        let db = session.temp("results.db");
        let args = ["simulate", &landscape, "--strategy", "random_sample", "--max-fevals", "10", "--db", &db];
        let first = session.run(&args);
        assert_eq!(first.code, Some(0), "{}", first.stderr);
        session.snapshot("simulate_pnpoly_from_the_store", &session.run(&args));
    }
}

mod strategies {
    use super::*;

    #[test]
    fn the_listing_with_every_strategys_options() {
        let session = Session::new();
        session.snapshot("strategies", &session.run(&["strategies"]));
    }

    #[test]
    fn the_listing_as_json() {
        let session = Session::new();
        session.snapshot_json("strategies_json", &session.run(&["strategies", "--json"]));
    }
}

mod space {
    use super::*;

    #[test]
    fn a_shipped_space_file_counted() {
        let session = Session::new();
        let file = shipped("data/spaces/clblast_gemm_full.json");
        session.snapshot("space_clblast_gemm_full", &session.run(&["space", &file]));
        session.snapshot_json("space_clblast_gemm_full_json", &session.run(&["space", &file, "--json"]));
    }

    #[test]
    fn a_sample_of_configurations_for_a_seed() {
        let session = Session::new();
        let file = shipped("data/spaces/clblast_gemm_full.json");
        let run = session.run(&["space", &file, "--sample", "3", "--seed", "1"]);
        session.snapshot("space_clblast_gemm_full_sample", &run);
    }
}

mod tune {
    use super::*;

    #[test]
    fn a_dry_run_checks_the_space_without_a_gpu() {
        let session = Session::new();
        let spec = shipped("examples/cuda/matmul_sram/spec.toml");
        session.snapshot("tune_dry_run", &session.run(&["tune", &spec, "--dry-run"]));
        session.snapshot_json("tune_dry_run_json", &session.run(&["tune", &spec, "--dry-run", "--json"]));
    }
}

mod results {
    use super::*;

    #[test]
    fn import_then_show_the_best_configurations() {
        let session = Session::new();
        let db = session.temp("imported.db");
        session.snapshot("import", &session.run(&["import", &shipped(PNPOLY), "--db", &db]));
        session.snapshot("results", &session.run(&["results", &db, "--top", "3"]));
        session.snapshot_json("results_json", &session.run(&["results", &db, "--top", "2", "--json"]));
    }

    #[test]
    fn report_writes_a_page_or_says_in_one_line_why_not() {
        let session = Session::new();
        let db = session.temp("imported.db");
        session.run(&["import", &shipped(PNPOLY), "--db", &db]);
        let page = session.temp("report.html");
        session.snapshot("report", &session.run(&["report", &db, "-o", &page]));
        session.snapshot("report_unknown_tuning", &session.run(&["report", &db, "--tuning", "7", "-o", &page]));
    }

    #[test]
    fn export_as_kernel_tuner_cache_and_as_t4() {
        let session = Session::new();
        let db = session.temp("results.db");
        let simulated = session.run(&[
            "simulate",
            &shipped(PNPOLY),
            "--strategy",
            "random_sample",
            "--max-fevals",
            "5",
            "--db",
            &db,
        ]);
        assert_eq!(simulated.code, Some(0), "{}", simulated.stderr);
        session.snapshot("export_kernel_tuner", &session.run(&["export", &db]));
        session.snapshot("export_t4", &session.run(&["export", &db, "--format", "t4"]));
        let written = session.run(&["export", &db, "--format", "t4", "-o", &session.temp("out.json")]);
        session.snapshot("export_to_a_file", &written);
        session.snapshot("export_header", &session.run(&["export", &db, "--format", "header"]));
        session.snapshot("export_triton", &session.run(&["export", &db, "--format", "triton", "--top", "2"]));
    }

    /// The header is for C and C++ code: it compiles as both, where a compiler is at hand.
    #[test]
    fn the_exported_header_compiles_as_c_and_as_cpp() {
        let session = Session::new();
        let db = session.temp("results.db");
        let args = ["simulate", &shipped(PNPOLY), "--max-fevals", "5", "--strategy", "random_sample", "--db", &db];
        assert_eq!(session.run(&args).code, Some(0));
        let header = session.temp("pnpoly_tuned.h");
        assert_eq!(session.run(&["export", &db, "--format", "header", "-o", &header]).code, Some(0));
        let source = session.temp("use.c");
        std::fs::write(&source, "#include \"pnpoly_tuned.h\"\nint main(void) { return 0; }\n").expect("writes");
        compiles_as_c_and_cpp(&source);
    }

    #[test]
    fn several_problems_of_one_kernel_export_as_one_header_table() {
        let session = Session::new();
        let db = session.temp("results.db");
        // The shipped landscape, and a copy that names another problem: two tunings of one kernel.
        let other = session.temp("pnpoly_other.json");
        let copied = std::process::Command::new("python3")
            .args(["-c", "import gzip, json, sys; d = json.load(gzip.open(sys.argv[1])); d['problem_size'] = [1234]; json.dump(d, open(sys.argv[2], 'w'))"])
            .args([&shipped(PNPOLY), &other])
            .status()
            .expect("python3 runs");
        assert!(copied.success());
        for landscape in [shipped(PNPOLY), other] {
            let args = ["simulate", &landscape, "--max-fevals", "5", "--strategy", "random_sample", "--db", &db];
            assert_eq!(session.run(&args).code, Some(0));
        }
        let header = session.temp("pnpoly_tuned.h");
        let exported = session.run(&["export", &db, "--format", "header", "-o", &header]);
        assert_eq!(exported.code, Some(0), "{}", exported.stderr);
        let text = std::fs::read_to_string(&header).expect("a header");
        assert!(text.contains("_CONFIG_COUNT 2\n"), "{text}");
        assert!(text.contains("[1234]"), "{text}");
        let source = session.temp("use.c");
        std::fs::write(&source, "#include \"pnpoly_tuned.h\"\nint main(void) { return 0; }\n").expect("writes");
        compiles_as_c_and_cpp(&source);
    }

    /// Compiles `source` as C and as C++ with warnings as errors, where the compilers are.
    fn compiles_as_c_and_cpp(source: &str) {
        for (compiler, language) in [("cc", "c"), ("c++", "c++")] {
            let Ok(output) = std::process::Command::new(compiler)
                .args(["-fsyntax-only", "-Wall", "-Werror", "-x", language, source])
                .output()
            else {
                eprintln!("skipped: no {compiler} on this machine");
                continue;
            };
            assert!(output.status.success(), "{compiler}: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
}

mod compare_strategies {
    use super::*;

    #[test]
    fn two_strategies_on_a_tiny_budget() {
        let session = Session::new();
        let landscape = shipped(PNPOLY);
        let args = ["compare-strategies", &landscape, "--strategies", "random_sample,default", "--budgets", "10,20"];
        let args = [&args[..], &["--seeds", "2"]].concat();
        session.snapshot("compare_strategies", &session.run(&args));
        session.snapshot_json("compare_strategies_json", &session.run(&[&args[..], &["--json"]].concat()));
    }
}

/// `kerntune table export`: a dispatch table as vLLM's fused-MoE file and as a C/C++
/// header, their help and their errors.
mod table {
    use super::*;

    /// A table of two batch sizes of vLLM's fused-MoE kernel, the larger one first.
    const MOE_TABLE: &str = r#"{"format": "kerntune dispatch table", "kernel": "fused_moe_kernel", "key": ["M"], "entries": [
 {"key": [64], "config": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}},
 {"key": [1], "config": {"num_stages": 4, "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 16, "num_warps": 4}}]}"#;

    const H100: [&str; 7] =
        ["vllm-moe", "--experts", "8", "--intermediate", "7168", "--device-name", "NVIDIA H100 80GB HBM3"];

    #[test]
    fn a_table_exports_as_vllms_file_and_as_a_c_header() {
        let session = Session::new();
        let table = session.write("moe.json", MOE_TABLE);
        let vllm = [&["table", "export", &table][..], &H100, &["--triton-version", "3.6.0"]].concat();
        session.snapshot("table_export_vllm_moe", &session.run(&vllm));
        session.snapshot("table_export_c_header", &session.run(&["table", "export", &table, "c-header"]));
        let folder = session.temp("");
        let written = session.run(&[&["table", "export", &table, "-o", &folder][..], &H100].concat());
        session.snapshot("table_export_to_a_folder", &written);
        let file = session.dir.path().join("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json");
        assert!(file.is_file(), "{}", written.stderr);
        let json = session.run(&[&["table", "export", &table, "--json", "-o", &folder][..], &H100].concat());
        session.snapshot_json("table_export_json", &json);
    }

    #[test]
    fn help_of_table_export() {
        let session = Session::new();
        session.snapshot("help_table_export", &session.run(&["table", "export", "--help"]));
        session
            .snapshot("help_table_export_vllm_moe", &session.run(&["table", "export", "t.json", "vllm-moe", "--help"]));
    }

    #[test]
    fn tables_that_cannot_be_exported_get_one_line_and_usage_mistakes_exit_2() {
        let session = Session::new();
        let junk = session.write("junk.json", "[1, 2]");
        let lacking = session.write("lacking.json", &MOE_TABLE.replace("\"GROUP_SIZE_M\": 16, ", ""));
        let cases: [(&str, Vec<&str>); 3] = [
            ("error_table_not_a_table", [&["table", "export", &junk][..], &H100].concat()),
            ("error_table_lacks_a_vllm_key", [&["table", "export", &lacking][..], &H100].concat()),
            ("error_table_vllm_moe_without_its_shape", vec!["table", "export", &junk, "vllm-moe", "--experts", "8"]),
        ];
        for (name, args) in cases {
            let run = session.run(&args);
            assert!(!run.stderr.contains("panicked"), "{}: {}", run.command, run.stderr);
            session.snapshot(name, &run);
        }
    }
}

mod help {
    use super::*;

    #[test]
    fn top_level_help_and_version() {
        let session = Session::new();
        session.snapshot("help", &session.run(&["--help"]));
        session.snapshot("version", &session.run(&["--version"]));
    }

    #[test]
    fn help_of_the_commands_that_tune() {
        let session = Session::new();
        session.snapshot("help_tune", &session.run(&["tune", "--help"]));
        session.snapshot("help_simulate", &session.run(&["simulate", "--help"]));
    }
}

/// Errors are one line on standard error with exit code 1; usage mistakes are the argument
/// parser's message with exit code 2.
mod errors {
    use super::*;

    #[test]
    fn each_bad_input_gets_its_one_line_and_exit_code() {
        let session = Session::new();
        let bad_restriction =
            session.write("space.json", r#"{"tune_params": {"a": [1, 2]}, "restrictions": ["a *% 2 < 4"]}"#);
        let cases: [(&str, &[&str]); 8] = [
            ("error_missing_landscape", &["simulate", "missing.json"]),
            ("error_missing_spec", &["tune", "missing.toml", "--dry-run"]),
            ("error_bad_restriction", &["space", &bad_restriction]),
            ("error_unknown_strategy", &["simulate", "--strategy", "genetik"]),
            ("error_unknown_option", &["simulate", "--strategy", "genetic_algorithm", "--option", "popsize=3"]),
            ("error_option_out_of_range", &["simulate", "--strategy", "pso", "--option", "swarm_size=0"]),
            ("error_target_nan", &["simulate", "--target", "nan"]),
            ("error_unknown_flag", &["simulate", "--no-such-flag"]),
        ];
        for (name, args) in cases {
            let run = session.run(args);
            assert!(!run.stderr.contains("panicked"), "{}: {}", run.command, run.stderr);
            session.snapshot(name, &run);
        }
    }
}
