//! Expressions in the Python subset that Kernel Tuner users write for restrictions
//! (`"block_size_x * block_size_y <= 1024"`) and that spec files use for sizes, grids and
//! metrics. [`Expression::parse`] resolves every name against the names the caller allows,
//! so an unknown name is a parse error with its position; [`Expression::evaluate`] follows
//! Python's semantics and returns an [`EvalError`] where Python would raise.

mod eval;
mod lexer;
mod parser;

use std::fmt;

use crate::Value;

/// A parsed expression whose variables are resolved to positions in a caller's name list.
#[derive(Debug, Clone)]
pub struct Expression {
    text: String,
    expr: parser::Expr,
    /// For each variable slot of the expression, the index into the caller's names.
    variables: Vec<usize>,
}

impl Expression {
    /// How deep an expression may nest: brackets, calls, unary operators, `not`, `**`,
    /// `if`/`else`, and each further operator of a chain such as `a + b + c` add a level.
    /// Python's own parser stops near the same depth; deeper expressions would overflow
    /// the stack of the recursive parser and evaluator, so [`Expression::parse`] refuses them.
    pub const MAX_DEPTH: usize = 200;

    /// Parses `text`, allowing the names in `names`. Each variable of the expression is
    /// resolved to its index in `names`; [`Expression::variables`] lists them.
    pub fn parse(text: &str, names: &[&str]) -> Result<Expression, ParseError> {
        let error = |column: usize, kind: ParseErrorKind| ParseError { text: text.to_string(), column, kind };
        let tokens = lexer::tokenize(text).map_err(|(column, kind)| error(column, kind))?;
        let (expr, used_names) = parse_tokens(&tokens).map_err(|(column, kind)| error(column, kind))?;
        let variables = used_names
            .iter()
            .map(|used| {
                names.iter().position(|n| *n == used.name).ok_or_else(|| {
                    error(
                        used.column,
                        ParseErrorKind::UnknownName { name: used.name.clone(), suggestion: closest(&used.name, names) },
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Expression { text: text.to_string(), expr, variables })
    }

    /// The source text, as the user wrote it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Indexes (into the names given to `parse`) of the variables, in slot order:
    /// `evaluate` takes one value per entry, in this order.
    pub fn variables(&self) -> &[usize] {
        &self.variables
    }

    /// Evaluates with one value per variable slot (see [`Expression::variables`]).
    pub fn evaluate(&self, values: &[&Value]) -> Result<Value, EvalError> {
        debug_assert_eq!(values.len(), self.variables.len());
        eval::evaluate(&self.expr, values).map(eval::V::to_value)
    }

    /// Evaluates and applies Python's truthiness, as a restriction does.
    pub fn holds(&self, values: &[&Value]) -> Result<bool, EvalError> {
        eval::evaluate(&self.expr, values).map(eval::V::truthy)
    }

    /// Evaluates with values looked up by the caller's name index.
    pub fn evaluate_with(&self, all_values: &[Value]) -> Result<Value, EvalError> {
        let values: Vec<&Value> = self.variables.iter().map(|i| &all_values[*i]).collect();
        self.evaluate(&values)
    }

    /// [`Expression::holds`] with values looked up by the caller's name index.
    pub fn holds_with(&self, all_values: &[Value]) -> Result<bool, EvalError> {
        let values: Vec<&Value> = self.variables.iter().map(|i| &all_values[*i]).collect();
        self.holds(&values)
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Expressions of at most this many tokens cannot nest deeper than that, which the
/// stack of any thread holds; longer ones are parsed on a thread of their own.
const SHALLOW_TOKENS: usize = 48;

/// The parser's own stack: the recursive descent takes about 21 KiB per nesting level in
/// a debug build (far less optimised), so [`Expression::MAX_DEPTH`] levels fit with room.
const PARSER_STACK_BYTES: usize = 16 << 20;

/// Parses `tokens` where the stack has room for [`Expression::MAX_DEPTH`] levels of
/// nesting, whatever the caller's thread (a Rust thread has 2 MiB, ten levels of
/// parentheses take a debug build's parser about 200 KiB).
fn parse_tokens(tokens: &[lexer::Spanned]) -> parser::ParseResult<(parser::Expr, Vec<parser::NameUse>)> {
    let parse = || {
        let mut parser = parser::Parser::new(tokens);
        let expr = parser.parse_all()?;
        Ok((expr, parser.names))
    };
    if tokens.len() <= SHALLOW_TOKENS {
        return parse();
    }
    std::thread::scope(|scope| {
        match std::thread::Builder::new().stack_size(PARSER_STACK_BYTES).spawn_scoped(scope, parse) {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had: parse here, where only the most deeply nested input could overflow.
            Err(_) => parse(),
        }
    })
}

/// A malformed expression: the text, the zero-based character column, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub text: String,
    pub column: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    Empty,
    UnexpectedCharacter(char),
    BadNumber,
    UnterminatedString,
    Expected {
        expected: &'static str,
        found: String,
    },
    UnknownName {
        name: String,
        suggestion: Option<String>,
    },
    UnknownFunction(String),
    Arity(String),
    MisplacedList,
    Hint(&'static str),
    /// The expression nests deeper than [`Expression::MAX_DEPTH`].
    TooDeep {
        limit: usize,
    },
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Empty => f.write_str("the expression is empty"),
            ParseErrorKind::UnexpectedCharacter(c) => write!(f, "unexpected character {c:?}"),
            ParseErrorKind::BadNumber => f.write_str("malformed number"),
            ParseErrorKind::UnterminatedString => f.write_str("unterminated string"),
            ParseErrorKind::Expected { expected, found } => write!(f, "expected {expected}, found {found}"),
            ParseErrorKind::UnknownName { name, suggestion: Some(s) } => {
                write!(f, "unknown name '{name}' (did you mean '{s}'?)")
            }
            ParseErrorKind::UnknownName { name, suggestion: None } => write!(f, "unknown name '{name}'"),
            ParseErrorKind::UnknownFunction(name) => {
                write!(f, "unknown function '{name}' (available: min, max, abs)")
            }
            ParseErrorKind::Arity(name) => write!(f, "wrong number of arguments to '{name}'"),
            ParseErrorKind::MisplacedList => {
                f.write_str("a list may only follow 'in' / 'not in' or be the one argument of min/max")
            }
            ParseErrorKind::Hint(hint) => f.write_str(hint),
            ParseErrorKind::TooDeep { limit } => write!(
                f,
                "the expression nests more than {limit} levels deep (brackets, calls, unary operators, \
                 'not' and each operator of a chain such as 'a + b + c' count one level each)"
            ),
        }
    }
}

impl fmt::Display for ParseError {
    /// One line that quotes the expression (around the column, when it is long) and names
    /// the column; then the quote again with a caret under the position.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (quote, caret) = excerpt(&self.text, self.column);
        write!(f, "in '{quote}' at column {}: {}", self.column + 1, self.kind)?;
        if f.alternate() {
            write!(f, "\n    {quote}\n    {}^", " ".repeat(caret))?;
        }
        Ok(())
    }
}

/// Characters of a long expression quoted before and after the column of an error.
const QUOTE_BEFORE: usize = 60;
const QUOTE_AFTER: usize = 40;

/// `text` as an error quotes it: whole when short, else the part around `column` with
/// "..." for what is left out (a refused 50,000-term sum would be a 200 kB message); and
/// the column within the quote.
fn excerpt(text: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= QUOTE_BEFORE + QUOTE_AFTER {
        return (text.to_string(), column);
    }
    let start = column.saturating_sub(QUOTE_BEFORE);
    let end = (column + QUOTE_AFTER).min(chars.len());
    let prefix = if start > 0 { "..." } else { "" };
    let suffix = if end < chars.len() { "..." } else { "" };
    let middle: String = chars[start..end].iter().collect();
    (format!("{prefix}{middle}{suffix}"), column - start + prefix.len())
}

impl std::error::Error for ParseError {}

/// Why an expression has no value for some variables (where Python would raise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvalError {
    ZeroDivision,
    Overflow,
    Nan,
    Type(&'static str),
    Value(&'static str),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::ZeroDivision => f.write_str("division by zero"),
            EvalError::Overflow => f.write_str("numeric overflow"),
            EvalError::Nan => f.write_str("comparison with NaN"),
            EvalError::Type(message) | EvalError::Value(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for EvalError {}

/// The allowed name nearest to `name` by edit distance, when it is plausibly a typo.
fn closest(name: &str, names: &[&str]) -> Option<String> {
    let lower = name.to_lowercase();
    names
        .iter()
        .map(|candidate| (edit_distance(&lower, &candidate.to_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= candidate.len() / 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate.to_string())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb)).min(row[j] + 1).min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> Result<Value, EvalError> {
        Expression::parse(text, &[]).expect("parses").evaluate(&[])
    }

    fn eval_with(text: &str, names: &[&str], values: &[Value]) -> Result<Value, EvalError> {
        Expression::parse(text, names).expect("parses").evaluate_with(values)
    }

    #[test]
    fn division_follows_python() {
        assert_eq!(eval("7 / 2"), Ok(Value::Float(3.5)));
        assert_eq!(eval("-7 // 2"), Ok(Value::Int(-4)));
        assert_eq!(eval("-7 % 3"), Ok(Value::Int(2)));
        assert_eq!(eval("7 % -3"), Ok(Value::Int(-2)));
        assert_eq!(eval("-7.5 // 2"), Ok(Value::Float(-4.0)));
        assert_eq!(eval("-7.5 % 2"), Ok(Value::Float(0.5)));
        assert_eq!(eval("1 // 0"), Err(EvalError::ZeroDivision));
        assert_eq!(eval("1 % 0.0"), Err(EvalError::ZeroDivision));
    }

    #[test]
    fn power_is_right_associative_and_binds_tighter_than_unary_minus() {
        assert_eq!(eval("2 ** 3 ** 2"), Ok(Value::Int(512)));
        assert_eq!(eval("-2 ** 2"), Ok(Value::Int(-4)));
        assert_eq!(eval("2 ** -1"), Ok(Value::Float(0.5)));
    }

    #[test]
    fn comparisons_chain() {
        assert_eq!(eval("1 < 2 < 3"), Ok(Value::Bool(true)));
        assert_eq!(eval("1 < 3 < 2"), Ok(Value::Bool(false)));
        assert_eq!(eval("3 > 2 == 2"), Ok(Value::Bool(true)));
    }

    #[test]
    fn and_or_return_operands() {
        assert_eq!(eval("0 or 5"), Ok(Value::Int(5)));
        assert_eq!(eval("3 and 0"), Ok(Value::Int(0)));
        assert_eq!(eval("not 0"), Ok(Value::Bool(true)));
    }

    #[test]
    fn membership_in_lists_and_tuples() {
        let names = ["w"];
        assert_eq!(eval_with("w in [4, 8]", &names, &[Value::Int(8)]), Ok(Value::Bool(true)));
        assert_eq!(eval_with("w not in (4, 8)", &names, &[Value::Int(8)]), Ok(Value::Bool(false)));
        assert_eq!(eval_with("w in ['ca', 'cg']", &names, &[Value::Str("cg".into())]), Ok(Value::Bool(true)));
    }

    #[test]
    fn min_max_abs() {
        assert_eq!(eval("max(1, 5, 3)"), Ok(Value::Int(5)));
        assert_eq!(eval("min([4, 2.5])"), Ok(Value::Float(2.5)));
        assert_eq!(eval("abs(-3)"), Ok(Value::Int(3)));
    }

    #[test]
    fn bitwise_operators_bind_tighter_than_comparisons() {
        assert_eq!(eval("6 & 5 == 4"), Ok(Value::Bool(true)));
        assert_eq!(eval("1 << 4 | 1"), Ok(Value::Int(17)));
    }

    #[test]
    fn strings_compare_but_do_not_add() {
        assert_eq!(eval("'a' < 'b'"), Ok(Value::Bool(true)));
        assert_eq!(eval("'a' == 1"), Ok(Value::Bool(false)));
        assert!(matches!(eval("'a' < 1"), Err(EvalError::Type(_))));
    }

    #[test]
    fn integer_overflow_continues_in_floating_point() {
        assert_eq!(eval("2 ** 64 > 10"), Ok(Value::Bool(true)));
    }

    #[test]
    fn unknown_name_points_at_it_and_suggests() {
        let error = Expression::parse("BLOCK_X * 2 <= 64", &["BLOCK_M", "BLOCK_N"]).unwrap_err();
        assert_eq!(error.column, 0);
        assert!(matches!(error.kind, ParseErrorKind::UnknownName { ref name, .. } if name == "BLOCK_X"));
        let error = Expression::parse("a + blok_size <= 4", &["a", "block_size"]).unwrap_err();
        assert_eq!(error.column, 4);
        assert_eq!(
            error.kind,
            ParseErrorKind::UnknownName { name: "blok_size".into(), suggestion: Some("block_size".into()) }
        );
    }

    #[test]
    fn syntax_error_quotes_text_and_column() {
        let error = Expression::parse("a % 16 = 0", &["a"]).unwrap_err();
        assert_eq!(error.column, 7);
        assert_eq!(error.to_string(), "in 'a % 16 = 0' at column 8: '=' is assignment; compare with '=='");
        assert_eq!(format!("{error:#}").lines().last(), Some("           ^"));
    }

    fn too_deep(text: &str) -> bool {
        matches!(Expression::parse(text, &["x"]), Err(ParseError { kind: ParseErrorKind::TooDeep { limit: 200 }, .. }))
    }

    #[test]
    fn nesting_past_the_limit_is_refused_not_a_stack_overflow() {
        let deep = 5000;
        let inputs = [
            format!("{}x{}", "(".repeat(deep), ")".repeat(deep)),
            format!("{}x{}", "[".repeat(deep), "]".repeat(deep)),
            format!("{}x{}", "abs(".repeat(deep), ")".repeat(deep)),
            format!("{}x", "not ".repeat(deep)),
            format!("{}x", "-".repeat(deep)),
            format!("{}x", "2 ** ".repeat(deep)),
            format!("{}x", "x if x else ".repeat(deep)),
            format!("{}x", "x + ".repeat(50_000)),
            format!("{}x", "x and ".repeat(50_000)),
        ];
        for text in &inputs {
            assert!(too_deep(text), "{:?}... should be refused as too deep", &text[..24]);
        }
        let error = Expression::parse(&inputs[7], &["x"]).unwrap_err();
        assert_eq!(error.column, 798, "the 200th '+' of 'x + x + ...'");
        let message = error.to_string();
        assert!(message.starts_with("in '...+ x + x + x"), "{message}");
        assert!(
            message.contains("+ x ...' at column 799: the expression nests more than 200 levels deep"),
            "{message}"
        );
        assert!(message.len() < 300, "a long restriction is quoted around the column: {message}");
        let caret = format!("{error:#}");
        let lines: Vec<&str> = caret.lines().collect();
        assert_eq!(lines[1].chars().nth(lines[2].len() - 1), Some('+'), "the caret is under the '+':\n{caret}");
    }

    #[test]
    fn nesting_up_to_the_limit_parses_and_evaluates() {
        let levels = Expression::MAX_DEPTH - 1;
        let inputs = [
            format!("{}x{}", "(".repeat(levels), ")".repeat(levels)),
            format!("{}x", "-".repeat(levels)),
            format!("{}x", "not ".repeat(levels)),
            format!("{}x", "x + ".repeat(levels)),
        ];
        let expected = [Value::Int(3), Value::Int(-3), Value::Bool(false), Value::Int(600)];
        for (text, expected) in inputs.iter().zip(expected) {
            assert_eq!(eval_with(text, &["x"], &[Value::Int(3)]), Ok(expected), "{:?}...", &text[..24]);
        }
        assert!(too_deep(&format!("{}x", "x + ".repeat(levels + 1))));
    }

    #[test]
    fn long_flat_lists_and_comparison_chains_are_not_deep() {
        let chain = format!("{}x", "x <= ".repeat(50_000));
        assert_eq!(eval_with(&chain, &["x"], &[Value::Int(3)]), Ok(Value::Bool(true)));
        let list = format!("x in [{}3]", "1, ".repeat(50_000));
        assert_eq!(eval_with(&list, &["x"], &[Value::Int(3)]), Ok(Value::Bool(true)));
    }

    #[test]
    fn incomplete_expressions_are_errors() {
        for text in ["", "a +", "(a", "a <", "min()", "[1, 2]", "a if a", "foo(1)", "a b"] {
            assert!(Expression::parse(text, &["a"]).is_err(), "{text:?} should not parse");
        }
    }
}
