//! Evaluation with Python's semantics: true division, floor division and modulo with the
//! sign of the divisor, int/float promotion, chained comparisons, value-returning `and`/`or`.
//! Where Python would raise (division by zero, a type mismatch), evaluation returns an error;
//! for a restriction that makes the configuration invalid.

use std::cmp::Ordering;

use super::parser::{BinaryOp, CompareOp, Expr, Function, Literal, UnaryOp};
use super::EvalError;
use crate::Value;

/// A value during evaluation; strings borrow from the expression or the variables.
#[derive(Debug, Clone, Copy)]
pub(crate) enum V<'a> {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'a str),
}

impl V<'_> {
    pub fn to_value(self) -> Value {
        match self {
            V::Int(i) => Value::Int(i),
            V::Float(f) => Value::Float(f),
            V::Bool(b) => Value::Bool(b),
            V::Str(s) => Value::Str(s.to_string()),
        }
    }

    pub fn truthy(self) -> bool {
        match self {
            V::Int(i) => i != 0,
            V::Float(f) => f != 0.0,
            V::Bool(b) => b,
            V::Str(s) => !s.is_empty(),
        }
    }

    fn number(self) -> Result<Num, EvalError> {
        match self {
            V::Int(i) => Ok(Num::Int(i)),
            V::Bool(b) => Ok(Num::Int(i64::from(b))),
            V::Float(f) => Ok(Num::Float(f)),
            V::Str(_) => Err(EvalError::Type("a string is not a number")),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            V::Int(_) => "int",
            V::Float(_) => "float",
            V::Bool(_) => "bool",
            V::Str(_) => "str",
        }
    }
}

impl<'a> From<&'a Value> for V<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Int(i) => V::Int(*i),
            Value::Float(f) => V::Float(*f),
            Value::Bool(b) => V::Bool(*b),
            Value::Str(s) => V::Str(s),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn float(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

pub(crate) fn evaluate<'a>(expr: &'a Expr, vars: &[&'a Value]) -> Result<V<'a>, EvalError> {
    match expr {
        Expr::Literal(literal) => Ok(match literal {
            Literal::Int(i) => V::Int(*i),
            Literal::Float(f) => V::Float(*f),
            Literal::Bool(b) => V::Bool(*b),
            Literal::Str(s) => V::Str(s),
        }),
        Expr::Var(slot) => Ok(V::from(vars[*slot])),
        Expr::Unary(op, operand) => unary(*op, evaluate(operand, vars)?),
        Expr::Binary(op, left, right) => binary(*op, evaluate(left, vars)?, evaluate(right, vars)?),
        Expr::Compare(first, rest) => {
            let mut left = evaluate(first, vars)?;
            for (op, right_expr) in rest {
                let holds = match (op, right_expr) {
                    (CompareOp::In | CompareOp::NotIn, Expr::List(items)) => {
                        // Python builds the whole list before searching it, so an error in any
                        // item raises even when an earlier item matches.
                        let items = items.iter().map(|item| evaluate(item, vars)).collect::<Result<Vec<_>, _>>()?;
                        items.iter().any(|item| equal(left, *item)) == (*op == CompareOp::In)
                    }
                    _ => {
                        let right = evaluate(right_expr, vars)?;
                        let holds = compare(*op, left, right)?;
                        left = right;
                        holds
                    }
                };
                if !holds {
                    return Ok(V::Bool(false));
                }
            }
            Ok(V::Bool(true))
        }
        Expr::And(left, right) => {
            let left = evaluate(left, vars)?;
            if left.truthy() {
                evaluate(right, vars)
            } else {
                Ok(left)
            }
        }
        Expr::Or(left, right) => {
            let left = evaluate(left, vars)?;
            if left.truthy() {
                Ok(left)
            } else {
                evaluate(right, vars)
            }
        }
        Expr::Not(operand) => Ok(V::Bool(!evaluate(operand, vars)?.truthy())),
        Expr::IfElse { condition, then, otherwise } => {
            if evaluate(condition, vars)?.truthy() {
                evaluate(then, vars)
            } else {
                evaluate(otherwise, vars)
            }
        }
        Expr::Call(function, args) => call(*function, args, vars),
        Expr::List(_) => Err(EvalError::Type("a list has no value here")),
    }
}

fn call<'a>(function: Function, args: &'a [Expr], vars: &[&'a Value]) -> Result<V<'a>, EvalError> {
    let items: &[Expr] = match args {
        [Expr::List(items)] => items,
        _ => args,
    };
    match function {
        Function::Abs => match evaluate(&items[0], vars)?.number()? {
            Num::Int(i) => Ok(i.checked_abs().map_or(V::Float((i as f64).abs()), V::Int)),
            Num::Float(f) => Ok(V::Float(f.abs())),
        },
        Function::Min | Function::Max => {
            if args.len() == 1 && !matches!(args[0], Expr::List(_)) {
                return Err(EvalError::Type("min/max of a single number"));
            }
            // Python keeps the first of equal items and replaces only on a strict `<` (or `>`).
            let better = if function == Function::Min { CompareOp::Lt } else { CompareOp::Gt };
            let mut best: Option<V<'a>> = None;
            for item in items {
                let value = evaluate(item, vars)?;
                best = match best {
                    Some(current) if !compare(better, value, current)? => Some(current),
                    _ => Some(value),
                };
            }
            best.ok_or(EvalError::Value("min/max of an empty list"))
        }
    }
}

fn unary(op: UnaryOp, operand: V<'_>) -> Result<V<'static>, EvalError> {
    let number = operand.number()?;
    Ok(match (op, number) {
        (UnaryOp::Neg, Num::Int(i)) => i.checked_neg().map_or(V::Float(-(i as f64)), V::Int),
        (UnaryOp::Neg, Num::Float(f)) => V::Float(-f),
        (UnaryOp::Pos, Num::Int(i)) => V::Int(i),
        (UnaryOp::Pos, Num::Float(f)) => V::Float(f),
        (UnaryOp::Invert, Num::Int(i)) => V::Int(!i),
        (UnaryOp::Invert, Num::Float(_)) => return Err(EvalError::Type("'~' needs an integer")),
    })
}

fn binary(op: BinaryOp, left: V<'_>, right: V<'_>) -> Result<V<'static>, EvalError> {
    let (a, b) = match (left.number(), right.number()) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            return Err(EvalError::Type(match (left.kind(), right.kind()) {
                ("str", "str") => "arithmetic on strings is not supported",
                _ => "arithmetic between a string and a number",
            }))
        }
    };
    if let (V::Bool(x), V::Bool(y), BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor) = (left, right, op) {
        // `bool & bool` stays a bool in Python.
        return Ok(V::Bool(match op {
            BinaryOp::BitAnd => x & y,
            BinaryOp::BitOr => x | y,
            _ => x ^ y,
        }));
    }
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => int_binary(op, x, y),
        _ => float_binary(op, a.float(), b.float()),
    }
}

