//! Properties of the kernel-spec reader on arbitrary input: the shipped example specs,
//! with lines deleted or duplicated and values replaced by random tokens, never make
//! `KernelSpec::parse` panic; what it accepts builds its space and launch geometry.

use std::path::{Path, PathBuf};

use kerntune_lang_cuda::KernelSpec;
use proptest::prelude::*;

fn examples() -> Vec<(PathBuf, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cuda");
    let mut specs: Vec<(PathBuf, String)> = std::fs::read_dir(&root)
        .expect("examples/cuda exists")
        .filter_map(|e| e.ok().map(|e| e.path().join("spec.toml")))
        .filter(|p| p.exists())
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("reads");
            (p, text)
        })
        .collect();
    specs.sort();
    assert!(!specs.is_empty());
    specs
}

const TOKENS: [&str; 16] = [
    "0",
    "-1",
    "\"n / 0\"",
    "\"\"",
    "[]",
    "[0]",
    "true",
    "1e400",
    "\"x\"",
    "{}",
    "\"(((\"",
    "[\"a\", 1]",
    "=",
    "[",
    "\"f64\"",
    "2147483648",
];

#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    /// Replace what follows `=` on a line.
    Value(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(line, token)| Edit::Value(line, token)),
    ]
}

fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for edit in edits {
        if lines.is_empty() {
            break;
        }
        match *edit {
            Edit::Delete(i) => {
                lines.remove(i % lines.len());
            }
            Edit::Duplicate(i) => {
                let line = lines[i % lines.len()].clone();
                lines.insert(i % lines.len(), line);
            }
            Edit::Value(i, token) => {
                let at = i % lines.len();
                if let Some((key, _)) = lines[at].split_once('=') {
                    lines[at] = format!("{key}= {}", TOKENS[token]);
                }
            }
        }
    }
    lines.join("\n")
}

fn check(text: &str, path: &Path) {
    if let Ok(spec) = KernelSpec::parse(text, path) {
        if let Ok(space) = spec.space() {
            if let Some(id) = space.ids().next() {
                let values: Vec<_> = space.values(id).into_iter().cloned().collect();
                let _ = spec.geometry(&values);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mutated_example_specs_never_panic(which in any::<usize>(), edits in proptest::collection::vec(edit(), 1..6)) {
        let specs = examples();
        let (path, text) = &specs[which % specs.len()];
        check(&mutate(text, &edits), path);
    }

    #[test]
    fn random_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check(&String::from_utf8_lossy(&bytes), Path::new("examples/cuda/vector_add/spec.toml"));
    }
}
