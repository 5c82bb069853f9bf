//! Dispatch tables: the configuration tuned for each key of a kernel (a size, with the
//! dtypes and flags that go with it), and the nearest tuned key to one that was not tuned.
//!
//! A [`DispatchTable`] is what `kernel.save_table()` writes for a `@kerntune.autotune`
//! kernel and what a many-shape run produces: the key's names, and per entry the key's
//! values (JSON: numbers, strings, lists for tensors' `(dtype, shape)`) and the launch
//! options. [`nearest`] is the rule a kernel serving a key it has not tuned follows; the
//! same table exports as vLLM's fused-MoE config file ([`vllm`]) and as a C/C++ header
//! with a lookup function ([`c_header`]).
//!
//! ```
//! use kerntune_store::formats::dispatch::DispatchTable;
//! use serde_json::json;
//!
//! let table = DispatchTable::parse(
//!     r#"{"format": "kerntune dispatch table", "kernel": "scale", "key": ["n"], "entries": [
//!         {"key": [1024], "config": {"BLOCK": 64}}, {"key": [1048576], "config": {"BLOCK": 1024}}]}"#,
//!     "scale.json",
//! )?;
//! assert_eq!(table.nearest(&[json!(2000)]).map(|e| &e.config["BLOCK"]), Some(&json!(64)));
//! # Ok::<(), kerntune_store::StoreError>(())
//! ```

pub mod c_header;
pub mod vllm;

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::StoreError;

/// What a table file says it is, in its `format` field.
pub const FORMAT: &str = "kerntune dispatch table";

/// The tuned configuration of each key of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchTable {
    /// The kernel's name.
    pub kernel: String,
    /// The names of the key's parts (`key=` of `@kerntune.autotune`, or a run's shape
    /// variables).
    pub key: Vec<String>,
    /// One entry per tuned key, in the order they were tuned.
    #[serde(default)]
    pub entries: Vec<TableEntry>,
}

/// One tuned key and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableEntry {
    /// The key's values: one per name of [`DispatchTable::key`], then any parts the
    /// kernel adds (`@kerntune.autotune` adds the dtype of every tensor argument, as
    /// Triton does).
    pub key: Vec<Json>,
    /// The configuration's launch options (`name: value`).
    pub config: Map<String, Json>,
    /// The configuration's measured time in milliseconds, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<f64>,
}

/// The files a dispatch table exports as, each with its options: `kerntune table export`
/// takes them as subcommands, `kerntune.export_table` as `format=` and keywords.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
#[serde(tag = "format", rename_all = "kebab-case")]
pub enum TableFormat {
    /// vLLM's fused-MoE config file, named and laid out as its get_moe_configs loads it
    /// (a table keyed by the batch size alone).
    VllmMoe(vllm::MoeFile),
    /// A C/C++ header: a struct of the configuration's integer fields, the entries, and a
    /// lookup function returning the nearest tuned entry.
    CHeader,
}

/// An exported table: the file's usual name and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The name the file takes in a folder (vLLM finds its file by name).
    pub name: String,
    pub text: String,
    /// How many entries it holds.
    pub entries: usize,
}

impl Export {
    /// Writes the file to `output`, or under its name when `output` is a folder; returns
    /// the path written.
    pub fn write(&self, output: &Path) -> Result<PathBuf, StoreError> {
        let path = if output.is_dir() { output.join(&self.name) } else { output.to_path_buf() };
        std::fs::write(&path, &self.text)
            .map_err(|source| StoreError::Io { path: path.display().to_string(), source })?;
        Ok(path)
    }
}

/// The file's layout: the table with its `format` first.
#[derive(Serialize)]
struct Document<'a> {
    format: &'a str,
    #[serde(flatten)]
    table: &'a DispatchTable,
}

