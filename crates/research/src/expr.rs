//! The signal language: a small expression language over bar series, parsed with
//! positions, type checked, and evaluated a whole series at a time.
//!
//! ```text
//! expr    := or
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | cmp
//! cmp     := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/") unary)*
//! unary   := "-" unary | atom
//! atom    := number | series | call | "(" expr ")"
//! ```
//!
//! Types: a number (a constant), a series (one number per bar), a condition (true, false
//! or unknown per bar). A value on bar *t* uses bars up to *t* only: there is no way to
//! name a later bar (`shift` takes only a non-negative constant), so a signal cannot
//! peek ahead. Warm-up bars, where an indicator has no value yet, are `NaN` in a series
//! and unknown in a condition; a condition with an unknown part is unknown (`and`, `or`
//! and `not` included), and an unknown condition never signals.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use crate::indicators;

/// Where a parse or type error is, and what was expected: a message a model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// 1-based character position.
    pub position: usize,
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at character {}: {}", self.position, self.message)
    }
}

pub const SERIES: [&str; 5] = ["open", "high", "low", "close", "volume"];

/// The functions, their arguments and what they answer, for help texts.
pub const FUNCTIONS: &str = "sma(x, n), ema(x, n), rsi(x, n), atr(n), bb_upper(x, n, k), bb_lower(x, n, k), highest(x, n), lowest(x, n), ret(x, n), shift(x, n), cross_above(a, b), cross_below(a, b)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Open,
    High,
    Low,
    Close,
    Volume,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            Self::Add => "+",
            Self::Sub => "-",
            Self::Mul => "*",
            Self::Div => "/",
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Eq => "==",
            Self::Ne => "!=",
            Self::And => "and",
            Self::Or => "or",
        }
    }
}

/// A checked expression, ready to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(f64),
    Series(Field),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Sma(Box<Expr>, usize),
    Ema(Box<Expr>, usize),
    Rsi(Box<Expr>, usize),
    Atr(usize),
    BbUpper(Box<Expr>, usize, f64),
    BbLower(Box<Expr>, usize, f64),
    Highest(Box<Expr>, usize),
    Lowest(Box<Expr>, usize),
    Ret(Box<Expr>, usize),
    Shift(Box<Expr>, usize),
    CrossAbove(Box<Expr>, Box<Expr>),
    CrossBelow(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Whether the expression reads the bar column `field` anywhere (`atr` reads the
    /// high, the low and the close).
    #[must_use]
    pub fn reads(&self, field: Field) -> bool {
        match self {
            Expr::Number(_) => false,
            Expr::Series(f) => *f == field,
            Expr::Atr(_) => matches!(field, Field::High | Field::Low | Field::Close),
            Expr::Neg(x)
            | Expr::Not(x)
            | Expr::Sma(x, _)
            | Expr::Ema(x, _)
            | Expr::Rsi(x, _)
            | Expr::BbUpper(x, ..)
            | Expr::BbLower(x, ..)
            | Expr::Highest(x, _)
            | Expr::Lowest(x, _)
            | Expr::Ret(x, _)
            | Expr::Shift(x, _) => x.reads(field),
            Expr::Binary(_, a, b) | Expr::CrossAbove(a, b) | Expr::CrossBelow(a, b) => {
                a.reads(field) || b.reads(field)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Number,
    Series,
    Condition,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Number => "a number",
            Self::Series => "a series",
            Self::Condition => "a condition",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    End,
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            let n = s.parse::<f64>().map_err(|_| ExprError {
                position: pos,
                message: format!("'{s}' is not a number"),
            })?;
            out.push((Tok::Num(n), pos));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), pos));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = match two.as_str() {
                "<=" => Some("<="),
                ">=" => Some(">="),
                "==" => Some("=="),
                "!=" => Some("!="),
                "&&" => Some("and"),
                "||" => Some("or"),
                _ => None,
            };
            if let Some(op) = op {
                out.push((Tok::Op(op), pos));
                i += 2;
                continue;
            }
            let tok = match c {
                '<' => Tok::Op("<"),
                '>' => Tok::Op(">"),
                '+' => Tok::Op("+"),
                '-' => Tok::Op("-"),
                '*' => Tok::Op("*"),
                '/' => Tok::Op("/"),
                '!' => Tok::Op("not"),
                '(' => Tok::LParen,
                ')' => Tok::RParen,
                ',' => Tok::Comma,
                '=' => {
                    return Err(ExprError {
                        position: pos,
                        message: "'=' alone is not an operator: compare with '=='".to_owned(),
                    });
                }
                other => {
                    return Err(ExprError {
                        position: pos,
                        message: format!(
                            "unexpected '{other}': expressions use numbers, series ({}), functions, + - * /, comparisons, and/or/not and parentheses",
                            SERIES.join(", ")
                        ),
                    });
                }
            };
            out.push((tok, pos));
            i += 1;
        }
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(n) => format!("the number {n}"),
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Op(o) => format!("'{o}'"),
        Tok::LParen => "'('".to_owned(),
        Tok::RParen => "')'".to_owned(),
        Tok::Comma => "','".to_owned(),
        Tok::End => "the end of the expression".to_owned(),
    }
}

