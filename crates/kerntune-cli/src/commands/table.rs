//! `kerntune table export`: a dispatch table as vLLM's fused-MoE config file or a C/C++
//! header, written by kerntune-store's writers (which `kerntune.export_table` uses too).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use kerntune_store::formats::dispatch::DispatchTable;
use serde_json::json;

use crate::args::{TableCommand, TableExportArgs};

pub fn run(command: TableCommand) -> Result<ExitCode> {
    match command {
        TableCommand::Export(args) => export(args),
    }
}

fn export(args: TableExportArgs) -> Result<ExitCode> {
    let table = DispatchTable::read(&args.table)?;
    let export = table.export(&args.format, &args.table.display().to_string())?;
    if args.output.as_os_str() == "-" {
        let text = if args.json {
            json!({"name": export.name, "entries": export.entries, "text": export.text}).to_string() + "\n"
        } else {
            export.text
        };
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = export.write(&args.output)?;
    if args.json {
        println!("{}", json!({"path": path, "name": export.name, "entries": export.entries}));
    } else {
        eprintln!("Wrote {} entries of {} to {}", export.entries, table.kernel, path.display());
    }
    Ok(ExitCode::SUCCESS)
}
