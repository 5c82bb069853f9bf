//! Ctrl-C and SIGTERM: the first stops the run within about 0.1 s, keeping every recorded
//! row and dropping the evaluations still in flight; a second one exits at once (rows
//! already recorded are safe either way).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Exit status of a run stopped by a signal, by shell convention (128 + SIGINT).
pub const INTERRUPTED_EXIT: u8 = 130;

/// Installs the handler (once) and returns the flag the engine polls.
fn flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            if REQUESTED.swap(true, Ordering::SeqCst) {
                std::process::exit(i32::from(INTERRUPTED_EXIT));
            }
            eprintln!("\nstopping; what was measured is kept (press Ctrl-C again to quit now)");
        })
        .is_ok()
    });
    &REQUESTED
}

/// Whether a stop was asked for (installing the handler first).
pub fn requested() -> bool {
    flag().load(Ordering::SeqCst)
}