/// A parsed node with its position and its type.
struct Node {
    expr: Expr,
    kind: Kind,
    pos: usize,
    /// The constant's value, for arguments that must be constants.
    constant: Option<f64>,
}

/// The longest expression read, in characters, and the deepest nesting of parentheses,
/// function calls, `not`, `-` and chained operators (`a + b + c` nests two deep): the
/// parser, the evaluator and the tree's drop recurse on them, and no strategy needs more.
pub const MAX_LENGTH: usize = 2_000;
pub const MAX_DEPTH: usize = 64;

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    depth: usize,
}

impl Parser {
    /// One level deeper, or an error at the current token past [`MAX_DEPTH`]. (A parse
    /// that fails stops, so only a successful level needs [`Parser::ascend`].)
    fn descend(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError {
                position: self.pos(),
                message: format!(
                    "the expression nests deeper than {MAX_DEPTH} levels (parentheses, calls, 'not', '-' and chained operators); write it shorter or flatter"
                ),
            });
        }
        Ok(())
    }

    fn ascend(&mut self) {
        self.depth -= 1;
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }

    fn pos(&self) -> usize {
        self.toks[self.at].1
    }

    fn bump(&mut self) -> (Tok, usize) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
            || matches!(self.peek(), Tok::Op(o) if *o == w)
    }

    fn expect(&mut self, want: &Tok, what: &str) -> Result<(), ExprError> {
        if self.peek() == want {
            self.bump();
            Ok(())
        } else {
            Err(ExprError {
                position: self.pos(),
                message: format!("expected {what}, found {}", describe(self.peek())),
            })
        }
    }

    fn or(&mut self) -> Result<Node, ExprError> {
        self.descend()?;
        let mut left = self.and()?;
        let mut links = 0;
        while self.is_word("or") {
            let pos = self.pos();
            self.bump();
            // Each link of a chain nests the tree one level deeper.
            self.descend()?;
            links += 1;
            let right = self.and()?;
            left = logical(BinOp::Or, left, right, pos)?;
        }
        self.depth -= links;
        self.ascend();
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, ExprError> {
        let mut left = self.not()?;
        let mut links = 0;
        while self.is_word("and") {
            let pos = self.pos();
            self.bump();
            self.descend()?;
            links += 1;
            let right = self.not()?;
            left = logical(BinOp::And, left, right, pos)?;
        }
        self.depth -= links;
        Ok(left)
    }

    fn not(&mut self) -> Result<Node, ExprError> {
        if self.is_word("not") {
            let pos = self.pos();
            self.bump();
            self.descend()?;
            let inner = self.not()?;
            self.ascend();
            if inner.kind != Kind::Condition {
                return Err(ExprError {
                    position: pos,
                    message: format!(
                        "'not' needs a condition, but its operand is {}",
                        inner.kind.name()
                    ),
                });
            }
            return Ok(Node {
                expr: Expr::Not(Box::new(inner.expr)),
                kind: Kind::Condition,
                pos,
                constant: None,
            });
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Node, ExprError> {
        let left = self.sum()?;
        let op = match self.peek() {
            Tok::Op("<") => BinOp::Lt,
            Tok::Op("<=") => BinOp::Le,
            Tok::Op(">") => BinOp::Gt,
            Tok::Op(">=") => BinOp::Ge,
            Tok::Op("==") => BinOp::Eq,
            Tok::Op("!=") => BinOp::Ne,
            _ => return Ok(left),
        };
        let pos = self.pos();
        self.bump();
        let right = self.sum()?;
        for side in [&left, &right] {
            if side.kind == Kind::Condition {
                return Err(ExprError {
                    position: side.pos,
                    message: format!(
                        "'{}' compares numbers or series, not a condition",
                        op.symbol()
                    ),
                });
            }
        }
        if matches!(self.peek(), Tok::Op("<" | "<=" | ">" | ">=" | "==" | "!=")) {
            return Err(ExprError {
                position: self.pos(),
                message: "comparisons do not chain: write a < b and b < c".to_owned(),
            });
        }
        Ok(Node {
            expr: Expr::Binary(op, Box::new(left.expr), Box::new(right.expr)),
            kind: Kind::Condition,
            pos,
            constant: None,
        })
    }

    fn sum(&mut self) -> Result<Node, ExprError> {
        let mut left = self.product()?;
        let mut links = 0;
        loop {
            let op = match self.peek() {
                Tok::Op("+") => BinOp::Add,
                Tok::Op("-") => BinOp::Sub,
                _ => break,
            };
            let pos = self.pos();
            self.bump();
            self.descend()?;
            links += 1;
            let right = self.product()?;
            left = arithmetic(op, left, right, pos)?;
        }
        self.depth -= links;
        Ok(left)
    }

    fn product(&mut self) -> Result<Node, ExprError> {
        let mut left = self.unary()?;
        let mut links = 0;
        loop {
            let op = match self.peek() {
                Tok::Op("*") => BinOp::Mul,
                Tok::Op("/") => BinOp::Div,
                _ => break,
            };
            let pos = self.pos();
            self.bump();
            self.descend()?;
            links += 1;
            let right = self.unary()?;
            left = arithmetic(op, left, right, pos)?;
        }
        self.depth -= links;
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        if matches!(self.peek(), Tok::Op("-")) {
            let pos = self.pos();
            self.bump();
            self.descend()?;
            let inner = self.unary()?;
            self.ascend();
            if inner.kind == Kind::Condition {
                return Err(ExprError {
                    position: pos,
                    message: "'-' needs a number or a series, not a condition".to_owned(),
                });
            }
            return Ok(Node {
                constant: inner.constant.map(|c| -c),
                expr: match inner.constant {
                    Some(c) => Expr::Number(-c),
                    None => Expr::Neg(Box::new(inner.expr)),
                },
                kind: inner.kind,
                pos,
            });
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Node, ExprError> {
        let (tok, pos) = self.bump();
        match tok {
            Tok::Num(n) => Ok(Node {
                expr: Expr::Number(n),
                kind: Kind::Number,
                pos,
                constant: Some(n),
            }),
            Tok::LParen => {
                let inner = self.or()?;
                self.expect(&Tok::RParen, "')' to close the '(' opened earlier")?;
                Ok(inner)
            }
            Tok::Ident(name) => {
                if matches!(self.peek(), Tok::LParen) {
                    self.bump();
                    let mut args = Vec::new();
                    if !matches!(self.peek(), Tok::RParen) {
                        loop {
                            args.push(self.or()?);
                            if matches!(self.peek(), Tok::Comma) {
                                self.bump();
                                continue;
                            }
                            break;
                        }
                    }
                    self.expect(
                        &Tok::RParen,
                        &format!("',' or ')' in the arguments of {name}"),
                    )?;
                    return call(&name, &args, pos);
                }
                let field = match name.as_str() {
                    "open" => Field::Open,
                    "high" => Field::High,
                    "low" => Field::Low,
                    "close" => Field::Close,
                    "volume" => Field::Volume,
                    other => {
                        let hint = if indicator_names().contains(&other) {
                            format!("{other} is a function: write {other}(...)")
                        } else {
                            format!(
                                "the series are {}; the functions are {FUNCTIONS}",
                                SERIES.join(", ")
                            )
                        };
                        return Err(ExprError {
                            position: pos,
                            message: format!("unknown name '{other}': {hint}"),
                        });
                    }
                };
                Ok(Node {
                    expr: Expr::Series(field),
                    kind: Kind::Series,
                    pos,
                    constant: None,
                })
            }
            other => Err(ExprError {
                position: pos,
                message: format!(
                    "expected a number, a series ({}), a function or '(', found {}",
                    SERIES.join(", "),
                    describe(&other)
                ),
            }),
        }
    }
}

fn indicator_names() -> [&'static str; 12] {
    [
        "sma",
        "ema",
        "rsi",
        "atr",
        "bb_upper",
        "bb_lower",
        "highest",
        "lowest",
        "ret",
        "shift",
        "cross_above",
        "cross_below",
    ]
}

fn logical(op: BinOp, left: Node, right: Node, pos: usize) -> Result<Node, ExprError> {
    for side in [&left, &right] {
        if side.kind != Kind::Condition {
            return Err(ExprError {
                position: side.pos,
                message: format!(
                    "'{}' joins conditions, but this is {}: compare it first (for example close > sma(close, 20))",
                    op.symbol(),
                    side.kind.name()
                ),
            });
        }
    }
    Ok(Node {
        expr: Expr::Binary(op, Box::new(left.expr), Box::new(right.expr)),
        kind: Kind::Condition,
        pos,
        constant: None,
    })
}

fn arithmetic(op: BinOp, left: Node, right: Node, pos: usize) -> Result<Node, ExprError> {
    for side in [&left, &right] {
        if side.kind == Kind::Condition {
            return Err(ExprError {
                position: side.pos,
                message: format!(
                    "'{}' works on numbers and series, not on a condition",
                    op.symbol()
                ),
            });
        }
    }
    if let (Some(a), Some(b)) = (left.constant, right.constant) {
        let v = match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            _ => a / b,
        };
        return Ok(Node {
            expr: Expr::Number(v),
            kind: Kind::Number,
            pos,
            constant: Some(v),
        });
    }
    Ok(Node {
        expr: Expr::Binary(op, Box::new(left.expr), Box::new(right.expr)),
        kind: Kind::Series,
        pos,
        constant: None,
    })
}

/// A whole-number period argument.
fn period(name: &str, arg: &Node, which: &str, min: usize) -> Result<usize, ExprError> {
    let Some(v) = arg.constant else {
        return Err(ExprError {
            position: arg.pos,
            message: format!("{name}'s {which} must be a constant whole number, such as 20"),
        });
    };
    if v.fract() != 0.0 || v < min as f64 || v > 100_000.0 {
        return Err(ExprError {
            position: arg.pos,
            message: format!(
                "{name}'s {which} must be a whole number from {min} to 100000, not {v}"
            ),
        });
    }
    // Checked whole and in range above.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(v as usize)
}

fn numeric(name: &str, arg: &Node, which: &str) -> Result<Box<Expr>, ExprError> {
    if arg.kind == Kind::Condition {
        return Err(ExprError {
            position: arg.pos,
            message: format!("{name}'s {which} must be a series or a number, not a condition"),
        });
    }
    Ok(Box::new(arg.expr.clone()))
}

fn call(name: &str, args: &[Node], pos: usize) -> Result<Node, ExprError> {
    let want = |n: usize, shape: &str| -> Result<(), ExprError> {
        if args.len() == n {
            Ok(())
        } else {
            Err(ExprError {
                position: pos,
                message: format!(
                    "{name} takes {n} argument(s): {shape}; it was given {}",
                    args.len()
                ),
            })
        }
    };
    let series = |expr: Expr| Node {
        expr,
        kind: Kind::Series,
        pos,
        constant: None,
    };
    Ok(match name {
        "sma" | "ema" | "rsi" | "highest" | "lowest" | "ret" | "shift" => {
            want(2, &format!("{name}(x, n)"))?;
            let x = numeric(name, &args[0], "first argument")?;
            let min = usize::from(name != "shift");
            let n = period(name, &args[1], "period", min)?;
            series(match name {
                "sma" => Expr::Sma(x, n),
                "ema" => Expr::Ema(x, n),
                "rsi" => Expr::Rsi(x, n),
                "highest" => Expr::Highest(x, n),
                "lowest" => Expr::Lowest(x, n),
                "ret" => Expr::Ret(x, n),
                _ => Expr::Shift(x, n),
            })
        }
        "atr" => {
            want(1, "atr(n)")?;
            series(Expr::Atr(period(name, &args[0], "period", 1)?))
        }
        "bb_upper" | "bb_lower" => {
            want(3, &format!("{name}(x, n, k)"))?;
            let x = numeric(name, &args[0], "first argument")?;
            let n = period(name, &args[1], "period", 1)?;
            let Some(k) = args[2].constant else {
                return Err(ExprError {
                    position: args[2].pos,
                    message: format!(
                        "{name}'s k (standard deviations) must be a constant, such as 2"
                    ),
                });
            };
            series(if name == "bb_upper" {
                Expr::BbUpper(x, n, k)
            } else {
                Expr::BbLower(x, n, k)
            })
        }
        "cross_above" | "cross_below" => {
            want(2, &format!("{name}(a, b)"))?;
            let a = numeric(name, &args[0], "first argument")?;
            let b = numeric(name, &args[1], "second argument")?;
            Node {
                expr: if name == "cross_above" {
                    Expr::CrossAbove(a, b)
                } else {
                    Expr::CrossBelow(a, b)
                },
                kind: Kind::Condition,
                pos,
                constant: None,
            }
        }
        other => {
            return Err(ExprError {
                position: pos,
                message: format!("unknown function '{other}': the functions are {FUNCTIONS}"),
            });
        }
    })
}

/// Parses and type checks an expression that must be a condition (a signal).
///
/// # Errors
/// Where the expression is wrong and what was expected there.
pub fn parse_condition(text: &str) -> Result<Expr, ExprError> {
    let node = parse_any(text)?;
    if node.1 != Kind::Condition {
        return Err(ExprError {
            position: 1,
            message: format!(
                "a signal must be a condition (true or false on each bar), but this is {}: compare it, for example close > sma(close, 20)",
                node.1.name()
            ),
        });
    }
    Ok(node.0)
}

/// Parses and type checks an expression that must be a series (a factor).
///
/// # Errors
/// Where the expression is wrong and what was expected there.
pub fn parse_series(text: &str) -> Result<Expr, ExprError> {
    let (expr, kind) = parse_any(text)?;
    if kind == Kind::Condition {
        return Err(ExprError {
            position: 1,
            message: "a factor must be a series (a number on each bar), not a condition: for example ret(close, 20)".to_owned(),
        });
    }
    Ok(expr)
}

fn parse_any(text: &str) -> Result<(Expr, Kind), ExprError> {
    if text.trim().is_empty() {
        return Err(ExprError {
            position: 1,
            message: "the expression is empty".to_owned(),
        });
    }
    let length = text.chars().count();
    if length > MAX_LENGTH {
        return Err(ExprError {
            position: MAX_LENGTH + 1,
            message: format!(
                "the expression is {length} characters long; at most {MAX_LENGTH} are read"
            ),
        });
    }
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        depth: 0,
    };
    let node = p.or()?;
    if !matches!(p.peek(), Tok::End) {
        return Err(ExprError {
            position: p.pos(),
            message: format!(
                "expected an operator or the end, found {}",
                describe(p.peek())
            ),
        });
    }
    Ok((node.expr, node.kind))
}

/// The bar columns an expression reads.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    pub open: &'a [f64],
    pub high: &'a [f64],
    pub low: &'a [f64],
    pub close: &'a [f64],
    pub volume: &'a [f64],
}

impl Columns<'_> {
    fn len(&self) -> usize {
        self.close.len()
    }
}

