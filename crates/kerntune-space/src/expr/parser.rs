//! Recursive-descent parser for the Python expression subset, with Python's precedence
//! (lowest first): `x if c else y`, `or`, `and`, `not`, comparisons and `in`, `|`, `^`,
//! `&`, shifts, `+ -`, `* / // %`, unary `+ - ~`, `**`.
//!
//! The parser, evaluation and `Drop` all recurse over the tree, so the parser refuses an
//! expression that nests deeper than [`Expression::MAX_DEPTH`] before it can overflow the stack.

use super::lexer::{Spanned, Token};
use super::{Expression, ParseErrorKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    TrueDiv,
    FloorDiv,
    Mod,
    Pow,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Pos,
    Invert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    In,
    NotIn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    Min,
    Max,
    Abs,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Literal(Literal),
    /// A variable, by its slot in the expression's own list of names.
    Var(usize),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `first op1 e1 op2 e2 ...`, Python's chained comparison.
    Compare(Box<Expr>, Vec<(CompareOp, Expr)>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    IfElse {
        condition: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    Call(Function, Vec<Expr>),
    /// A list or tuple display; only valid after `in` or as the sole argument of min/max.
    List(Vec<Expr>),
}

pub(crate) type ParseResult<T> = Result<T, (usize, ParseErrorKind)>;

/// A name as the parser met it, before it is resolved to a parameter.
pub(crate) struct NameUse {
    pub name: String,
    pub column: usize,
}

pub(crate) struct Parser<'t> {
    tokens: &'t [Spanned],
    position: usize,
    /// Constructs (brackets, calls, unary operators, `not`, `**`, `if`) open around the
    /// token being parsed: the parser's own recursion, which brackets drive without
    /// deepening the tree.
    open: usize,
    /// Distinct names in order of first use; `Expr::Var(i)` refers to `names[i]`.
    pub names: Vec<NameUse>,
}

impl<'t> Parser<'t> {
    pub fn new(tokens: &'t [Spanned]) -> Self {
        Parser { tokens, position: 0, open: 0, names: Vec::new() }
    }

    pub fn parse_all(&mut self) -> ParseResult<Expr> {
        if self.peek() == &Token::End {
            return Err((0, ParseErrorKind::Empty));
        }
        let expr = self.ternary()?;
        if self.peek() != &Token::End {
            return Err((self.column(), self.unexpected("the end of the expression")));
        }
        check_lists(&expr, false).map_err(|()| (0, ParseErrorKind::MisplacedList))?;
        Ok(expr)
    }

    fn peek(&self) -> &Token {
        &self.tokens[self.position].token
    }

    fn peek_next(&self) -> &Token {
        let next = (self.position + 1).min(self.tokens.len() - 1);
        &self.tokens[next].token
    }

    fn column(&self) -> usize {
        self.tokens[self.position].column
    }

    fn advance(&mut self) -> Token {
        let token = self.tokens[self.position].token.clone();
        if self.position + 1 < self.tokens.len() {
            self.position += 1;
        }
        token
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        let found = matches!(self.peek(), Token::Symbol(s) if *s == symbol);
        if found {
            self.advance();
        }
        found
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        let found = matches!(self.peek(), Token::Keyword(k) if *k == keyword);
        if found {
            self.advance();
        }
        found
    }

    fn expect_symbol(&mut self, symbol: &'static str) -> ParseResult<()> {
        if self.eat_symbol(symbol) {
            Ok(())
        } else {
            Err((self.column(), self.unexpected(symbol)))
        }
    }

    fn unexpected(&self, expected: &'static str) -> ParseErrorKind {
        match self.peek() {
            Token::Symbol("=") => ParseErrorKind::Hint("'=' is assignment; compare with '=='"),
            Token::Symbol("!") => ParseErrorKind::Hint("'!' is not Python; use 'not' or '!='"),
            Token::Keyword("is") => ParseErrorKind::Hint("'is' is not supported; compare with '=='"),
            found => ParseErrorKind::Expected { expected, found: describe(found) },
        }
    }

    /// Runs `parse` one construct deeper, refusing to recurse past [`Expression::MAX_DEPTH`].
    fn nested<T>(&mut self, parse: impl FnOnce(&mut Self) -> ParseResult<T>) -> ParseResult<T> {
        if self.open >= Expression::MAX_DEPTH {
            return Err((self.column(), ParseErrorKind::TooDeep { limit: Expression::MAX_DEPTH }));
        }
        self.open += 1;
        let parsed = parse(self);
        self.open -= 1;
        parsed
    }

    /// Refuses `expr` when its tree is deeper than [`Expression::MAX_DEPTH`]. Every node is built
    /// through here, so the subtrees are already bounded and the walk is short; a long
    /// chain such as `a + a + ... + a` is a deep tree and is caught link by link.
    fn bounded(&self, column: usize, expr: Expr) -> ParseResult<Expr> {
        if depth(&expr) > Expression::MAX_DEPTH {
            return Err((column, ParseErrorKind::TooDeep { limit: Expression::MAX_DEPTH }));
        }
        Ok(expr)
    }

    fn ternary(&mut self) -> ParseResult<Expr> {
        let column = self.column();
        let then = self.or_expr()?;
        if !self.eat_keyword("if") {
            return Ok(then);
        }
        let condition = self.or_expr()?;
        if !self.eat_keyword("else") {
            return Err((self.column(), self.unexpected("'else'")));
        }
        let otherwise = self.nested(Self::ternary)?;
        let expr =
            Expr::IfElse { condition: Box::new(condition), then: Box::new(then), otherwise: Box::new(otherwise) };
        self.bounded(column, expr)
    }

    fn or_expr(&mut self) -> ParseResult<Expr> {
        self.keyword_chain("or", Self::and_expr, Expr::Or)
    }

    fn and_expr(&mut self) -> ParseResult<Expr> {
        self.keyword_chain("and", Self::not_expr, Expr::And)
    }

    /// A left-associative chain of `keyword` (`and`, `or`) between operands parsed by `next`.
    fn keyword_chain(
        &mut self,
        keyword: &str,
        next: fn(&mut Self) -> ParseResult<Expr>,
        node: fn(Box<Expr>, Box<Expr>) -> Expr,
    ) -> ParseResult<Expr> {
        let mut left = next(self)?;
        loop {
            let column = self.column();
            if !self.eat_keyword(keyword) {
                return Ok(left);
            }
            let right = next(self)?;
            left = self.bounded(column, node(Box::new(left), Box::new(right)))?;
        }
    }

    fn not_expr(&mut self) -> ParseResult<Expr> {
        let column = self.column();
        if self.eat_keyword("not") {
            let operand = self.nested(Self::not_expr)?;
            return self.bounded(column, Expr::Not(Box::new(operand)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> ParseResult<Expr> {
        let column = self.column();
        let first = self.bit_or()?;
        let mut rest = Vec::new();
        loop {
            let op = match self.peek() {
                Token::Symbol("<") => CompareOp::Lt,
                Token::Symbol("<=") => CompareOp::Le,
                Token::Symbol(">") => CompareOp::Gt,
                Token::Symbol(">=") => CompareOp::Ge,
                Token::Symbol("==") => CompareOp::Eq,
                Token::Symbol("!=") => CompareOp::Ne,
                Token::Keyword("in") => CompareOp::In,
                Token::Keyword("not") if self.peek_next() == &Token::Keyword("in") => {
                    self.advance();
                    CompareOp::NotIn
                }
                _ => break,
            };
            self.advance();
            rest.push((op, self.bit_or()?));
        }
        if rest.is_empty() {
            return Ok(first);
        }
        self.bounded(column, Expr::Compare(Box::new(first), rest))
    }

    /// One level of left-associative binary operators.
    fn binary_level(
        &mut self,
        operators: &[(&str, BinaryOp)],
        next: fn(&mut Self) -> ParseResult<Expr>,
    ) -> ParseResult<Expr> {
        let mut left = next(self)?;
        'outer: loop {
            let column = self.column();
            for (symbol, op) in operators {
                if self.eat_symbol(symbol) {
                    let right = next(self)?;
                    left = self.bounded(column, Expr::Binary(*op, Box::new(left), Box::new(right)))?;
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn bit_or(&mut self) -> ParseResult<Expr> {
        self.binary_level(&[("|", BinaryOp::BitOr)], Self::bit_xor)
    }

    fn bit_xor(&mut self) -> ParseResult<Expr> {
        self.binary_level(&[("^", BinaryOp::BitXor)], Self::bit_and)
    }

    fn bit_and(&mut self) -> ParseResult<Expr> {
        self.binary_level(&[("&", BinaryOp::BitAnd)], Self::shift)
    }

    fn shift(&mut self) -> ParseResult<Expr> {
        self.binary_level(&[("<<", BinaryOp::Shl), (">>", BinaryOp::Shr)], Self::arith)
    }

    fn arith(&mut self) -> ParseResult<Expr> {
        self.binary_level(&[("+", BinaryOp::Add), ("-", BinaryOp::Sub)], Self::term)
    }

    fn term(&mut self) -> ParseResult<Expr> {
        self.binary_level(
            &[("*", BinaryOp::Mul), ("//", BinaryOp::FloorDiv), ("/", BinaryOp::TrueDiv), ("%", BinaryOp::Mod)],
            Self::factor,
        )
    }

    fn factor(&mut self) -> ParseResult<Expr> {
        let column = self.column();
        for (symbol, op) in [("-", UnaryOp::Neg), ("+", UnaryOp::Pos), ("~", UnaryOp::Invert)] {
            if self.eat_symbol(symbol) {
                let operand = self.nested(Self::factor)?;
                return self.bounded(column, Expr::Unary(op, Box::new(operand)));
            }
        }
        self.power()
    }

    fn power(&mut self) -> ParseResult<Expr> {
        let base = self.atom()?;
        let column = self.column();
        if self.eat_symbol("**") {
            // Right-associative, and binds tighter than a unary minus on its left only.
            let exponent = self.nested(Self::factor)?;
            return self.bounded(column, Expr::Binary(BinaryOp::Pow, Box::new(base), Box::new(exponent)));
        }
        Ok(base)
    }

    fn atom(&mut self) -> ParseResult<Expr> {
        let column = self.column();
        match self.peek().clone() {
            Token::Int(i) => {
                self.advance();
                Ok(Expr::Literal(Literal::Int(i)))
            }
            Token::Float(f) => {
                self.advance();
                Ok(Expr::Literal(Literal::Float(f)))
            }
            Token::Str(s) => {
                self.advance();
                Ok(Expr::Literal(Literal::Str(s)))
            }
            Token::Keyword("True") => {
                self.advance();
                Ok(Expr::Literal(Literal::Bool(true)))
            }
            Token::Keyword("False") => {
                self.advance();
                Ok(Expr::Literal(Literal::Bool(false)))
            }
            Token::Name(name) => {
                self.advance();
                if self.eat_symbol("(") {
                    let function = match name.as_str() {
                        "min" => Function::Min,
                        "max" => Function::Max,
                        "abs" => Function::Abs,
                        _ => return Err((column, ParseErrorKind::UnknownFunction(name))),
                    };
                    let args = self.nested(|parser| parser.sequence(")"))?;
                    let arity_ok = match function {
                        Function::Abs => args.len() == 1,
                        Function::Min | Function::Max => !args.is_empty(),
                    };
                    if !arity_ok {
                        return Err((column, ParseErrorKind::Arity(name)));
                    }
                    return self.bounded(column, Expr::Call(function, args));
                }
                Ok(Expr::Var(self.slot(name, column)))
            }
            Token::Symbol("(") => {
                self.advance();
                let items = self.nested(|parser| parser.sequence(")"))?;
                let trailing_comma = matches!(self.tokens[self.position - 2].token, Token::Symbol(","));
                match items.len() {
                    0 => Err((column, ParseErrorKind::Hint("an empty tuple '()' has no value here"))),
                    1 if !trailing_comma => Ok(items.into_iter().next().expect("one item")),
                    _ => self.bounded(column, Expr::List(items)),
                }
            }
            Token::Symbol("[") => {
                self.advance();
                let items = self.nested(|parser| parser.sequence("]"))?;
                self.bounded(column, Expr::List(items))
            }
            other => Err((column, ParseErrorKind::Expected { expected: "a value", found: describe(&other) })),
        }
    }

    /// Comma-separated expressions up to `close`, which is consumed; a trailing comma is allowed.
    fn sequence(&mut self, close: &'static str) -> ParseResult<Vec<Expr>> {
        let mut items = Vec::new();
        while !self.eat_symbol(close) {
            items.push(self.ternary()?);
            if !self.eat_symbol(",") {
                self.expect_symbol(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn slot(&mut self, name: String, column: usize) -> usize {
        match self.names.iter().position(|n| n.name == name) {
            Some(slot) => slot,
            None => {
                self.names.push(NameUse { name, column });
                self.names.len() - 1
            }
        }
    }
}

fn describe(token: &Token) -> String {
    match token {
        Token::Int(i) => format!("'{i}'"),
        Token::Float(f) => format!("'{f}'"),
        Token::Str(s) => format!("{s:?}"),
        Token::Name(n) => format!("'{n}'"),
        Token::Symbol(s) | Token::Keyword(s) => format!("'{s}'"),
        Token::End => "the end".to_string(),
    }
}

/// The number of nodes on the longest path from `expr` to a leaf.
fn depth(expr: &Expr) -> usize {
    let deepest = |children: &mut dyn Iterator<Item = &Expr>| children.map(depth).max().unwrap_or(0);
    1 + match expr {
        Expr::Literal(_) | Expr::Var(_) => 0,
        Expr::Unary(_, e) | Expr::Not(e) => depth(e),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => depth(a).max(depth(b)),
        Expr::Compare(first, rest) => depth(first).max(deepest(&mut rest.iter().map(|(_, e)| e))),
        Expr::IfElse { condition, then, otherwise } => depth(condition).max(depth(then)).max(depth(otherwise)),
        Expr::Call(_, items) | Expr::List(items) => deepest(&mut items.iter()),
    }
}

/// Lists have no value of their own: they may only follow `in` or be the one argument of min/max.
fn check_lists(expr: &Expr, allowed: bool) -> Result<(), ()> {
    match expr {
        Expr::List(items) if allowed => items.iter().try_for_each(|e| check_lists(e, false)),
        Expr::List(_) => Err(()),
        Expr::Literal(_) | Expr::Var(_) => Ok(()),
        Expr::Unary(_, e) | Expr::Not(e) => check_lists(e, false),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            check_lists(a, false)?;
            check_lists(b, false)
        }
        Expr::Compare(first, rest) => {
            check_lists(first, false)?;
            rest.iter().try_for_each(|(op, e)| check_lists(e, matches!(op, CompareOp::In | CompareOp::NotIn)))
        }
        Expr::IfElse { condition, then, otherwise } => {
            check_lists(condition, false)?;
            check_lists(then, false)?;
            check_lists(otherwise, false)
        }
        Expr::Call(_, args) => {
            let single = args.len() == 1;
            args.iter().try_for_each(|e| check_lists(e, single))
        }
    }
}
