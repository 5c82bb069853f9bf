//! `kerntune sass show` and `kerntune sass shuffle`: a kernel's native schedule.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use kerntune_sass::{show, shuffle, verify_permutation, Cubin, Nvdisasm};

use crate::args::{SassCommand, SassShowArgs, SassShuffleArgs};

pub fn run(command: SassCommand) -> Result<ExitCode> {
    match command {
        SassCommand::Show(args) => run_show(args),
        SassCommand::Shuffle(args) => run_shuffle(args),
    }
}

/// The cubin's bytes and the kernel to work on: the one named, or the only one.
fn load(path: &Path, kernel: Option<String>) -> Result<(Vec<u8>, String)> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    let cubin = Cubin::parse(&bytes).with_context(|| path.display().to_string())?;
    let kernels = cubin.kernels();
    let kernel = match (kernel, kernels.as_slice()) {
        (Some(name), _) if kernels.contains(&name) => name,
        (Some(name), _) => bail!("{}: no kernel '{name}' (it has {})", path.display(), kernels.join(", ")),
        (None, [only]) => only.clone(),
        (None, []) => bail!("{}: holds no kernel", path.display()),
        (None, many) => {
            bail!("{}: holds several kernels; choose one with --kernel ({})", path.display(), many.join(", "))
        }
    };
    Ok((bytes, kernel))
}

fn run_show(args: SassShowArgs) -> Result<ExitCode> {
    let (bytes, kernel) = load(&args.cubin, args.kernel)?;
    let report = show(&bytes, &kernel, &Nvdisasm::locate()?)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_shuffle(args: SassShuffleArgs) -> Result<ExitCode> {
    let (bytes, kernel) = load(&args.cubin, args.kernel)?;
    let nvdisasm = Nvdisasm::locate()?;
    let shuffled = shuffle(&bytes, &kernel, args.moves, args.seed, &nvdisasm)?;
    if !args.no_verify {
        verify_permutation(&nvdisasm, &bytes, &shuffled.cubin, &kernel, &shuffled.permutation)
            .context("the rewritten cubin is not the intended permutation")?;
    }
    std::fs::write(&args.output, &shuffled.cubin).with_context(|| args.output.display().to_string())?;
    let moved = shuffled.permutation.iter().enumerate().filter(|(k, from)| *k != **from).count();
    println!(
        "{kernel}: applied {} legal moves ({} instructions moved){}; wrote {}",
        shuffled.moves.len(),
        moved,
        if args.no_verify { "" } else { ", checked with nvdisasm" },
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