/// A condition's value per bar: 1 true, 0 false, 2 unknown (warm-up).
pub const TRUE: u8 = 1;
pub const FALSE: u8 = 0;
pub const UNKNOWN: u8 = 2;

fn bool_of(b: bool) -> u8 {
    if b { TRUE } else { FALSE }
}

/// What both crosses of a pair of series read, per bar: bit 2 set when both values are
/// finite, bit 1 when `a > b`, bit 0 when `a < b`. One branch-free pass over the floats,
/// shared by `cross_above(a, b)` and `cross_below(a, b)`.
fn cross_codes(a: &[f64], b: &[f64]) -> Vec<u8> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            (u8::from(x.is_finite() & y.is_finite()) << 2)
                | (u8::from(x > y) << 1)
                | u8::from(x < y)
        })
        .collect()
}

/// `cross_above(a, b)` (or below) on every bar from the pair's [`cross_codes`]:
/// [`UNKNOWN`] on the first bar and where a value of either bar is missing. With both
/// bars known, `a` was at or below `b` exactly when it was not above it, so each bar reads
/// one bit of itself and of the bar before; the pass is over bytes and vectorizes wide.
fn cross<const ABOVE: bool>(codes: &[u8]) -> Vec<u8> {
    let n = codes.len();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    out.push(UNKNOWN);
    let bit = if ABOVE { 1 } else { 0 };
    out.extend(codes[1..].iter().zip(&codes[..n - 1]).map(|(&now, &was)| {
        let known = (now & was) >> 2;
        let hit = ((now & !was) >> bit) & 1;
        // TRUE (1) or FALSE (0) when known, else UNKNOWN (2).
        hit * known + (1 - known) * UNKNOWN
    }));
    out
}

