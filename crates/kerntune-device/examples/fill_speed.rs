//! How fast a benchmark worker's setup draws its inputs on this machine: seconds to fill 8M
//! f32 elements from a normal distribution (`kerntune_device::fill`, every core), best of
//! five. A setup at N = 8192 fills 2 x 64M elements per input set.
//!
//! ```sh
//! cargo run --release -p kerntune-device --example fill_speed
//! ```

use kerntune_device::{fill, DType, Init};

fn main() -> Result<(), kerntune_device::DataError> {
    let init = Init::Normal { mean: 0.0, std: 1.0 };
    let mut best = f64::INFINITY;
    for seed in 0..5 {
        let clock = std::time::Instant::now();
        fill(DType::F32, 1 << 23, &init, seed)?;
        best = best.min(clock.elapsed().as_secs_f64());
    }
    println!("8M f32 normals: {best:.3} s (best of 5), {:.0}M elements/s", 8.0 / best);
    Ok(())
}
