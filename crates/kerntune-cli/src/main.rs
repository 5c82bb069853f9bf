//! `kerntune`: parses the command line, runs the command, turns errors into one line.

mod args;
mod commands;
mod interrupt;
mod render;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`kerntune ... | head`), as other command-line tools do,
    // instead of panicking on the failed write.
    // SAFETY: restoring the default disposition of a signal, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Errors of every crate name a setting as this front spells it: `--target`.
    kerntune_space::Spelling::Flag.choose();
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, leaving out a cause its parent already quotes.
fn one_line(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
    }
    message.replace('\n', " ")
}