impl DispatchTable {
    /// The table in the file at `path`.
    pub fn read(path: &Path) -> Result<DispatchTable, StoreError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| StoreError::Io { path: origin.clone(), source })?;
        DispatchTable::parse(&text, &origin)
    }

    /// The table in `text`; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<DispatchTable, StoreError> {
        let document: Json = serde_json::from_str(text)
            .map_err(|error| StoreError::Json { path: origin.to_string(), message: error.to_string() })?;
        if document.get("format").and_then(Json::as_str) != Some(FORMAT) {
            return Err(StoreError::format(
                origin,
                "not a dispatch table (kernel.save_table() or a many-shape run writes one)",
            ));
        }
        let table: DispatchTable = serde_json::from_value(document)
            .map_err(|error| StoreError::format(origin, format!("a dispatch table, but {error}")))?;
        if let Some(entry) = table.entries.iter().find(|entry| entry.key.len() < table.key.len()) {
            return Err(StoreError::format(
                origin,
                format!(
                    "entry {} has {} key values for the {} names {:?}",
                    Json::from(entry.key.clone()),
                    entry.key.len(),
                    table.key.len(),
                    table.key
                ),
            ));
        }
        Ok(table)
    }

    /// Refuses a table of another kernel or keyed by other names than the kernel reading it.
    pub fn check_for(&self, kernel: &str, key: &[String], origin: &str) -> Result<(), StoreError> {
        if self.kernel == kernel && self.key == key {
            return Ok(());
        }
        Err(StoreError::format(
            origin,
            format!("holds {} keyed by {:?}, not {kernel} keyed by {key:?}", self.kernel, self.key),
        ))
    }

    /// The file's text, indented, ending with a newline.
    pub fn text(&self) -> String {
        let document = Document { format: FORMAT, table: self };
        serde_json::to_string_pretty(&document).unwrap_or_else(|error| error.to_string()) + "\n"
    }

    /// The table as a `format` file; `origin` names the table in errors.
    pub fn export(&self, format: &TableFormat, origin: &str) -> Result<Export, StoreError> {
        let (name, text) = match format {
            TableFormat::VllmMoe(file) => (file.file_name()?, file.text(self, origin)?),
            TableFormat::CHeader => (
                format!("{}.h", crate::formats::deploy::identifier(&self.kernel).to_lowercase()),
                c_header::text(self, origin)?,
            ),
        };
        Ok(Export { name, text, entries: self.entries.len() })
    }

    /// The entry whose key is nearest `key` ([`nearest`]), or `None` when none can stand
    /// for it.
    pub fn nearest(&self, key: &[Json]) -> Option<&TableEntry> {
        let tuned: Vec<Json> = self.entries.iter().map(|entry| Json::from(entry.key.clone())).collect();
        nearest(&Json::from(key.to_vec()), &tuned).map(|index| &self.entries[index])
    }
}

/// The index of the key in `tuned` nearest `key`, or `None` when none can stand for it.
///
/// Keys are near when every part that is not a number is the same (dtypes, flags) and the
/// numbers are close on a log2 scale (batch 48 is nearer 32 than 128; numbers below 1
/// count as 1), summed part by part; ties go to the smaller key (its numbers compared in
/// order), then to the first.
pub fn nearest(key: &Json, tuned: &[Json]) -> Option<usize> {
    tuned
        .iter()
        .enumerate()
        .filter_map(|(index, other)| Some((distance(key, other)?, numbers(other), index)))
        .min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| compare_numbers(&a.1, &b.1)))
        .map(|(_, _, index)| index)
}

/// How far two key parts are: numbers on a log2 scale, lists part by part; `None` when
/// they cannot stand for one another (a part that is not a number differs).
fn distance(a: &Json, b: &Json) -> Option<f64> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let log = |n: f64| n.max(1.0).log2();
            Some((log(x.as_f64()?) - log(y.as_f64()?)).abs())
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).try_fold(0.0, |sum, (x, y)| Some(sum + distance(x, y)?))
        }
        _ => (a == b).then_some(0.0),
    }
}

/// The numbers of a key part in order.
fn numbers(part: &Json) -> Vec<f64> {
    match part {
        Json::Number(n) => n.as_f64().into_iter().collect(),
        Json::Array(parts) => parts.iter().flat_map(numbers).collect(),
        _ => Vec::new(),
    }
}

