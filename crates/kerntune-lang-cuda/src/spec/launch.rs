//! Launch geometry with Kernel Tuner's semantics: block dimensions from the
//! `block_size_x/y/z` parameters (1 where absent), and grid = ceil(problem_size /
//! grid_div) per axis, grid_div defaulting to the block dimension of that axis; or an
//! explicit grid (and block) given as expressions.

use kerntune_pipeline::Geometry;
use kerntune_space::{Expression, Value};

#[derive(Debug, Clone)]
pub enum GridRule {
    /// `ceil(problem_size[axis] / product(div[axis]))`.
    Divide {
        problem_size: [Expression; 3],
        div: [Vec<Expression>; 3],
    },
    Explicit([Expression; 3]),
}

#[derive(Debug, Clone)]
pub struct Launch {
    pub grid: GridRule,
    pub block: [Expression; 3],
    pub shared_bytes: Option<Expression>,
}

impl Launch {
    /// One block of one thread: the launch of a spec whose front computes each
    /// configuration's geometry itself.
    pub fn unused() -> Launch {
        let one = || Expression::parse("1", &[]).expect("a constant parses");
        Launch { grid: GridRule::Explicit([one(), one(), one()]), block: [one(), one(), one()], shared_bytes: None }
    }
}

/// Hardware limits of grid dimensions (x, y, z).
const GRID_LIMITS: [u64; 3] = [(1 << 31) - 1, 65_535, 65_535];

impl Launch {
    /// The geometry for one configuration; `values` are indexed like the names the
    /// expressions were parsed with. An error is a reason the configuration is invalid.
    pub fn geometry(&self, values: &[Value]) -> Result<Geometry, String> {
        let mut block = [1u32; 3];
        for (axis, expression) in self.block.iter().enumerate() {
            block[axis] = positive(expression, values, "block")?;
        }
        let mut grid = [1u32; 3];
        for axis in 0..3 {
            let count = match &self.grid {
                GridRule::Explicit(expressions) => u64::from(positive(&expressions[axis], values, "grid")?),
                GridRule::Divide { problem_size, div } => {
                    let size = number(&problem_size[axis], values)?;
                    // An empty problem would launch one block over zero-sized buffers and
                    // "measure" nothing.
                    if size < 1.0 {
                        return Err(format!(
                            "problem size '{}' of axis {} is {size}; a problem size is at least 1",
                            problem_size[axis],
                            ["x", "y", "z"][axis]
                        ));
                    }
                    let mut divisor = 1.0;
                    for d in &div[axis] {
                        divisor *= number(d, values)?;
                    }
                    if divisor <= 0.0 {
                        return Err(format!("grid divisor of axis {} is {divisor}", ["x", "y", "z"][axis]));
                    }
                    (size / divisor).ceil().max(1.0) as u64
                }
            };
            if count > GRID_LIMITS[axis] {
                return Err(format!(
                    "grid {} = {count} exceeds the hardware limit {}",
                    ["x", "y", "z"][axis],
                    GRID_LIMITS[axis]
                ));
            }
            grid[axis] = count as u32;
        }
        let shared_bytes = match &self.shared_bytes {
            Some(expression) => {
                let bytes = number(expression, values)?;
                if !(0.0..=f64::from(u32::MAX)).contains(&bytes) {
                    return Err(format!("dynamic shared memory of {bytes} bytes"));
                }
                bytes as u32
            }
            None => 0,
        };
        Ok(Geometry { grid, block, shared_bytes })
    }
}

fn number(expression: &Expression, values: &[Value]) -> Result<f64, String> {
    let value = expression.evaluate_with(values).map_err(|e| format!("'{expression}': {e}"))?;
    value.as_number().ok_or_else(|| format!("'{expression}' is {value}, not a number"))
}

/// A dimension: a positive integer (a fractional result rounds up).
fn positive(expression: &Expression, values: &[Value], what: &str) -> Result<u32, String> {
    let n = number(expression, values)?.ceil();
    if !(1.0..=f64::from(u32::MAX)).contains(&n) {
        return Err(format!("{what} dimension '{expression}' is {n}"));
    }
    Ok(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(text: &str, names: &[&str]) -> Expression {
        Expression::parse(text, names).expect("parses")
    }

    #[test]
    fn grid_divides_the_problem_by_the_tile_rounding_up() {
        let names = ["N", "bx", "by", "V"];
        let launch = Launch {
            grid: GridRule::Divide {
                problem_size: [expr("N", &names), expr("N + 1", &names), expr("1", &names)],
                div: [vec![expr("bx", &names), expr("V", &names)], vec![expr("by * V", &names)], vec![]],
            },
            block: [expr("bx", &names), expr("by", &names), expr("1", &names)],
            shared_bytes: None,
        };
        let values = [Value::Int(100), Value::Int(16), Value::Int(8), Value::Int(2)];
        let geometry = launch.geometry(&values).expect("valid");
        assert_eq!(geometry.grid, [4, 7, 1]);
        assert_eq!(geometry.block, [16, 8, 1]);
        assert_eq!(geometry.threads_per_block(), 128);
    }

    #[test]
    fn impossible_geometry_is_a_reason_not_a_panic() {
        let names = ["b"];
        let launch = Launch {
            grid: GridRule::Explicit([expr("1 // b", &names), expr("1", &names), expr("1", &names)]),
            block: [expr("b", &names), expr("1", &names), expr("1", &names)],
            shared_bytes: None,
        };
        assert!(launch.geometry(&[Value::Int(0)]).unwrap_err().contains("block dimension"));
        assert!(launch.geometry(&[Value::Int(2)]).unwrap_err().contains("grid dimension"));
    }

    #[test]
    fn a_problem_size_of_zero_is_a_reason_not_one_block() {
        let names = ["N"];
        let launch = Launch {
            grid: GridRule::Divide {
                problem_size: [expr("N", &names), expr("1", &names), expr("1", &names)],
                div: [vec![], vec![], vec![]],
            },
            block: [expr("1", &names), expr("1", &names), expr("1", &names)],
            shared_bytes: None,
        };
        let reason = launch.geometry(&[Value::Int(0)]).unwrap_err();
        assert!(reason.contains("problem size 'N' of axis x is 0"), "{reason}");
        assert!(launch.geometry(&[Value::Int(1)]).is_ok());
    }
}
