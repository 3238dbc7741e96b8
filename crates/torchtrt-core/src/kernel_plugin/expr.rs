//! The expression language of kernel-plugin specs: output dimensions, launch grids and
//! kernel arguments written as text (`x.shape[0]`, `cdiv(numel(y), 256)`, `n * 2`), parsed
//! once against the spec's ports and fields and evaluated either symbolically (output shapes
//! at build time, as [`DimExpr`]) or on concrete shapes (each launch).
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/') unary)*
//! unary   := '-' unary | primary
//! primary := INT | '(' expr ')' | NAME '.shape' '[' INDEX ']' | NAME '.value' '[' INDEX ']'
//!          | FUNC '(' expr ',' expr ')' | 'numel' '(' NAME ')' | NAME
//! ```
//!
//! `/` divides rounding down; `cdiv`, `min` and `max` take two arguments; `INDEX` is an
//! integer, negative counting from the end. A bare name is an integer field of the spec, or
//! `threads` (the CPU launch's thread count).

use torchtrt_plugin_api::{DimExpr, DimOp};

/// Longest expression text accepted, in bytes.
const MAX_LEN: usize = 1024;
/// Deepest nesting accepted.
const MAX_DEPTH: usize = 32;

/// A parsed expression; names are resolved to ports and fields.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    /// An integer.
    Int(i64),
    /// Integer field `index` of the spec (its first element).
    Field(usize),
    /// Dimension `axis` (negative from the end) of input or output `port`.
    Dim { port: usize, axis: i64 },
    /// Element `index` (negative from the end) of the values of shape input `port`.
    Value { port: usize, index: i64 },
    /// Elements of input or output `port`.
    Numel(usize),
    /// The CPU launch's thread count.
    Threads,
    /// An operation on two expressions.
    Op(DimOp, Box<Expr>, Box<Expr>),
}

/// What names an expression may use.
pub(crate) struct Names<'a> {
    /// Ports: inputs, then outputs.
    pub ports: &'a [String],
    /// Ports whose `.value[i]` may be read (shape inputs).
    pub shape_ports: &'a [usize],
    /// Integer fields, by index.
    pub int_fields: &'a [(usize, &'a str)],
    /// Whether `threads` is allowed.
    pub threads: bool,
}

/// What an expression is evaluated against: values for its leaves.
pub(crate) trait Domain {
    /// The value type (`DimExpr` or `i64`).
    type V;
    /// An integer.
    fn int(&self, v: i64) -> Self::V;
    /// Field `index`.
    fn field(&self, index: usize) -> Result<Self::V, String>;
    /// Dimension `axis` of `port`.
    fn dim(&self, port: usize, axis: i64) -> Result<Self::V, String>;
    /// Value `index` of shape input `port`.
    fn value(&self, port: usize, index: i64) -> Result<Self::V, String>;
    /// Elements of `port`.
    fn numel(&self, port: usize) -> Result<Self::V, String>;
    /// The thread count.
    fn threads(&self) -> Result<Self::V, String>;
    /// `op(a, b)`.
    fn op(&self, op: DimOp, a: Self::V, b: Self::V) -> Result<Self::V, String>;
}

impl Expr {
    /// Evaluates against `domain`.
    pub(crate) fn eval<D: Domain>(&self, domain: &D) -> Result<D::V, String> {
        match self {
            Expr::Int(v) => Ok(domain.int(*v)),
            Expr::Field(i) => domain.field(*i),
            Expr::Dim { port, axis } => domain.dim(*port, *axis),
            Expr::Value { port, index } => domain.value(*port, *index),
            Expr::Numel(port) => domain.numel(*port),
            Expr::Threads => domain.threads(),
            Expr::Op(op, a, b) => {
                let (a, b) = (a.eval(domain)?, b.eval(domain)?);
                domain.op(*op, a, b)
            }
        }
    }
}