/// Keys' numbers compared in order, a shorter list first where one is the other's start.
fn compare_numbers(a: &[f64], b: &[f64]) -> Ordering {
    a.iter().zip(b).map(|(x, y)| x.total_cmp(y)).find(|o| o.is_ne()).unwrap_or_else(|| a.len().cmp(&b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(keys: Json) -> Vec<Json> {
        keys.as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn the_nearest_key_is_close_on_a_log_scale_and_the_same_in_every_part_that_is_not_a_number() {
        let tuned = keys(json!([[16, "torch.float16"], [256, "torch.float16"], [64, "torch.bfloat16"]]));
        assert_eq!(nearest(&json!([48, "torch.float16"]), &tuned), Some(0), "48 is nearer 16 than 256 on a log scale");
        assert_eq!(nearest(&json!([100, "torch.float16"]), &tuned), Some(1));
        assert_eq!(nearest(&json!([64, "torch.float16"]), &tuned), Some(0), "a tie goes to the smaller key");
        assert_eq!(nearest(&json!([64, "torch.float32"]), &tuned), None, "no key of that dtype");
        let shapes = keys(json!([[["torch.float16", [16, 4096]]], [["torch.float16", [1024, 4096]]]]));
        assert_eq!(nearest(&json!([["torch.float16", [100, 4096]]]), &shapes), Some(0), "tensors compare by shape");
        assert_eq!(nearest(&json!([0]), &keys(json!([[1], [2]]))), Some(0), "numbers below 1 count as 1");
    }

    #[test]
    fn a_table_written_is_read_back_the_same_and_a_python_written_one_is_read() {
        let python = r#"{"format": "kerntune dispatch table", "kernel": "scale", "key": ["n", "x"], "entries": [
 {"key": [1024, ["torch.float32", [1024]]], "config": {"BLOCK": 64, "num_warps": 2}}]}"#;
        let table = DispatchTable::parse(python, "t.json").expect("reads");
        assert_eq!(table.entries[0].key[1], json!(["torch.float32", [1024]]));
        assert_eq!(table.entries[0].time, None);
        let mut timed = table.clone();
        timed.entries[0].time = Some(0.25);
        let text = timed.text();
        assert!(text.starts_with("{\n  \"format\": \"kerntune dispatch table\",\n  \"kernel\": \"scale\""), "{text}");
        assert_eq!(DispatchTable::parse(&text, "t.json").expect("reads back"), timed);
    }

    #[test]
    fn what_is_not_a_table_of_the_kernel_is_refused_in_one_line() {
        let error = DispatchTable::parse("[1, 2]", "junk.json").unwrap_err().to_string();
        assert_eq!(error, "junk.json: not a dispatch table (kernel.save_table() or a many-shape run writes one)");
        let short = r#"{"format": "kerntune dispatch table", "kernel": "k", "key": ["m", "n"],
            "entries": [{"key": [1], "config": {}}]}"#;
        let error = DispatchTable::parse(short, "s.json").unwrap_err().to_string();
        assert_eq!(error, r#"s.json: entry [1] has 1 key values for the 2 names ["m", "n"]"#);
        let table = DispatchTable::parse(&short.replace("[1]", "[1, 2]"), "s.json").expect("reads");
        let error = table.check_for("k", &["x".to_string()], "s.json").unwrap_err().to_string();
        assert_eq!(error, r#"s.json: holds k keyed by ["m", "n"], not k keyed by ["x"]"#);
    }

    #[test]
    fn formats_and_their_options_are_read_from_json_as_python_gives_them() {
        let request = json!({"format": "vllm-moe", "experts": 8, "intermediate": 7168, "device_name": "NVIDIA H200"});
        let format: TableFormat = serde_json::from_value(request).expect("a format");
        let TableFormat::VllmMoe(file) = &format else { panic!("{format:?}") };
        assert_eq!(file.file_name().expect("a name"), "E=8,N=7168,device_name=NVIDIA_H200.json");
        let header: TableFormat = serde_json::from_value(json!({"format": "c-header"})).expect("a format");
        assert_eq!(header, TableFormat::CHeader);
        let unknown = json!({"format": "vllm-moe", "experts": 8, "intermediate": 1, "device_name": "x", "expert": 2});
        let error = serde_json::from_value::<TableFormat>(unknown).unwrap_err().to_string();
        assert!(error.starts_with("unknown field `expert`"), "{error}");
    }

    #[test]
    fn an_export_written_to_a_folder_takes_its_own_name() {
        let table: DispatchTable = serde_json::from_value(json!({"kernel": "scale", "key": ["n"],
            "entries": [{"key": [16], "config": {"BLOCK": 64}}]}))
        .expect("a table");
        let export = table.export(&TableFormat::CHeader, "t.json").expect("a header");
        assert_eq!((export.name.as_str(), export.entries), ("scale.h", 1));
        let folder = tempfile::tempdir().expect("a folder");
        assert_eq!(export.write(folder.path()).expect("writes"), folder.path().join("scale.h"));
        let file = folder.path().join("other.h");
        assert_eq!(export.write(&file).expect("writes"), file);
        assert_eq!(std::fs::read_to_string(&file).expect("reads"), export.text);
    }
}
