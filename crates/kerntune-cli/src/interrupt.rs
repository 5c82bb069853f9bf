//! Ctrl-C and SIGTERM: the first asks the run to stop after the evaluation in progress is
//! recorded; a second one exits at once (rows already recorded are safe either way).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Exit status of a run stopped by a signal, by shell convention (128 + SIGINT).
pub const INTERRUPTED_EXIT: u8 = 130;

/// Installs the handler (once) and returns the flag the engine polls.
pub fn flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            if REQUESTED.swap(true, Ordering::SeqCst) {
                std::process::exit(i32::from(INTERRUPTED_EXIT));
            }
            eprintln!("\nstopping after the evaluation in progress (press Ctrl-C again to quit now)");
        })
        .is_ok()
    });
    &REQUESTED
}