fn int_binary(op: BinaryOp, x: i64, y: i64) -> Result<V<'static>, EvalError> {
    // Python's integers do not overflow; past i64 we carry on in floating point.
    let or_float = |exact: Option<i64>, approx: f64| Ok(exact.map_or(V::Float(approx), V::Int));
    let (fx, fy) = (x as f64, y as f64);
    match op {
        BinaryOp::Add => or_float(x.checked_add(y), fx + fy),
        BinaryOp::Sub => or_float(x.checked_sub(y), fx - fy),
        BinaryOp::Mul => or_float(x.checked_mul(y), fx * fy),
        BinaryOp::TrueDiv => {
            if y == 0 {
                return Err(EvalError::ZeroDivision);
            }
            Ok(V::Float(fx / fy))
        }
        BinaryOp::FloorDiv | BinaryOp::Mod => {
            if y == 0 {
                return Err(EvalError::ZeroDivision);
            }
            let (Some(quotient), Some(remainder)) = (x.checked_div(y), x.checked_rem(y)) else {
                return float_binary(op, fx, fy);
            };
            // Rust truncates toward zero; Python floors, so the remainder takes the divisor's sign.
            let adjust = remainder != 0 && ((remainder < 0) != (y < 0));
            Ok(V::Int(match op {
                BinaryOp::FloorDiv => quotient - i64::from(adjust),
                _ => {
                    if adjust {
                        remainder + y
                    } else {
                        remainder
                    }
                }
            }))
        }
        BinaryOp::Pow => {
            if y < 0 {
                if x == 0 {
                    return Err(EvalError::ZeroDivision);
                }
                return Ok(V::Float(fx.powf(fy)));
            }
            let exact = u32::try_from(y).ok().and_then(|e| x.checked_pow(e));
            or_float(exact, fx.powf(fy))
        }
        BinaryOp::BitAnd => Ok(V::Int(x & y)),
        BinaryOp::BitOr => Ok(V::Int(x | y)),
        BinaryOp::BitXor => Ok(V::Int(x ^ y)),
        BinaryOp::Shl | BinaryOp::Shr => {
            if y < 0 {
                return Err(EvalError::Value("negative shift count"));
            }
            if op == BinaryOp::Shr {
                return Ok(V::Int(if y >= 64 {
                    if x < 0 {
                        -1
                    } else {
                        0
                    }
                } else {
                    x >> y
                }));
            }
            let shifted = u32::try_from(y).ok().and_then(|s| x.checked_mul(1i64.checked_shl(s)?));
            match shifted {
                Some(v) if y < 63 => Ok(V::Int(v)),
                _ if x == 0 => Ok(V::Int(0)),
                _ => Err(EvalError::Overflow),
            }
        }
    }
}