/// Resolves a possibly negative `index` into `len` items.
pub(crate) fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if index < 0 { index + len } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// Parses `text` against `names`; the error says what is wrong and where.
pub(crate) fn parse(text: &str, names: &Names<'_>) -> Result<Expr, String> {
    if text.len() > MAX_LEN {
        return Err(format!(
            "expression of {} bytes (at most {MAX_LEN})",
            text.len()
        ));
    }
    let run = || {
        let mut p = Parser {
            tokens: lex(text)?,
            at: 0,
            names,
            depth: 0,
        };
        let e = p.expr()?;
        match p.peek() {
            None => Ok(e),
            Some(t) => Err(format!("unexpected {} after the expression", t.show())),
        }
    };
    run().map_err(|m| format!("`{text}`: {m}"))
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Name(String),
    Sym(char),
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Int(v) => format!("`{v}`"),
            Tok::Name(n) => format!("`{n}`"),
            Tok::Sym(c) => format!("`{c}`"),
        }
    }
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let v = text[start..i]
                .parse::<i64>()
                .map_err(|_| format!("integer `{}` does not fit 64 bits", &text[start..i]))?;
            out.push(Tok::Int(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Name(text[start..i].to_string()));
        } else if "+-*/()[],.".contains(c) {
            out.push(Tok::Sym(c));
            i += 1;
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(format!("unexpected character `{ch}` at byte {i}"));
        }
    }
    if out.is_empty() {
        return Err("empty expression".into());
    }
    Ok(out)
}

struct Parser<'n, 'a> {
    tokens: Vec<Tok>,
    at: usize,
    names: &'n Names<'a>,
    depth: usize,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.next() {
            Some(Tok::Sym(s)) if s == c => Ok(()),
            Some(t) => Err(format!("expected `{c}`, found {}", t.show())),
            None => Err(format!("expected `{c}` at the end")),
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let mut e = self.term()?;
        loop {
            let op = if self.eat('+') {
                DimOp::Add
            } else if self.eat('-') {
                DimOp::Sub
            } else {
                break;
            };
            e = Expr::Op(op, Box::new(e), Box::new(self.term()?));
        }
        self.depth -= 1;
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat('*') {
                DimOp::Mul
            } else if self.eat('/') {
                DimOp::FloorDiv
            } else {
                break;
            };
            e = Expr::Op(op, Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat('-') {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(format!("nested deeper than {MAX_DEPTH}"));
            }
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(match inner {
                Expr::Int(v) => Expr::Int(v.checked_neg().ok_or("integer overflows")?),
                other => Expr::Op(DimOp::Sub, Box::new(Expr::Int(0)), Box::new(other)),
            });
        }
        self.primary()
    }

    fn index(&mut self) -> Result<i64, String> {
        self.expect('[')?;
        let negative = self.eat('-');
        let v = match self.next() {
            Some(Tok::Int(v)) => v,
            Some(t) => return Err(format!("an index must be an integer, found {}", t.show())),
            None => return Err("an index is missing".into()),
        };
        self.expect(']')?;
        Ok(if negative { -v } else { v })
    }

    fn port(&self, name: &str) -> Result<usize, String> {
        self.names
            .ports
            .iter()
            .position(|p| p == name)
            .ok_or_else(|| {
                format!(
                    "`{name}` is not an input or output (ports: {})",
                    self.names.ports.join(", ")
                )
            })
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Tok::Int(v)) => Ok(Expr::Int(v)),
            Some(Tok::Sym('(')) => {
                let e = self.expr()?;
                self.expect(')')?;
                Ok(e)
            }
            Some(Tok::Name(name)) => self.named(&name),
            Some(t) => Err(format!("unexpected {}", t.show())),
            None => Err("the expression ends early".into()),
        }
    }

    fn named(&mut self, name: &str) -> Result<Expr, String> {
        if self.eat('(') {
            return self.call(name);
        }
        if self.eat('.') {
            let port = self.port(name)?;
            return match self.next() {
                Some(Tok::Name(what)) if what == "shape" => Ok(Expr::Dim {
                    port,
                    axis: self.index()?,
                }),
                Some(Tok::Name(what)) if what == "value" => {
                    if !self.names.shape_ports.contains(&port) {
                        return Err(format!(
                            "`{name}.value`: `{name}` is not a shape input (declare it with \
                             `shape_input = true`)"
                        ));
                    }
                    Ok(Expr::Value {
                        port,
                        index: self.index()?,
                    })
                }
                _ => Err(format!("after `{name}.` expected `shape` or `value`")),
            };
        }
        if name == "threads" && self.names.threads {
            return Ok(Expr::Threads);
        }
        self.names
            .int_fields
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(i, _)| Expr::Field(*i))
            .ok_or_else(|| {
                let mut known: Vec<&str> = self.names.int_fields.iter().map(|(_, n)| *n).collect();
                if self.names.threads {
                    known.push("threads");
                }
                format!(
                    "`{name}` is not an integer field{} (known: {})",
                    if self.names.ports.iter().any(|p| p == name) {
                        "; a port's dimensions are `NAME.shape[i]`"
                    } else {
                        ""
                    },
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )
            })
    }

    fn call(&mut self, name: &str) -> Result<Expr, String> {
        if name == "numel" {
            let port = match self.next() {
                Some(Tok::Name(p)) => self.port(&p)?,
                _ => return Err("numel takes the name of an input or output".into()),
            };
            self.expect(')')?;
            return Ok(Expr::Numel(port));
        }
        let op = match name {
            "cdiv" => DimOp::CeilDiv,
            "min" => DimOp::Min,
            "max" => DimOp::Max,
            other => {
                return Err(format!(
                    "unknown function `{other}` (known: cdiv, min, max, numel)"
                ));
            }
        };
        let a = self.expr()?;
        self.expect(',')?;
        let b = self.expr()?;
        self.expect(')')?;
        Ok(Expr::Op(op, Box::new(a), Box::new(b)))
    }
}

