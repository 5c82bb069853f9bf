//! vLLM's fused-MoE config file: the file name and layout that vLLM's `get_moe_configs`
//! loads and `benchmarks/kernels/benchmark_moe.py --tune` writes, from a dispatch table
//! keyed by the batch size alone.
//!
//! The name is `E={E},N={N},device_name={name}[,dtype={dtype}][,block_shape=[bn,bk]].json`
//! (the GPU's name with spaces as underscores, and any H200 as `NVIDIA_H200`); the content
//! maps each batch size, ascending, to its configuration, the six keys vLLM's kernel takes
//! first, indented by four spaces as the script writes it. vLLM answers a batch size it has
//! no entry for with the nearest one by absolute difference.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::DispatchTable;
use crate::StoreError;

/// The configuration keys vLLM's fused-MoE kernel needs, in the order its script writes
/// them.
pub const CONFIG_KEYS: [&str; 6] =
    ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"];

/// What names the file: the model's shape on one GPU, the GPU and the quantization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct MoeFile {
    /// The number of experts on one GPU (vLLM's E; the model's with tensor parallelism).
    #[cfg_attr(feature = "clap", arg(long, value_name = "E"))]
    pub experts: u64,
    /// vLLM's N: one GPU's intermediate size after silu_and_mul (the model's intermediate
    /// size over the tensor-parallel size: 7168 for Mixtral-8x7B at TP 2).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub intermediate: u64,
    /// The GPU's name as NVML gives it (`nvidia-smi --query-gpu=name`), such as
    /// "NVIDIA H100 80GB HBM3".
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub device_name: String,
    /// vLLM's dtype selector (fp8_w8a8, int8_w8a16, int4_w4a16, float32); none for fp16
    /// and bf16, which share one file.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub dtype: Option<String>,
    /// The weights' block-quantization shape, block_n and block_k.
    #[cfg_attr(feature = "clap", arg(long, value_name = "BN,BK", value_delimiter = ','))]
    #[serde(default)]
    pub block_shape: Option<Vec<u64>>,
    /// The Triton version the configurations were tuned with, recorded in the file as
    /// vLLM's script records its own.
    #[cfg_attr(feature = "clap", arg(long, value_name = "VERSION"))]
    #[serde(default)]
    pub triton_version: Option<String>,
}

impl MoeFile {
    /// The file's name, as vLLM's `get_config_file_name` spells it.
    pub fn file_name(&self) -> Result<String, StoreError> {
        let block = match self.block_shape.as_deref() {
            None | Some([]) => String::new(),
            Some([n, k]) if *n == 0 || *k == 0 => String::new(),
            Some([n, k]) => format!(",block_shape=[{n},{k}]"),
            Some(other) => {
                return Err(StoreError::format(
                    "block_shape",
                    format!("{other:?} is not two numbers: give [block_n, block_k]"),
                ))
            }
        };
        let dtype = self.dtype.as_deref().filter(|d| !d.is_empty()).map(|d| format!(",dtype={d}")).unwrap_or_default();
        Ok(format!("E={},N={},device_name={}{dtype}{block}.json", self.experts, self.intermediate, self.device()))
    }

    /// The GPU's name as vLLM writes it in file names.
    fn device(&self) -> String {
        let name = self.device_name.replace(' ', "_");
        if name.split('_').any(|part| part == "H200") {
            "NVIDIA_H200".to_string()
        } else {
            name
        }
    }

    /// The file's text: each batch size of `table`, ascending, with its configuration;
    /// `origin` names the table in errors. Refuses a table not keyed by one integer batch
    /// size, and an entry without one of [`CONFIG_KEYS`].
    pub fn text(&self, table: &DispatchTable, origin: &str) -> Result<String, StoreError> {
        let [name] = table.key.as_slice() else {
            return Err(StoreError::format(
                origin,
                format!(
                    "keyed by {:?}; vLLM's fused-MoE file is keyed by the batch size alone: tune with one key, M",
                    table.key
                ),
            ));
        };
        let mut sizes = Vec::with_capacity(table.entries.len());
        for entry in &table.entries {
            let value = entry.key.first().unwrap_or(&Json::Null);
            let size = value.as_u64().ok_or_else(|| {
                StoreError::format(origin, format!("{name} = {value} is not a batch size (an integer)"))
            })?;
            if let Some(missing) = CONFIG_KEYS.iter().find(|key| !entry.config.contains_key(**key)) {
                return Err(StoreError::format(
                    origin,
                    format!(
                        "the entry of {name} = {size} has no {missing}, which vLLM's kernel needs ({})",
                        CONFIG_KEYS.join(", ")
                    ),
                ));
            }
            if entry.key.get(1..) != table.entries[0].key.get(1..) {
                return Err(StoreError::format(
                    origin,
                    format!(
                        "the entries differ beyond {name} ({} and {}): vLLM's file holds one dtype; export a table per dtype",
                        Json::from(table.entries[0].key.clone()),
                        Json::from(entry.key.clone())
                    ),
                ));
            }
            sizes.push((size, &entry.config));
        }
        if sizes.is_empty() {
            return Err(StoreError::format(origin, "no entries: tune some batch sizes first"));
        }
        sizes.sort_by_key(|(size, _)| *size);
        if let Some(pair) = sizes.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(StoreError::format(origin, format!("{name} = {} has two entries; keep one", pair[0].0)));
        }
        let mut document = Map::new();
        if let Some(version) = &self.triton_version {
            document.insert("triton_version".into(), Json::from(version.as_str()));
        }
        for (size, config) in sizes {
            let ordered: Map<String, Json> = CONFIG_KEYS
                .iter()
                .map(|key| (key.to_string(), config[*key].clone()))
                .chain(
                    config
                        .iter()
                        .filter(|(key, _)| !CONFIG_KEYS.contains(&key.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone())),
                )
                .collect();
            document.insert(size.to_string(), Json::Object(ordered));
        }
        Ok(indented(&Json::Object(document)) + "\n")
    }
}

