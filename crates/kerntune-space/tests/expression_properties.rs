//! Properties of restriction parsing on arbitrary input: `Expression::parse` never panics,
//! and whatever it accepts evaluates (to a value or an `EvalError`) without panicking.

use kerntune_space::{Expression, Value};
use proptest::prelude::*;

const NAMES: [&str; 3] = ["a", "b", "c"];

/// Tokens of the expression grammar, valid and not, so that random sequences often parse.
const TOKENS: [&str; 52] = [
    "a", "b", "c", "d", "0", "1", "-1", "7", "2.5", "1e308", "0x10", "'s'", "\"\"", "True", "False", "None", "+", "-",
    "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "~", "<", "<=", ">", ">=", "==", "!=", "=", "and", "or",
    "not", "in", "is", "if", "else", "(", ")", "[", "]", ",", "min", "max", "abs", "!",
];

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        prop_oneof![Just(0), Just(1), Just(-1), Just(63), Just(64)].prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Bool),
        "[a-c]{0,2}".prop_map(Value::Str),
    ]
}

fn check(text: &str, values: &[Value]) {
    if let Ok(expression) = Expression::parse(text, &NAMES) {
        let _ = expression.evaluate_with(values);
        let _ = expression.holds_with(values);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), values in proptest::collection::vec(value(), 3)) {
        check(&String::from_utf8_lossy(&bytes), &values);
    }

    #[test]
    fn random_token_sequences_never_panic(tokens in proptest::collection::vec(proptest::sample::select(&TOKENS[..]), 1..24), values in proptest::collection::vec(value(), 3)) {
        check(&tokens.join(" "), &values);
    }
}
