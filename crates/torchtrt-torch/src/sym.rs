//! Symbolic sizes: the sympy expressions (`srepr` form, e.g.
//! `Add(FloorDiv(Symbol('s0', integer=True), Integer(2)), Integer(1))`) torch writes for
//! sizes and SymInts, parsed into dimension expressions over the program's symbols. Plain
//! names and integers (older programs) parse too.

use torchtrt_core::plugin_api::DimExpr;

/// Parses an expression; the error names what could not be read.
pub fn parse_expr(text: &str) -> Result<DimExpr, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let e = p.expr()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("`{text}`: unexpected text at byte {}", p.i));
    }
    e.into_dim()
        .ok_or_else(|| format!("`{text}` is not an integer expression"))
}

enum Term {
    Dim(DimExpr),
    Str(String),
    Flag,
}

impl Term {
    fn into_dim(self) -> Option<DimExpr> {
        match self {
            Term::Dim(d) => Some(d),
            _ => None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", c as char, self.i))
        }
    }

    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || matches!(self.s[self.i], b'_' | b'-'))
        {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn expr(&mut self) -> Result<Term, String> {
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != q {
                    self.i += 1;
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.eat(q)?;
                Ok(Term::Str(text))
            }
            None => Err("unexpected end".into()),
            _ => {
                let w = self.word();
                if w.is_empty() {
                    return Err(format!("unexpected character at byte {}", self.i));
                }
                if self.peek() == Some(b'=') {
                    self.i += 1;
                    self.expr()?;
                    return Ok(Term::Flag);
                }
                if self.peek() != Some(b'(') {
                    return Ok(match w.parse::<i64>() {
                        Ok(v) => Term::Dim(DimExpr::Const(v)),
                        Err(_) => Term::Dim(DimExpr::sym(&w)),
                    });
                }
                self.i += 1;
                let mut args = Vec::new();
                while self.peek() != Some(b')') {
                    args.push(self.expr()?);
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    }
                }
                self.eat(b')')?;
                apply(&w, args).map(Term::Dim)
            }
        }
    }
}

fn apply(f: &str, args: Vec<Term>) -> Result<DimExpr, String> {
    let mut strs = Vec::new();
    let mut dims = Vec::new();
    for a in args {
        match a {
            Term::Dim(d) => dims.push(d),
            Term::Str(s) => strs.push(s),
            Term::Flag => {}
        }
    }
    let two = |dims: &[DimExpr]| -> Result<(DimExpr, DimExpr), String> {
        match dims {
            [a, b] => Ok((a.clone(), b.clone())),
            _ => Err(format!("{f} takes two operands, got {}", dims.len())),
        }
    };
    let fold = |dims: Vec<DimExpr>, op: fn(DimExpr, DimExpr) -> DimExpr| {
        dims.into_iter()
            .reduce(op)
            .ok_or_else(|| format!("{f}() without operands"))
    };
    match f {
        "Symbol" => strs
            .first()
            .map(|s| DimExpr::sym(s))
            .ok_or_else(|| "Symbol without a name".into()),
        "Integer" => dims
            .into_iter()
            .next()
            .ok_or_else(|| "Integer without a value".into()),
        "Add" => fold(dims, |a, b| a + b),
        "Mul" => fold(dims, |a, b| a * b),
        "Max" => fold(dims, DimExpr::max),
        "Min" => fold(dims, DimExpr::min),
        "FloorDiv" => two(&dims).map(|(a, b)| a.floor_div(b)),
        "CeilDiv" | "CeilToInt" if dims.len() == 2 => two(&dims).map(|(a, b)| a.ceil_div(b)),
        "Mod" | "PythonMod" => two(&dims).map(|(a, b)| a.clone() - (a.floor_div(b.clone()) * b)),
        "Pow" => {
            let (base, exp) = two(&dims)?;
            match exp.as_const() {
                Some(k @ 0..=8) => Ok((0..k).fold(DimExpr::Const(1), |acc, _| acc * base.clone())),
                _ => Err(format!("Pow with exponent {exp} is not an integer size")),
            }
        }
        other => Err(format!(
            "the sympy function {other} is not supported in sizes"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, s0: i64) -> i64 {
        parse_expr(text)
            .unwrap()
            .eval(&|n| (n == "s0").then_some(s0))
            .unwrap()
    }

    #[test]
    fn sympy_srepr_forms() {
        let conv = "Add(FloorDiv(Add(Symbol('s0', positive=True, integer=True), Integer(-1)), Integer(2)), Integer(1))";
        assert_eq!(eval(conv, 17), 9);
        assert_eq!(eval(conv, 16), 8);
        assert_eq!(
            eval(
                "Mul(Integer(4), Pow(Symbol('s0', integer=True), Integer(2)))",
                3
            ),
            36
        );
        assert_eq!(eval("Symbol('s0')", 5), 5);
        assert_eq!(eval("Max(Integer(1), Symbol('s0'))", 0), 1);
        assert_eq!(eval("Mod(Symbol('s0'), Integer(3))", 7), 1);
        assert_eq!(eval("s0", 4), 4);
        assert_eq!(eval("12", 4), 12);
    }

    #[test]
    fn unsupported_forms_are_named() {
        let e = parse_expr("Sin(Symbol('s0'))").unwrap_err();
        assert!(e.contains("Sin"), "{e}");
        assert!(parse_expr("Add(Integer(1)").is_err());
        assert!(parse_expr("'text'").is_err());
    }
}