/// JSON indented by four spaces, as Python's `json.dump(..., indent=4)` writes it.
fn indented(document: &Json) -> String {
    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    match document.serialize(&mut serializer) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        Err(error) => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(device: &str) -> MoeFile {
        MoeFile {
            experts: 8,
            intermediate: 7168,
            device_name: device.into(),
            dtype: None,
            block_shape: None,
            triton_version: Some("3.6.0".into()),
        }
    }

    #[test]
    fn the_file_name_follows_vllms_rule_for_the_gpu_dtype_and_block_shape() {
        assert_eq!(
            file("NVIDIA H100 80GB HBM3").file_name().unwrap(),
            "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
        );
        assert_eq!(file("NVIDIA H200").file_name().unwrap(), "E=8,N=7168,device_name=NVIDIA_H200.json");
        assert_eq!(file("NVIDIA H200 NVL").file_name().unwrap(), "E=8,N=7168,device_name=NVIDIA_H200.json");
        assert_eq!(file("NVIDIA GH200 480GB").file_name().unwrap(), "E=8,N=7168,device_name=NVIDIA_GH200_480GB.json");
        let quantized =
            MoeFile { dtype: Some("fp8_w8a8".into()), block_shape: Some(vec![128, 128]), ..file("NVIDIA H100") };
        assert_eq!(
            quantized.file_name().unwrap(),
            "E=8,N=7168,device_name=NVIDIA_H100,dtype=fp8_w8a8,block_shape=[128,128].json"
        );
        let zero = MoeFile { block_shape: Some(vec![0, 128]), ..file("NVIDIA H100") };
        assert_eq!(zero.file_name().unwrap(), "E=8,N=7168,device_name=NVIDIA_H100.json");
        let three = MoeFile { block_shape: Some(vec![1, 2, 3]), ..file("NVIDIA H100") };
        assert_eq!(
            three.file_name().unwrap_err().to_string(),
            "block_shape: [1, 2, 3] is not two numbers: give [block_n, block_k]"
        );
    }

    fn table(entries: Json) -> DispatchTable {
        serde_json::from_value(json!({"kernel": "fused_moe_kernel", "key": ["M"], "entries": entries}))
            .expect("a table")
    }

    fn config(m: u64) -> Json {
        json!({"num_stages": 3, "BLOCK_SIZE_M": m, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "SPLIT_K": 1})
    }

    #[test]
    fn batch_sizes_are_written_ascending_with_the_six_keys_first_indented_as_the_script_writes() {
        let entries = json!([{"key": [64], "config": config(64)}, {"key": [1], "config": config(16)}]);
        let text = file("NVIDIA H100").text(&table(entries), "t.json").expect("a file");
        let expected = "{\n    \"triton_version\": \"3.6.0\",\n    \"1\": {\n        \"BLOCK_SIZE_M\": 16,\n        \"BLOCK_SIZE_N\": 64,\n        \"BLOCK_SIZE_K\": 128,\n        \"GROUP_SIZE_M\": 1,\n        \"num_warps\": 4,\n        \"num_stages\": 3,\n        \"SPLIT_K\": 1\n    },\n    \"64\": {\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(text.ends_with("    }\n}\n"), "{text}");
    }

    #[test]
    fn tables_vllm_cannot_load_are_refused_in_one_line() {
        let file = file("NVIDIA H100");
        let mut missing = config(16);
        missing.as_object_mut().map(|c| c.remove("GROUP_SIZE_M"));
        let cases = [
            (table(json!([{"key": [16], "config": missing}])), "t.json: the entry of M = 16 has no GROUP_SIZE_M, which vLLM's kernel needs (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages)"),
            (table(json!([{"key": [1.5], "config": config(16)}])), "t.json: M = 1.5 is not a batch size (an integer)"),
            (table(json!([{"key": [2], "config": config(16)}, {"key": [2], "config": config(32)}])), "t.json: M = 2 has two entries; keep one"),
            (table(json!([])), "t.json: no entries: tune some batch sizes first"),
            (
                table(json!([{"key": [1, "torch.float16"], "config": config(16)}, {"key": [2, "torch.bfloat16"], "config": config(16)}])),
                r#"t.json: the entries differ beyond M ([1,"torch.float16"] and [2,"torch.bfloat16"]): vLLM's file holds one dtype; export a table per dtype"#,
            ),
        ];
        for (table, expected) in cases {
            assert_eq!(file.text(&table, "t.json").unwrap_err().to_string(), expected);
        }
        let two: DispatchTable =
            serde_json::from_value(json!({"kernel": "k", "key": ["M", "dtype"], "entries": []})).expect("a table");
        let error = file.text(&two, "t.json").unwrap_err().to_string();
        assert_eq!(
            error,
            r#"t.json: keyed by ["M", "dtype"]; vLLM's fused-MoE file is keyed by the batch size alone: tune with one key, M"#
        );
    }
}
