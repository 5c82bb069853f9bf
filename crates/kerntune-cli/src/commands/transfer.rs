//! `kerntune import` and `kerntune export`: Kernel Tuner cache and T4 files in and out of
//! a results database.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use kerntune_store::formats::{self, Exchange};
use kerntune_store::{Landscape, Store};

use crate::args::{ExportArgs, ExportFormat, ImportArgs};

pub fn import(args: ImportArgs) -> Result<ExitCode> {
    let landscape = Landscape::read(&args.file)?;
    let space = landscape.space().with_context(|| args.file.display().to_string())?;
    let store = Store::open(&args.db)?;
    let tuning = store.tuning(&landscape.tuning())?;
    for record in &landscape.records {
        let id = space.id_of(&record.config).context("a recorded configuration is missing from its space")?;
        store.record(tuning, &space.config_json(id), &record.evaluation)?;
    }
    println!(
        "Imported {} evaluations of {} on {} into {}",
        landscape.records.len(),
        landscape.kernel_name,
        landscape.device_name,
        args.db.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.db.exists(), "{}: no such results database", args.db.display());
    let store = Store::open(&args.db)?;
    let tunings = store.tunings_of(args.kernel.as_deref())?;
    // Several tunings of one kernel (other problems or GPUs) make one header table.
    let one_kernel = tunings.windows(2).all(|pair| pair[0].info.kernel_name == pair[1].info.kernel_name);
    if matches!(args.format, ExportFormat::Header) && tunings.len() > 1 && one_kernel {
        return export_header_table(&store, &tunings, &args);
    }
    let tuning = &store.one_tuning(args.kernel.as_deref())?;
    let rows = store.evaluations(tuning.id)?;
    let info = &tuning.info;
    let (text, count) = match args.format {
        ExportFormat::Cubin => return export_cubin(&store, tuning, &args),
        // The file's text as `kerntune.export` writes it too; `write_export` ends the line.
        ExportFormat::KernelTuner => (Exchange::KernelTuner.text(info, &rows).trim_end().to_string(), rows.len()),
        ExportFormat::T4 => (Exchange::T4.text(info, &rows).trim_end().to_string(), rows.len()),
        ExportFormat::Header => {
            let Some(header) = formats::deploy::header(info, &rows) else {
                bail!(
                    "{}: no configuration of {} succeeded, so there is no best to export",
                    args.db.display(),
                    info.kernel_name
                );
            };
            (header.trim_end().to_string(), 1)
        }
        ExportFormat::Triton => {
            let top = usize::try_from(args.top).unwrap_or(usize::MAX);
            let document = formats::deploy::configs(info, &rows, top);
            let count = document["configs"].as_array().map_or(0, Vec::len);
            (serde_json::to_string_pretty(&document)?, count)
        }
    };
    let what = if matches!(args.format, ExportFormat::Header | ExportFormat::Triton) {
        "configurations"
    } else {
        "evaluations"
    };
    write_export(&args, &text, count, what)
}

/// Writes an export to `-o` (standard output for `-`) and says so.
fn write_export(args: &ExportArgs, text: &str, count: usize, what: &str) -> Result<ExitCode> {
    if args.output.as_os_str() == "-" {
        writeln!(std::io::stdout(), "{text}")?;
    } else {
        std::fs::write(&args.output, format!("{text}\n")).with_context(|| args.output.display().to_string())?;
        eprintln!("Wrote {count} {what} to {}", args.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The header of several tunings of one kernel: one row per problem and GPU.
fn export_header_table(
    store: &Store,
    tunings: &[kerntune_store::TuningSummary],
    args: &ExportArgs,
) -> Result<ExitCode> {
    let rows: Vec<_> = tunings.iter().map(|t| store.evaluations(t.id)).collect::<Result<_, _>>()?;
    let pairs: Vec<_> = tunings.iter().zip(&rows).map(|(t, r)| (&t.info, r.as_slice())).collect();
    let Some((header, count)) = formats::deploy::header_table(&pairs) else {
        bail!(
            "{}: no configuration of {} succeeded, so there is no best to export",
            args.db.display(),
            tunings[0].info.kernel_name
        );
    };
    write_export(args, header.trim_end(), count, "configurations")
}

/// Writes the schedule `tune --schedule` kept (the most recent one of the tuning).
fn export_cubin(store: &Store, tuning: &kerntune_store::TuningSummary, args: &ExportArgs) -> Result<ExitCode> {
    let Some(kerntune_store::Artifact { config, data: cubin, provenance }) =
        store.artifacts(tuning.id, "schedule")?.pop()
    else {
        bail!(
            "{}: no tuned schedule stored for {} (run `kerntune tune SPEC --schedule`)",
            args.db.display(),
            tuning.info.kernel_name
        );
    };
    anyhow::ensure!(args.output.as_os_str() != "-", "a cubin is binary: give --output FILE");
    std::fs::write(&args.output, &cubin).with_context(|| args.output.display().to_string())?;
    eprintln!(
        "Wrote the schedule of {} ({}) to {}",
        tuning.info.kernel_name,
        serde_json::Value::Object(config),
        args.output.display()
    );
    eprintln!("provenance: {provenance}");
    Ok(ExitCode::SUCCESS)
}
