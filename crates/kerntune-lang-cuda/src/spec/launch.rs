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

/// Why a configuration cannot launch as its launch rule says: the reason it is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// An expression of the rule could not be evaluated.
    #[error("'{expression}': {reason}")]
    Expression { expression: String, reason: String },
    /// An expression of the rule gave something other than a number.
    #[error("'{expression}' is {value}, not a number")]
    NotANumber { expression: String, value: String },
    /// A block or grid dimension that is not a positive integer.
    #[error("{what} dimension {dimension} is {value}")]
    Dimension { what: &'static str, dimension: String, value: f64 },
    /// An empty problem: it would launch one block over zero-sized buffers and "measure"
    /// nothing.
    #[error("{size_name} of axis {axis} is {size}; a problem size is at least 1")]
    EmptyProblem { size_name: String, axis: &'static str, size: f64 },
    #[error("grid divisor of axis {axis} is {divisor}")]
    Divisor { axis: &'static str, divisor: f64 },
    #[error("grid {axis} = {count} exceeds the hardware limit {limit}")]
    GridLimit { axis: &'static str, count: u64, limit: u64 },
    #[error("dynamic shared memory of {0} bytes")]
    SharedMemory(f64),
}

/// Hardware limits of grid dimensions (x, y, z).
const GRID_LIMITS: [u64; 3] = [(1 << 31) - 1, 65_535, 65_535];

impl Launch {
    /// The geometry for one configuration; `values` are indexed like the names the
    /// expressions were parsed with. An error is a reason the configuration is invalid.
    pub fn geometry(&self, values: &[Value]) -> Result<Geometry, LaunchError> {
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
                    let mut divisor = 1.0;
                    for d in &div[axis] {
                        divisor *= number(d, values)?;
                    }
                    divided(size, divisor, axis, &format!("problem size '{}'", problem_size[axis]))?
                }
            };
            grid[axis] = within_limit(count, axis)?;
        }
        let shared_bytes = match &self.shared_bytes {
            Some(expression) => {
                let bytes = number(expression, values)?;
                if !(0.0..=f64::from(u32::MAX)).contains(&bytes) {
                    return Err(LaunchError::SharedMemory(bytes));
                }
                bytes as u32
            }
            None => 0,
        };
        Ok(Geometry { grid, block, shared_bytes })
    }
}

/// Kernel Tuner's launch from the numbers a front computed for one configuration (its
/// conventions may be the caller's own functions): per axis, the grid is `ceil(size /
/// product of the divisors)`; the block and the dynamic shared memory as given. An error is
/// a reason the configuration is invalid.
pub fn divided_geometry(
    sizes: [f64; 3],
    divisors: &[Vec<f64>; 3],
    block: [i64; 3],
    shared_bytes: i64,
) -> Result<Geometry, LaunchError> {
    let mut geometry = Geometry { grid: [1; 3], block: [1; 3], shared_bytes: 0 };
    for axis in 0..3 {
        let count = divided(sizes[axis], divisors[axis].iter().product(), axis, "problem size")?;
        geometry.grid[axis] = within_limit(count, axis)?;
        geometry.block[axis] = u32::try_from(block[axis]).ok().filter(|n| *n >= 1).ok_or(LaunchError::Dimension {
            what: "block",
            dimension: AXES[axis].into(),
            value: block[axis] as f64,
        })?;
    }
    geometry.shared_bytes = u32::try_from(shared_bytes).map_err(|_| LaunchError::SharedMemory(shared_bytes as f64))?;
    Ok(geometry)
}

const AXES: [&str; 3] = ["x", "y", "z"];

/// One grid dimension by Kernel Tuner's rule, `ceil(size / divisor)`; `size_name` names the
/// size in a reason.
fn divided(size: f64, divisor: f64, axis: usize, size_name: &str) -> Result<u64, LaunchError> {
    if size < 1.0 {
        return Err(LaunchError::EmptyProblem { size_name: size_name.into(), axis: AXES[axis], size });
    }
    if divisor <= 0.0 {
        return Err(LaunchError::Divisor { axis: AXES[axis], divisor });
    }
    Ok((size / divisor).ceil().max(1.0) as u64)
}

fn within_limit(count: u64, axis: usize) -> Result<u32, LaunchError> {
    if count > GRID_LIMITS[axis] {
        return Err(LaunchError::GridLimit { axis: AXES[axis], count, limit: GRID_LIMITS[axis] });
    }
    Ok(count as u32)
}

fn number(expression: &Expression, values: &[Value]) -> Result<f64, LaunchError> {
    let value = expression
        .evaluate_with(values)
        .map_err(|e| LaunchError::Expression { expression: expression.to_string(), reason: e.to_string() })?;
    value
        .as_number()
        .ok_or_else(|| LaunchError::NotANumber { expression: expression.to_string(), value: value.to_string() })
}

/// A dimension: a positive integer (a fractional result rounds up).
fn positive(expression: &Expression, values: &[Value], what: &'static str) -> Result<u32, LaunchError> {
    let n = number(expression, values)?.ceil();
    if !(1.0..=f64::from(u32::MAX)).contains(&n) {
        return Err(LaunchError::Dimension { what, dimension: format!("'{expression}'"), value: n });
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
        assert!(launch.geometry(&[Value::Int(0)]).unwrap_err().to_string().contains("block dimension"));
        assert!(launch.geometry(&[Value::Int(2)]).unwrap_err().to_string().contains("grid dimension"));
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
        assert!(matches!(reason, LaunchError::EmptyProblem { axis: "x", .. }), "{reason:?}");
        assert!(reason.to_string().contains("problem size 'N' of axis x is 0"), "{reason}");
        assert!(launch.geometry(&[Value::Int(1)]).is_ok());
    }

    #[test]
    fn numbers_a_front_computed_launch_as_the_specs_expressions_do() {
        let geometry = divided_geometry([100.0, 101.0, 1.0], &[vec![16.0, 2.0], vec![16.0], vec![]], [16, 8, 1], 256)
            .expect("valid");
        assert_eq!((geometry.grid, geometry.block, geometry.shared_bytes), ([4, 7, 1], [16, 8, 1], 256));
        let reason = divided_geometry([0.0, 1.0, 1.0], &Default::default(), [1, 1, 1], 0).unwrap_err();
        assert_eq!(reason.to_string(), "problem size of axis x is 0; a problem size is at least 1");
        let reason = divided_geometry([8.0, 1.0, 1.0], &[vec![0.0], vec![], vec![]], [1, 1, 1], 0).unwrap_err();
        assert_eq!(reason, LaunchError::Divisor { axis: "x", divisor: 0.0 });
        let reason = divided_geometry([1.0, 1e6, 1.0], &Default::default(), [1, 1, 1], 0).unwrap_err();
        assert_eq!(reason, LaunchError::GridLimit { axis: "y", count: 1_000_000, limit: 65_535 });
        assert_eq!(reason.to_string(), "grid y = 1000000 exceeds the hardware limit 65535");
        assert!(divided_geometry([1.0; 3], &Default::default(), [0, 1, 1], 0)
            .unwrap_err()
            .to_string()
            .contains("block dimension x"));
    }
}
