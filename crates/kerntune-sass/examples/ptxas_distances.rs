//! Prints the smallest stall-cycle distance ptxas leaves between dependent
//! instructions of each kind, over the kernels given on the command line:
//! the evidence behind `LatencyTable::SM90` (see docs/sass.md).
//!
//! `cargo run -p kerntune-sass --example ptxas_distances -- a.cubin kernel_a b.cubin kernel_b ...`

use std::collections::BTreeMap;

use kerntune_sass::{FenceKind, Nvdisasm, RegSet, Role, Schedule};

/// Smallest distance and number of pairs, per kind.
type Distances = BTreeMap<String, (u32, usize)>;

fn record(distances: &mut Distances, key: String, cycles: u32) {
    let entry = distances.entry(key).or_insert((u32::MAX, 0));
    entry.0 = entry.0.min(cycles);
    entry.1 += 1;
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let nvdisasm = Nvdisasm::locate().expect("nvdisasm");
    let mut results = Distances::new();
    let mut reads = Distances::new();
    let mut scoreboard = Distances::new();
    let mut fences = Distances::new();
    for pair in arguments.chunks(2) {
        let [path, kernel] = pair else { panic!("arguments come in pairs: CUBIN KERNEL") };
        let bytes = std::fs::read(path).expect("a readable cubin");
        let schedule = Schedule::from_cubin(&bytes, kernel, &nvdisasm).expect("a kernel this crate reads");
        let listing = schedule.listing();
        let instructions = listing.instructions();
        for block in 0..listing.block_count() {
            let range = listing.block_range(block);
            for (position, producer) in instructions.iter().enumerate().take(range.end).skip(range.start) {
                if let Role::Fence(kind) = producer.role {
                    if matches!(kind, FenceKind::ControlFlow | FenceKind::NeverExecutes) {
                        continue;
                    }
                    // How soon after a synchronisation the next memory instruction issues.
                    let mut cycles = 0;
                    for (offset, consumer) in instructions[position + 1..range.end].iter().enumerate() {
                        cycles += u32::from(instructions[position + offset].control.stall);
                        if matches!(consumer.role, Role::Memory(_)) {
                            record(&mut fences, format!("{} -> memory", producer.syntax.opcode), cycles);
                            break;
                        }
                        if matches!(consumer.role, Role::Fence(_)) {
                            break;
                        }
                    }
                    continue;
                }
                let (mut cycles, mut read_done, mut write_done, mut waited) = (0, RegSet::EMPTY, RegSet::EMPTY, false);
                for (offset, consumer) in instructions[position + 1..range.end].iter().enumerate() {
                    cycles += u32::from(instructions[position + offset].control.stall);
                    if producer.control.write_barrier.is_none() {
                        let fresh = producer.effects.defs.intersection(&consumer.effects.uses).difference(&read_done);
                        if !fresh.is_empty() {
                            let into = if matches!(consumer.role, Role::Memory(_)) { " -> memory" } else { "" };
                            record(&mut results, format!("{}{into}", producer.mnemonic()), cycles);
                            read_done = read_done.union(&fresh);
                        }
                    }
                    if producer.control.read_barrier.is_none() {
                        let fresh = producer.effects.uses.intersection(&consumer.effects.defs).difference(&write_done);
                        if !fresh.is_empty() {
                            record(&mut reads, producer.syntax.opcode.clone(), cycles);
                            write_done = write_done.union(&fresh);
                        }
                    }
                    if !waited && producer.control.set_mask() & consumer.control.wait_mask != 0 {
                        record(&mut scoreboard, "set -> wait".into(), cycles);
                        waited = true;
                    }
                }
            }
        }
    }
    for (title, distances) in [
        ("fixed-latency result -> reader", &results),
        ("reader without read barrier -> overwrite", &reads),
        ("barrier set -> wait", &scoreboard),
        ("synchronisation -> next memory instruction", &fences),
    ] {
        println!("{title} (smallest distance, pairs):");
        for (kind, (cycles, count)) in distances {
            println!("  {kind:32} {cycles:3} {count:5}");
        }
    }
}
