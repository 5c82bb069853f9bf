//! Splits a restriction string into tokens, each with its character column.

use super::ParseErrorKind;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    Int(i64),
    Float(f64),
    Str(String),
    Name(String),
    /// Operators and punctuation, spelled as in the source (`**`, `//`, `(`, ...).
    Symbol(&'static str),
    /// Keywords: `and or not in if else is True False None`.
    Keyword(&'static str),
    End,
}

#[derive(Debug, Clone)]
pub(crate) struct Spanned {
    pub token: Token,
    /// Zero-based character index of the token's first character.
    pub column: usize,
}

// Longest first, so that `**` wins over `*` and `//` over `/`.
const SYMBOLS: [&str; 26] = [
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "<", ">", "(", ")", "[", "]", ",", "&",
    "|", "^", "~", "=", "!",
];

const KEYWORDS: [&str; 10] = ["and", "or", "not", "in", "if", "else", "is", "True", "False", "None"];

pub(crate) fn tokenize(text: &str) -> Result<Vec<Spanned>, (usize, ParseErrorKind)> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let column = i;
        let token = if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let (token, next) = number(&chars, i).map_err(|kind| (column, kind))?;
            i = next;
            token
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match KEYWORDS.iter().find(|k| **k == word) {
                Some(keyword) => Token::Keyword(keyword),
                None => Token::Name(word),
            }
        } else if c == '\'' || c == '"' {
            let (token, next) = string(&chars, i).map_err(|kind| (column, kind))?;
            i = next;
            token
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let symbol = SYMBOLS
                .iter()
                .find(|s| rest.starts_with(**s))
                .ok_or((column, ParseErrorKind::UnexpectedCharacter(c)))?;
            i += symbol.len();
            Token::Symbol(symbol)
        };
        tokens.push(Spanned { token, column });
    }
    tokens.push(Spanned { token: Token::End, column: chars.len() });
    Ok(tokens)
}

fn number(chars: &[char], start: usize) -> Result<(Token, usize), ParseErrorKind> {
    let radix = match (chars[start], chars.get(start + 1).map(|c| c.to_ascii_lowercase())) {
        ('0', Some('x')) => 16,
        ('0', Some('o')) => 8,
        ('0', Some('b')) => 2,
        _ => 10,
    };
    let mut i = start;
    if radix != 10 {
        i += 2;
        let digits_start = i;
        while i < chars.len() && (chars[i].is_digit(radix) || chars[i] == '_') {
            i += 1;
        }
        let digits: String = chars[digits_start..i].iter().filter(|c| **c != '_').collect();
        let value = i64::from_str_radix(&digits, radix).map_err(|_| ParseErrorKind::BadNumber)?;
        return Ok((Token::Int(value), i));
    }
    let mut is_float = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() || c == '_' {
            i += 1;
        } else if c == '.' && !is_float {
            is_float = true;
            i += 1;
        } else if (c == 'e' || c == 'E')
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit() || *n == '+' || *n == '-')
        {
            is_float = true;
            i += 2;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            break;
        } else {
            break;
        }
    }
    if chars.get(i).is_some_and(|c| c.is_alphabetic() || *c == '_') {
        return Err(ParseErrorKind::BadNumber);
    }
    let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
    let token = if is_float {
        Token::Float(text.parse().map_err(|_| ParseErrorKind::BadNumber)?)
    } else {
        match text.parse::<i64>() {
            Ok(value) => Token::Int(value),
            // Python has big integers; past i64 we keep the magnitude as a float.
            Err(_) => Token::Float(text.parse().map_err(|_| ParseErrorKind::BadNumber)?),
        }
    };
    Ok((token, i))
}

fn string(chars: &[char], start: usize) -> Result<(Token, usize), ParseErrorKind> {
    let quote = chars[start];
    let mut out = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            c if c == quote => return Ok((Token::Str(out), i + 1)),
            '\\' => {
                let escaped = chars.get(i + 1).ok_or(ParseErrorKind::UnterminatedString)?;
                out.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => *other,
                });
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err(ParseErrorKind::UnterminatedString)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Token> {
        tokenize(text).expect("tokenizes").into_iter().map(|s| s.token).collect()
    }

    #[test]
    fn longest_operator_wins() {
        assert_eq!(
            kinds("a**2//b"),
            vec![
                Token::Name("a".into()),
                Token::Symbol("**"),
                Token::Int(2),
                Token::Symbol("//"),
                Token::Name("b".into()),
                Token::End
            ]
        );
    }

    #[test]
    fn numbers_follow_python_literals() {
        assert_eq!(
            kinds("1_000 0x10 1.5 .5 2e3 3.")[..6],
            [
                Token::Int(1000),
                Token::Int(16),
                Token::Float(1.5),
                Token::Float(0.5),
                Token::Float(2000.0),
                Token::Float(3.0)
            ]
        );
    }

    #[test]
    fn columns_count_characters() {
        let tokens = tokenize("ab  <= 'x'").expect("tokenizes");
        assert_eq!(tokens.iter().map(|t| t.column).collect::<Vec<_>>(), vec![0, 4, 7, 10]);
    }

    #[test]
    fn stray_character_is_reported_with_its_column() {
        assert!(matches!(tokenize("a $ b"), Err((2, ParseErrorKind::UnexpectedCharacter('$')))));
    }
}