/// Evaluates to symbolic dimensions: the output shapes at build time.
pub(crate) struct Symbolic<'a> {
    /// Port shapes (inputs; outputs are not known symbolically).
    pub shapes: &'a [DimExpr],
    /// Start of each input's dims in `shapes`, and its rank.
    pub spans: &'a [(usize, usize)],
    /// Known values of shape inputs, by port (`None`: not known yet).
    pub values: &'a [Option<Vec<i64>>],
    /// Integer fields' values, by field index.
    pub fields: &'a [Option<i64>],
}

impl Domain for Symbolic<'_> {
    type V = DimExpr;

    fn int(&self, v: i64) -> DimExpr {
        DimExpr::Const(v)
    }

    fn field(&self, index: usize) -> Result<DimExpr, String> {
        self.fields
            .get(index)
            .copied()
            .flatten()
            .map(DimExpr::Const)
            .ok_or_else(|| format!("field {index} has no integer value"))
    }

    fn dim(&self, port: usize, axis: i64) -> Result<DimExpr, String> {
        let &(start, rank) = self
            .spans
            .get(port)
            .ok_or_else(|| format!("port {port} has no shape here"))?;
        let a = resolve_index(axis, rank)
            .ok_or_else(|| format!("axis {axis} of a rank-{rank} port"))?;
        Ok(self.shapes[start + a].clone())
    }

    fn value(&self, port: usize, index: i64) -> Result<DimExpr, String> {
        match self.values.get(port).and_then(Option::as_ref) {
            None => Ok(DimExpr::unknown()),
            Some(v) => resolve_index(index, v.len())
                .map(|i| DimExpr::Const(v[i]))
                .ok_or_else(|| format!("value {index} of a shape input of {} values", v.len())),
        }
    }

    fn numel(&self, port: usize) -> Result<DimExpr, String> {
        let &(start, rank) = self
            .spans
            .get(port)
            .ok_or_else(|| format!("port {port} has no shape here"))?;
        Ok(self.shapes[start..start + rank]
            .iter()
            .fold(DimExpr::Const(1), |a, d| a * d.clone()))
    }

    fn threads(&self) -> Result<DimExpr, String> {
        Err("`threads` is known only at a CPU launch".into())
    }

    fn op(&self, op: DimOp, a: DimExpr, b: DimExpr) -> Result<DimExpr, String> {
        Ok(DimExpr::op(op, a, b))
    }
}

/// Evaluates to integers: a launch's grid, block and arguments.
pub(crate) struct Concrete<'a> {
    /// Every port's shape, inputs then outputs.
    pub shapes: &'a [&'a [i64]],
    /// Values of shape inputs, by port (`None` for other ports).
    pub values: &'a [Option<Vec<i64>>],
    /// Integer fields' values, by field index.
    pub fields: &'a [Option<i64>],
    /// The CPU launch's thread count.
    pub threads: Option<i64>,
}