/// A series: a bar column read in place, or a computed one shared by every use.
#[derive(Debug, Clone)]
pub enum Val<'a> {
    Column(&'a [f64]),
    Computed(Rc<Vec<f64>>),
}

impl std::ops::Deref for Val<'_> {
    type Target = [f64];

    fn deref(&self) -> &[f64] {
        match self {
            Val::Column(c) => c,
            Val::Computed(v) => v,
        }
    }
}

/// Evaluates expressions over one set of bars, computing each distinct sub-expression
/// once (an entry and an exit that both read `sma(close, 10)` share it).
#[derive(Debug)]
pub struct Evaluator<'a> {
    cols: Columns<'a>,
    memo: HashMap<String, Rc<Vec<f64>>>,
    /// The [`cross_codes`] of each pair crossed, by the pair.
    crossings: HashMap<String, Rc<Vec<u8>>>,
}

impl<'a> Evaluator<'a> {
    pub fn new(cols: Columns<'a>) -> Self {
        Self {
            cols,
            memo: HashMap::new(),
            crossings: HashMap::new(),
        }
    }

    /// A numeric expression's value on every bar.
    pub fn series(&mut self, expr: &Expr) -> Val<'a> {
        match expr {
            Expr::Series(Field::Open) => return Val::Column(self.cols.open),
            Expr::Series(Field::High) => return Val::Column(self.cols.high),
            Expr::Series(Field::Low) => return Val::Column(self.cols.low),
            Expr::Series(Field::Close) => return Val::Column(self.cols.close),
            Expr::Series(Field::Volume) => return Val::Column(self.cols.volume),
            _ => {}
        }
        let key = format!("{expr:?}");
        if let Some(v) = self.memo.get(&key) {
            return Val::Computed(Rc::clone(v));
        }
        let value = Rc::new(self.compute(expr));
        self.memo.insert(key, Rc::clone(&value));
        Val::Computed(value)
    }

    fn compute(&mut self, expr: &Expr) -> Vec<f64> {
        let n = self.cols.len();
        let cols = self.cols;
        match expr {
            Expr::Number(v) => vec![*v; n],
            Expr::Neg(x) => self.series(x).iter().map(|v| -v).collect(),
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.series(a), self.series(b));
                a.iter()
                    .zip(b.iter())
                    .map(|(x, y)| match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        _ => {
                            if *y == 0.0 {
                                f64::NAN
                            } else {
                                x / y
                            }
                        }
                    })
                    .collect()
            }
            Expr::Sma(x, p) => indicators::sma(&self.series(x), *p),
            Expr::Ema(x, p) => indicators::ema(&self.series(x), *p),
            Expr::Rsi(x, p) => indicators::rsi(&self.series(x), *p),
            Expr::Atr(p) => indicators::atr(cols.high, cols.low, cols.close, *p),
            Expr::BbUpper(x, p, k) => indicators::bollinger(&self.series(x), *p, *k),
            Expr::BbLower(x, p, k) => indicators::bollinger(&self.series(x), *p, -*k),
            Expr::Highest(x, p) => indicators::highest(&self.series(x), *p),
            Expr::Lowest(x, p) => indicators::lowest(&self.series(x), *p),
            Expr::Ret(x, p) => indicators::ret(&self.series(x), *p),
            Expr::Shift(x, p) => indicators::shift(&self.series(x), *p),
            // Columns are answered in `series`; conditions are not numbers (the checker
            // never asks).
            Expr::Series(_) | Expr::Not(_) | Expr::CrossAbove(..) | Expr::CrossBelow(..) => {
                vec![f64::NAN; n]
            }
        }
    }

    /// The [`cross_codes`] of a pair, computed once for both of its crosses.
    fn cross_codes(&mut self, a: &Expr, b: &Expr) -> Rc<Vec<u8>> {
        let key = format!("{a:?} {b:?}");
        if let Some(codes) = self.crossings.get(&key) {
            return Rc::clone(codes);
        }
        let (va, vb) = (self.series(a), self.series(b));
        let codes = Rc::new(cross_codes(&va, &vb));
        self.crossings.insert(key, Rc::clone(&codes));
        codes
    }

    /// A condition on every bar: [`TRUE`], [`FALSE`] or [`UNKNOWN`].
    pub fn condition(&mut self, expr: &Expr) -> Vec<u8> {
        let n = self.cols.len();
        match expr {
            Expr::Not(x) => self
                .condition(x)
                .into_iter()
                .map(|v| match v {
                    TRUE => FALSE,
                    FALSE => TRUE,
                    _ => UNKNOWN,
                })
                .collect(),
            // A bar where either side is unknown (an indicator still warming up) is
            // unknown: no indicator without a value can take part in a signal, whatever
            // the other side says (so `not` can never turn a warm-up into a signal).
            Expr::Binary(BinOp::And, a, b) => {
                let (a, b) = (self.condition(a), self.condition(b));
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        if x == UNKNOWN || y == UNKNOWN {
                            UNKNOWN
                        } else {
                            x & y
                        }
                    })
                    .collect()
            }
            Expr::Binary(BinOp::Or, a, b) => {
                let (a, b) = (self.condition(a), self.condition(b));
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        if x == UNKNOWN || y == UNKNOWN {
                            UNKNOWN
                        } else {
                            x | y
                        }
                    })
                    .collect()
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.series(a), self.series(b));
                a.iter()
                    .zip(b.iter())
                    .map(|(x, y)| {
                        if !x.is_finite() || !y.is_finite() {
                            return UNKNOWN;
                        }
                        bool_of(match op {
                            BinOp::Lt => x < y,
                            BinOp::Le => x <= y,
                            BinOp::Gt => x > y,
                            BinOp::Ge => x >= y,
                            BinOp::Eq => x == y,
                            _ => x != y,
                        })
                    })
                    .collect()
            }
            Expr::CrossAbove(a, b) | Expr::CrossBelow(a, b) => {
                let codes = self.cross_codes(a, b);
                if matches!(expr, Expr::CrossAbove(..)) {
                    cross::<true>(&codes)
                } else {
                    cross::<false>(&codes)
                }
            }
            _ => vec![UNKNOWN; n],
        }
    }
}

