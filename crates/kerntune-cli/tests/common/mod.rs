//! What the CLI's test binaries share: running `kerntune` and finding the checkout's files.
//!
//! `KERNTUNE_BIN` and `KERNTUNE_REPO` point at the binary and the checkout when a test
//! binary runs on another machine than the one that built it (the GPU tests do).

#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value as Json;

pub fn kerntune_binary() -> PathBuf {
    std::env::var_os("KERNTUNE_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kerntune")), PathBuf::from)
}

pub fn kerntune(args: &[&str]) -> Output {
    Command::new(kerntune_binary()).args(args).env("KERNTUNE_DB", default_db()).output().expect("kerntune runs")
}

/// The results store of a command that names none: the tests' own, never the user's
/// (`~/.cache/kerntune`); `$KERNTUNE_DB` where the caller set it.
pub fn default_db() -> PathBuf {
    std::env::var_os("KERNTUNE_DB")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("default-results.db"), PathBuf::from)
}

/// A path in the checkout, as a string for an argument.
pub fn repo(path: &str) -> String {
    let root = std::env::var_os("KERNTUNE_REPO")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."), PathBuf::from);
    root.join(path).display().to_string()
}

/// The JSON object a successful command printed.
pub fn json_of(output: &Output) -> Json {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}