fn float_binary(op: BinaryOp, x: f64, y: f64) -> Result<V<'static>, EvalError> {
    match op {
        BinaryOp::Add => Ok(V::Float(x + y)),
        BinaryOp::Sub => Ok(V::Float(x - y)),
        BinaryOp::Mul => Ok(V::Float(x * y)),
        BinaryOp::TrueDiv => {
            if y == 0.0 {
                return Err(EvalError::ZeroDivision);
            }
            Ok(V::Float(x / y))
        }
        BinaryOp::FloorDiv | BinaryOp::Mod => {
            if y == 0.0 {
                return Err(EvalError::ZeroDivision);
            }
            let (floor_div, modulo) = python_float_divmod(x, y);
            Ok(V::Float(if op == BinaryOp::FloorDiv { floor_div } else { modulo }))
        }
        BinaryOp::Pow => {
            if x == 0.0 && y < 0.0 {
                return Err(EvalError::ZeroDivision);
            }
            if x < 0.0 && y.fract() != 0.0 && y.is_finite() {
                // Python returns a complex number here; no parameter means that.
                return Err(EvalError::Value("fractional power of a negative number"));
            }
            let result = x.powf(y);
            if result.is_infinite() && x.is_finite() && y.is_finite() {
                return Err(EvalError::Overflow);
            }
            Ok(V::Float(result))
        }
        _ => Err(EvalError::Type("bitwise operators need integers")),
    }
}

/// CPython's `float_divmod`, so that `//` and `%` on floats round exactly as Python does.
fn python_float_divmod(x: f64, y: f64) -> (f64, f64) {
    let mut modulo = x % y;
    let mut div = (x - modulo) / y;
    if modulo != 0.0 {
        if (y < 0.0) != (modulo < 0.0) {
            modulo += y;
            div -= 1.0;
        }
    } else {
        modulo = 0.0f64.copysign(y);
    }
    let floor_div = if div != 0.0 {
        let floored = div.floor();
        if div - floored > 0.5 {
            floored + 1.0
        } else {
            floored
        }
    } else {
        0.0f64.copysign(x / y)
    };
    (floor_div, modulo)
}

fn equal(left: V<'_>, right: V<'_>) -> bool {
    match (left, right) {
        (V::Str(a), V::Str(b)) => a == b,
        (V::Str(_), _) | (_, V::Str(_)) => false,
        _ => matches!(order(left, right), Ok(Ordering::Equal)),
    }
}

/// Python's ordering between two values; strings order only among themselves.
fn order(left: V<'_>, right: V<'_>) -> Result<Ordering, EvalError> {
    match (left, right) {
        (V::Str(a), V::Str(b)) => Ok(a.cmp(b)),
        (V::Str(_), _) | (_, V::Str(_)) => Err(EvalError::Type("'<' between a string and a number")),
        _ => match (left.number()?, right.number()?) {
            (Num::Int(a), Num::Int(b)) => Ok(a.cmp(&b)),
            (a, b) => a.float().partial_cmp(&b.float()).ok_or(EvalError::Nan),
        },
    }
}

fn compare(op: CompareOp, left: V<'_>, right: V<'_>) -> Result<bool, EvalError> {
    if let (V::Float(a), _) | (_, V::Float(a)) = (left, right) {
        // NaN compares unequal and unordered to everything, as in Python.
        if a.is_nan() && !matches!((left, right), (V::Str(_), _) | (_, V::Str(_))) {
            return Ok(op == CompareOp::Ne);
        }
    }
    Ok(match op {
        CompareOp::Eq => equal(left, right),
        CompareOp::Ne => !equal(left, right),
        CompareOp::Lt => order(left, right)? == Ordering::Less,
        CompareOp::Le => order(left, right)? != Ordering::Greater,
        CompareOp::Gt => order(left, right)? == Ordering::Greater,
        CompareOp::Ge => order(left, right)? != Ordering::Less,
        CompareOp::In | CompareOp::NotIn => match (left, right) {
            (V::Str(needle), V::Str(haystack)) => haystack.contains(needle) == (op == CompareOp::In),
            _ => return Err(EvalError::Type("'in' needs a list or a string on its right")),
        },
    })
}