impl Domain for Concrete<'_> {
    type V = i64;

    fn int(&self, v: i64) -> i64 {
        v
    }

    fn field(&self, index: usize) -> Result<i64, String> {
        self.fields
            .get(index)
            .copied()
            .flatten()
            .ok_or_else(|| format!("field {index} has no integer value"))
    }

    fn dim(&self, port: usize, axis: i64) -> Result<i64, String> {
        let shape = self
            .shapes
            .get(port)
            .ok_or_else(|| format!("port {port} is missing"))?;
        resolve_index(axis, shape.len())
            .map(|a| shape[a])
            .ok_or_else(|| format!("axis {axis} of a rank-{} port", shape.len()))
    }

    fn value(&self, port: usize, index: i64) -> Result<i64, String> {
        let v = self
            .values
            .get(port)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("the values of port {port} are not known"))?;
        resolve_index(index, v.len())
            .map(|i| v[i])
            .ok_or_else(|| format!("value {index} of a shape input of {} values", v.len()))
    }

    fn numel(&self, port: usize) -> Result<i64, String> {
        let shape = self
            .shapes
            .get(port)
            .ok_or_else(|| format!("port {port} is missing"))?;
        shape
            .iter()
            .try_fold(1i64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| "the element count overflows".into())
    }

    fn threads(&self) -> Result<i64, String> {
        self.threads
            .ok_or_else(|| "`threads` is known only at a CPU launch".into())
    }

    fn op(&self, op: DimOp, a: i64, b: i64) -> Result<i64, String> {
        op.apply(a, b)
            .ok_or_else(|| format!("{a} {op:?} {b} divides by zero or overflows"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Vec<String>, Vec<(usize, &'static str)>) {
        (
            vec!["x".into(), "sizes".into(), "y".into()],
            vec![(0, "n"), (2, "group")],
        )
    }

    fn parse_with(text: &str) -> Result<Expr, String> {
        let (ports, fields) = names();
        parse(
            text,
            &Names {
                ports: &ports,
                shape_ports: &[1],
                int_fields: &fields,
                threads: true,
            },
        )
    }

    fn concrete(e: &Expr) -> Result<i64, String> {
        let shapes: [&[i64]; 3] = [&[2, 3, 10], &[2], &[2, 3, 5]];
        e.eval(&Concrete {
            shapes: &shapes,
            values: &[None, Some(vec![7, 9]), None],
            fields: &[Some(4), None, Some(3)],
            threads: Some(2),
        })
    }

    #[test]
    fn precedence_negation_and_functions() {
        let cases = [
            ("1 + 2 * 3", 7),
            ("(1 + 2) * 3", 9),
            ("-7 / 2", -4),
            ("10 - 2 - 3", 5),
            ("cdiv(numel(x), 16)", 4),
            ("x.shape[-1] / 2", 5),
            ("max(x.shape[0], group) * n", 12),
            ("min(sizes.value[1], 8) + threads", 10),
            ("-x.shape[1]", -3),
            ("numel(y)", 30),
        ];
        for (text, want) in cases {
            let e = parse_with(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(concrete(&e), Ok(want), "{text}");
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let cases = [
            ("", "empty"),
            (
                "x",
                "`x` is not an integer field; a port's dimensions are `NAME.shape[i]`",
            ),
            ("z.shape[0]", "`z` is not an input or output"),
            ("x.value[0]", "not a shape input"),
            ("x.shape[n]", "an index must be an integer"),
            ("pow(2, 3)", "unknown function `pow`"),
            ("1 +", "ends early"),
            ("(1", "expected `)`"),
            ("1 2", "unexpected `2`"),
            ("2 % 3", "unexpected character `%`"),
            ("99999999999999999999", "does not fit"),
            ("numel(3)", "numel takes"),
        ];
        for (text, want) in cases {
            let e = parse_with(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert!(parse_with(&deep).unwrap_err().contains("nested deeper"));
        let negs = format!("{}1", "-".repeat(40));
        assert!(parse_with(&negs).unwrap_err().contains("nested deeper"));
        assert!(
            parse_with(&"1+".repeat(600))
                .unwrap_err()
                .contains("at most")
        );
    }

    #[test]
    fn evaluation_errors_are_values_not_panics() {
        for text in ["x.shape[3]", "1 / (n - 4)", "sizes.value[2]", "x.shape[-4]"] {
            let e = parse_with(text).unwrap();
            assert!(concrete(&e).is_err(), "{text}");
        }
    }

    #[test]
    fn symbolic_shapes_fold_known_dims_and_keep_symbols() {
        let e = parse_with("x.shape[0] * x.shape[2] / 2").unwrap();
        let shapes = [DimExpr::sym("b"), DimExpr::Const(3), DimExpr::Const(10)];
        let d = Symbolic {
            shapes: &shapes,
            spans: &[(0, 3)],
            values: &[None, None],
            fields: &[Some(4)],
        };
        let v = e.eval(&d).unwrap();
        assert_eq!(v.eval(&|s| (s == "b").then_some(6)), Ok(30));
        let unknown = parse_with("sizes.value[0]").unwrap().eval(&d).unwrap();
        assert_eq!(unknown, DimExpr::unknown());
    }
}
