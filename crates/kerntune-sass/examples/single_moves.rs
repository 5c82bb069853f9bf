//! Writes one cubin per legal move of a kernel's original schedule, for a GPU
//! audit of the legality rules (`bench/schedule_audit.py` launches each one and
//! compares its outputs bit for bit with the original's). Prints one JSON line
//! per move: the file, the move, and the two instructions it swaps.
//!
//! `cargo run -p kerntune-sass --example single_moves -- IN.cubin KERNEL OUT_DIR`

use kerntune_sass::{Direction, Nvdisasm, Schedule};

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [path, kernel, out] = arguments.as_slice() else {
        eprintln!("usage: single_moves IN.cubin KERNEL OUT_DIR");
        std::process::exit(2);
    };
    let nvdisasm = Nvdisasm::locate().expect("nvdisasm");
    let bytes = std::fs::read(path).expect("a readable cubin");
    let original = Schedule::from_cubin(&bytes, kernel, &nvdisasm).expect("a kernel this crate reads");
    std::fs::create_dir_all(out).expect("a writable folder");
    let instructions = original.listing().instructions();
    for requested in original.legal_moves() {
        let mut moved = original.clone();
        moved.apply(&requested).expect("a legal move applies");
        let (direction, other) = match requested.direction {
            Direction::Up => ("up", requested.index - 1),
            Direction::Down => ("down", requested.index + 1),
        };
        let file = format!("{out}/{}-{direction}.cubin", requested.index);
        std::fs::write(&file, moved.to_cubin().expect("a rewritten cubin")).expect("a writable file");
        let line = serde_json::json!({
            "file": file,
            "index": requested.index,
            "direction": direction,
            "moving": instructions[requested.index].text,
            "crossing": instructions[other].text,
        });
        println!("{line}");
    }
}