/// Evaluates a numeric expression over every bar.
pub fn eval_series(expr: &Expr, cols: &Columns<'_>) -> Vec<f64> {
    Evaluator::new(*cols).series(expr).to_vec()
}

/// Evaluates a condition over every bar: [`TRUE`], [`FALSE`] or [`UNKNOWN`].
pub fn eval_condition(expr: &Expr, cols: &Columns<'_>) -> Vec<u8> {
    Evaluator::new(*cols).condition(expr)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn err(text: &str) -> ExprError {
        parse_condition(text).unwrap_err()
    }

    #[test]
    fn expressions_too_long_or_too_deep_are_refused_before_they_can_exhaust_the_stack() {
        let deep = format!("{}close{} > 1", "(".repeat(20_000), ")".repeat(20_000));
        let e = parse_condition(&deep).unwrap_err();
        assert!(e.message.contains("2000"), "{e}");
        let deep = format!("{}close{} > 1", "(".repeat(100), ")".repeat(100));
        let e = parse_condition(&deep).unwrap_err();
        assert!(e.message.contains("deeper than 64"), "{e}");
        assert!(parse_condition(&format!("{}close > 1", "not ".repeat(100))).is_err());
        assert!(parse_series(&format!("{}close", "-".repeat(100))).is_err());
        // 60 levels are fine.
        let fine = format!("{}close{} > 1", "(".repeat(60), ")".repeat(60));
        assert!(parse_condition(&fine).is_ok());
        // A long chain of operators nests as deep as it is long.
        let chain = format!("open{} > 1", " + 1".repeat(300));
        let e = parse_condition(&chain).unwrap_err();
        assert!(e.message.contains("deeper than 64"), "{e}");
        let chain = format!("close > 1{}", " and close > 1".repeat(100));
        assert!(parse_condition(&chain).is_err());
        let fine = format!("open{} > 1", " + 1".repeat(40));
        assert!(parse_condition(&fine).is_ok());
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let e = err("close > sma(close 20)");
        assert_eq!(e.position, 19, "{e}");
        assert!(e.message.contains("',' or ')'"), "{e}");
        let e = err("clsoe > 1");
        assert_eq!(e.position, 1);
        assert!(e.message.contains("unknown name 'clsoe'"), "{e}");
        let e = err("sma(close, 20)");
        assert!(e.message.contains("must be a condition"), "{e}");
        let e = err("close > sma(close, 2.5)");
        assert!(e.message.contains("whole number"), "{e}");
        let e = err("close > sma(close, volume)");
        assert!(e.message.contains("constant"), "{e}");
        let e = err("close = 3");
        assert!(e.message.contains("'=='"), "{e}");
        let e = err("(close > 1");
        assert!(e.message.contains("')'"), "{e}");
        let e = err("close > 1 and volume");
        assert!(e.message.contains("joins conditions"), "{e}");
        let e = err("1 < close < 3");
        assert!(e.message.contains("do not chain"), "{e}");
        let e = err("close > sma");
        assert!(e.message.contains("is a function"), "{e}");
        assert!(parse_condition("cross_above(ema(close, 12), ema(close, 26)) and rsi(close, 14) < 70 or not (close > bb_upper(close, 20, 2))").is_ok());
        assert!(parse_series("ret(close, 20) / atr(14)").is_ok());
        assert!(parse_series("close > 1").is_err());
    }

    #[test]
    fn conditions_are_unknown_wherever_a_value_is_missing_so_warm_up_never_signals() {
        let close = [1.0, 2.0, 3.0, 2.0, 1.0];
        let nan = [f64::NAN; 5];
        let cols = Columns {
            open: &close,
            high: &close,
            low: &close,
            close: &close,
            volume: &nan,
        };
        let c = eval_condition(&parse_condition("close > sma(close, 2)").unwrap(), &cols);
        assert_eq!(c, vec![UNKNOWN, TRUE, TRUE, FALSE, FALSE]);
        // Either side unknown: unknown, even where the other side alone would decide.
        let c = eval_condition(&parse_condition("volume > 0 or close > 2").unwrap(), &cols);
        assert_eq!(c, vec![UNKNOWN; 5]);
        let c = eval_condition(&parse_condition("volume > 0 and close > 2").unwrap(), &cols);
        assert_eq!(c, vec![UNKNOWN; 5]);
        let c = eval_condition(
            &parse_condition("close > 2.5 or close > sma(close, 3)").unwrap(),
            &cols,
        );
        assert_eq!(c, vec![UNKNOWN, UNKNOWN, TRUE, FALSE, FALSE]);
        // `not` of a warm-up bar stays unknown: it cannot signal.
        let c = eval_condition(
            &parse_condition("not (close < 0 and close > sma(close, 3))").unwrap(),
            &cols,
        );
        assert_eq!(c, vec![UNKNOWN, UNKNOWN, TRUE, TRUE, TRUE]);
        assert!(
            parse_condition("atr(3) > 1 and sma(volume, 2) > 0")
                .unwrap()
                .reads(Field::Volume)
        );
        assert!(parse_condition("atr(3) > 1").unwrap().reads(Field::High));
        assert!(!parse_condition("atr(3) > 1").unwrap().reads(Field::Volume));
        let c = eval_condition(&parse_condition("cross_below(close, 2.5)").unwrap(), &cols);
        assert_eq!(c, vec![UNKNOWN, FALSE, FALSE, TRUE, FALSE]);
        let c = eval_condition(&parse_condition("-close < -2").unwrap(), &cols);
        assert_eq!(c, vec![FALSE, FALSE, TRUE, FALSE, FALSE]);
    }
}
