//! Symbolic dimension expressions: how plugins and layers state output shapes of inputs
//! whose dimensions are only known at run time (TensorRT's `IExprBuilder`).
//!
//! Expressions fold as they are built: combining two constants gives a constant, so with
//! fully known inputs every output dimension is a plain number.

use std::fmt;
use std::ops::{Add, Mul, Sub};
use std::sync::Arc;

/// A binary operation on dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DimOp {
    /// `a + b`
    Add = 0,
    /// `a - b`
    Sub = 1,
    /// `a * b`
    Mul = 2,
    /// `floor(a / b)`
    FloorDiv = 3,
    /// `ceil(a / b)`
    CeilDiv = 4,
    /// `min(a, b)`
    Min = 5,
    /// `max(a, b)`
    Max = 6,
}

impl DimOp {
    /// Every operation, in discriminant order.
    pub const ALL: [DimOp; 7] = [
        DimOp::Add,
        DimOp::Sub,
        DimOp::Mul,
        DimOp::FloorDiv,
        DimOp::CeilDiv,
        DimOp::Min,
        DimOp::Max,
    ];

    /// Converts a C ABI discriminant back into an operation.
    pub fn from_raw(raw: i32) -> Option<DimOp> {
        DimOp::ALL.get(usize::try_from(raw).ok()?).copied()
    }

    /// Applies the operation to two known values; `None` on division by zero or overflow.
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            DimOp::Add => a.checked_add(b),
            DimOp::Sub => a.checked_sub(b),
            DimOp::Mul => a.checked_mul(b),
            DimOp::FloorDiv => (b != 0).then(|| a.div_euclid(b)),
            DimOp::CeilDiv => (b != 0).then(|| {
                let q = a.div_euclid(b);
                if a.rem_euclid(b) != 0 { q + 1 } else { q }
            }),
            DimOp::Min => Some(a.min(b)),
            DimOp::Max => Some(a.max(b)),
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            DimOp::Add => "+",
            DimOp::Sub => "-",
            DimOp::Mul => "*",
            DimOp::FloorDiv => "/",
            DimOp::CeilDiv => "/^",
            DimOp::Min => "min",
            DimOp::Max => "max",
        }
    }
}

/// One dimension: a constant, a named run-time dimension, or an operation on two others.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DimExpr {
    /// A known value.
    Const(i64),
    /// A dimension named by the network (e.g. `batch`), bound when the engine runs.
    Sym(Arc<str>),
    /// An operation on two expressions.
    Op(DimOp, Arc<DimExpr>, Arc<DimExpr>),
}

/// Why an expression could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimError {
    /// A symbol had no binding.
    #[error("dimension `{0}` is not bound")]
    Unbound(String),
    /// Division by zero or overflow.
    #[error("dimension expression {0} divides by zero or overflows")]
    Arithmetic(String),
}

/// The name of a dimension that cannot be known before the values it depends on are (an
/// output sized by a shape input whose values are computed at run time). Hosts rename it
/// to a symbol unique to the layer, output and axis; at run time every value is known.
pub const UNKNOWN_DIM: &str = "?";

impl DimExpr {
    /// A dimension known only at run time (see [`UNKNOWN_DIM`]).
    pub fn unknown() -> DimExpr {
        DimExpr::Sym(Arc::from(UNKNOWN_DIM))
    }

    /// A named run-time dimension.
    pub fn sym(name: &str) -> DimExpr {
        DimExpr::Sym(Arc::from(name))
    }

    /// Builds `op(a, b)`, folding constants and the identities `x+0`, `x-0`, `x*1`, `x/1`,
    /// and gathering constant factors: `(x·c)·d` is `x·(c·d)`, `c·x` is `x·c`, and
    /// `(x·c) / d` is `x·(c/d)` where `d` divides `c` (the division is then exact).
    pub fn op(op: DimOp, a: DimExpr, b: DimExpr) -> DimExpr {
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const())
            && let Some(v) = op.apply(x, y)
        {
            return DimExpr::Const(v);
        }
        if let Some(folded) = DimExpr::factors(op, &a, &b) {
            return folded;
        }
        match (op, a.as_const(), b.as_const()) {
            (DimOp::Add, Some(0), _) | (DimOp::Mul, Some(1), _) => return b,
            (DimOp::Add | DimOp::Sub, _, Some(0))
            | (DimOp::Mul | DimOp::FloorDiv | DimOp::CeilDiv, _, Some(1)) => return a,
            (DimOp::Mul, Some(0), _) | (DimOp::Mul, _, Some(0)) => return DimExpr::Const(0),
            _ => {}
        }
        if matches!(op, DimOp::Min | DimOp::Max) && a == b {
            return a;
        }
        if let Some(kept) = DimExpr::absorbed(op, &a, &b) {
            return kept;
        }
        DimExpr::Op(op, Arc::new(a), Arc::new(b))
    }

    /// `max(a, min(a, x))` and `min(a, max(a, x))` (either order) are `a`.
    fn absorbed(op: DimOp, a: &DimExpr, b: &DimExpr) -> Option<DimExpr> {
        let inner = match op {
            DimOp::Max => DimOp::Min,
            DimOp::Min => DimOp::Max,
            _ => return None,
        };
        let holds = |e: &DimExpr, x: &DimExpr| matches!(e, DimExpr::Op(o, p, q) if *o == inner && (**p == *x || **q == *x));
        if holds(b, a) {
            Some(a.clone())
        } else if holds(a, b) {
            Some(b.clone())
        } else {
            None
        }
    }

    /// `op(a, b)` with the constant factors of a product gathered, when that applies.
    fn factors(op: DimOp, a: &DimExpr, b: &DimExpr) -> Option<DimExpr> {
        let scaled = |e: &DimExpr| match e {
            DimExpr::Op(DimOp::Mul, x, c) => c.as_const().map(|c| ((**x).clone(), c)),
            _ => None,
        };
        match (op, a.as_const(), b.as_const()) {
            (DimOp::Mul, Some(c), None) if c > 1 => {
                Some(DimExpr::op(DimOp::Mul, b.clone(), a.clone()))
            }
            (DimOp::Mul, None, Some(d)) => {
                let (x, c) = scaled(a)?;
                Some(DimExpr::op(
                    DimOp::Mul,
                    x,
                    DimExpr::Const(c.checked_mul(d)?),
                ))
            }
            (DimOp::FloorDiv | DimOp::CeilDiv, None, Some(d)) if d > 0 => {
                let (x, c) = scaled(a)?;
                (c % d == 0).then(|| DimExpr::op(DimOp::Mul, x, DimExpr::Const(c / d)))
            }
            _ => None,
        }
    }

    /// The value, when it is known without bindings.
    pub fn as_const(&self) -> Option<i64> {
        match self {
            DimExpr::Const(v) => Some(*v),
            _ => None,
        }
    }

    /// `floor(self / rhs)`.
    pub fn floor_div(self, rhs: impl Into<DimExpr>) -> DimExpr {
        DimExpr::op(DimOp::FloorDiv, self, rhs.into())
    }

    /// `ceil(self / rhs)`.
    pub fn ceil_div(self, rhs: impl Into<DimExpr>) -> DimExpr {
        DimExpr::op(DimOp::CeilDiv, self, rhs.into())
    }

    /// `min(self, rhs)`.
    pub fn min(self, rhs: impl Into<DimExpr>) -> DimExpr {
        DimExpr::op(DimOp::Min, self, rhs.into())
    }

    /// `max(self, rhs)`.
    pub fn max(self, rhs: impl Into<DimExpr>) -> DimExpr {
        DimExpr::op(DimOp::Max, self, rhs.into())
    }

    /// Whether the expression, counted as a tree, has more than `nodes` nodes (counting
    /// stops there, so a deep expression costs at most `nodes` steps).
    pub fn exceeds(&self, nodes: usize) -> bool {
        fn over(e: &DimExpr, left: &mut usize) -> bool {
            if *left == 0 {
                return true;
            }
            *left -= 1;
            match e {
                DimExpr::Op(_, a, b) => over(a, left) || over(b, left),
                _ => false,
            }
        }
        over(self, &mut { nodes })
    }

    /// Evaluates with `bind` giving the value of each symbol.
    pub fn eval(&self, bind: &dyn Fn(&str) -> Option<i64>) -> Result<i64, DimError> {
        match self {
            DimExpr::Const(v) => Ok(*v),
            DimExpr::Sym(s) => bind(s).ok_or_else(|| DimError::Unbound(s.to_string())),
            DimExpr::Op(op, a, b) => op
                .apply(a.eval(bind)?, b.eval(bind)?)
                .ok_or_else(|| DimError::Arithmetic(self.to_string())),
        }
    }

    /// Replaces symbols by the expressions `bind` gives (others stay), folding as it goes.
    pub fn substitute(&self, bind: &dyn Fn(&str) -> Option<DimExpr>) -> DimExpr {
        match self {
            DimExpr::Const(_) => self.clone(),
            DimExpr::Sym(s) => bind(s).unwrap_or_else(|| self.clone()),
            DimExpr::Op(op, a, b) => DimExpr::op(*op, a.substitute(bind), b.substitute(bind)),
        }
    }

    /// Names of the symbols this expression uses, in first-seen order.
    pub fn symbols(&self) -> Vec<Arc<str>> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols(&self, out: &mut Vec<Arc<str>>) {
        match self {
            DimExpr::Const(_) => {}
            DimExpr::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            DimExpr::Op(_, a, b) => {
                a.collect_symbols(out);
                b.collect_symbols(out);
            }
        }
    }
}

impl From<i64> for DimExpr {
    fn from(v: i64) -> DimExpr {
        DimExpr::Const(v)
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimExpr::Const(v) => write!(f, "{v}"),
            DimExpr::Sym(s) => f.write_str(s),
            DimExpr::Op(op @ (DimOp::Min | DimOp::Max), a, b) => {
                write!(f, "{}({a},{b})", op.symbol())
            }
            DimExpr::Op(op, a, b) => write!(f, "({a}{}{b})", op.symbol()),
        }
    }
}

macro_rules! arith {
    ($tr:ident, $method:ident, $op:ident) => {
        impl<T: Into<DimExpr>> $tr<T> for DimExpr {
            type Output = DimExpr;
            fn $method(self, rhs: T) -> DimExpr {
                DimExpr::op(DimOp::$op, self, rhs.into())
            }
        }
        impl<T: Into<DimExpr>> $tr<T> for &DimExpr {
            type Output = DimExpr;
            fn $method(self, rhs: T) -> DimExpr {
                DimExpr::op(DimOp::$op, self.clone(), rhs.into())
            }
        }
    };
}
arith!(Add, add, Add);
arith!(Sub, sub, Sub);
arith!(Mul, mul, Mul);

/// A shape whose dimensions are expressions.
pub type ShapeExpr = Vec<DimExpr>;

/// A shape of known values, as expressions.
pub fn const_shape(dims: &[i64]) -> ShapeExpr {
    dims.iter().map(|&d| DimExpr::Const(d)).collect()
}

/// A shape of known sizes (a tensor's dims), as expressions.
pub fn shape_of_sizes(dims: &[usize]) -> ShapeExpr {
    dims.iter().map(|&d| DimExpr::Const(d as i64)).collect()
}

/// The known values of a shape, or `None` when any dimension is symbolic.
pub fn shape_values(shape: &[DimExpr]) -> Option<Vec<i64>> {
    shape.iter().map(DimExpr::as_const).collect()
}

/// Formats a symbolic shape as `[batch,3,(h*2)]`.
pub fn format_shape(shape: &[DimExpr]) -> String {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_constants_and_identities() {
        let n = DimExpr::sym("n");
        assert_eq!(DimExpr::from(6) * 7, DimExpr::Const(42));
        assert_eq!(n.clone() + 0, n);
        assert_eq!(n.clone() * 1, n);
        assert_eq!(n.clone().floor_div(1), n);
        assert_eq!(
            DimExpr::op(DimOp::Mul, n.clone(), 0.into()),
            DimExpr::Const(0)
        );
        assert_eq!(DimExpr::from(7).ceil_div(2), DimExpr::Const(4));
        assert_eq!(DimExpr::from(-7).floor_div(2), DimExpr::Const(-4));
    }

    #[test]
    fn a_bound_absorbs_its_own_argument() {
        let (n, m) = (DimExpr::sym("n"), DimExpr::sym("m"));
        let capped = n.clone().min(512);
        assert_eq!(n.clone().max(capped.clone()), n);
        assert_eq!(capped.clone().max(n.clone()), n);
        assert_eq!(n.clone().min(n.clone().max(m.clone())), n);
        assert_eq!(
            m.clone().max(capped.clone()).to_string(),
            "max(m,min(n,512))"
        );
        for v in [1, 511, 512, 513, 4096] {
            let bind = |_: &str| Some(v);
            assert_eq!(
                DimExpr::Op(DimOp::Max, n.clone().into(), capped.clone().into()).eval(&bind),
                Ok(v)
            );
        }
    }

    #[test]
    fn gathers_constant_factors() {
        let n = DimExpr::sym("n");
        assert_eq!((n.clone() * 64 * 4 * 4).floor_div(1024), n);
        assert_eq!((n.clone() * 17 * 64).ceil_div(1088), n);
        assert_eq!(DimExpr::from(4) * n.clone(), n.clone() * 4);
        assert_eq!(
            (DimExpr::from(3) * n.clone() * 4).floor_div(6),
            n.clone() * 2
        );
        let uneven = (n.clone() * 6).floor_div(4);
        assert_eq!(uneven.to_string(), "((n*6)/4)");
        for v in [-7, 0, 1, 5, 13] {
            let bind = |_: &str| Some(v);
            assert_eq!(uneven.eval(&bind), Ok((v * 6).div_euclid(4)));
            let kept = (n.clone() * 10).ceil_div(5) * 3;
            assert_eq!(kept.eval(&bind), Ok(v * 6), "{kept}");
        }
    }

    #[test]
    fn counts_nodes_up_to_a_bound() {
        let n = DimExpr::sym("n");
        assert!(!n.exceeds(1));
        assert!((n.clone() + 1).exceeds(2));
        assert!(!(n.clone() + 1).exceeds(3));
        let mut doubling = n.clone();
        for i in 0..64 {
            doubling = doubling
                .clone()
                .max(doubling + DimExpr::sym(&format!("s{i}")));
        }
        assert!(doubling.exceeds(1000));
    }

    #[test]
    fn evaluates_with_bindings() {
        let e = (DimExpr::sym("h") * 2 - 1)
            .ceil_div(3)
            .max(DimExpr::sym("w"));
        let v = e.eval(&|s| match s {
            "h" => Some(10),
            "w" => Some(4),
            _ => None,
        });
        assert_eq!(v, Ok(7));
        assert_eq!(e.eval(&|_| None), Err(DimError::Unbound("h".to_string())));
        let z = DimExpr::sym("h").floor_div(DimExpr::sym("w"));
        assert!(matches!(z.eval(&|_| Some(0)), Err(DimError::Arithmetic(_))));
        assert_eq!(e.symbols().len(), 2);
        assert_eq!(e.to_string(), "max((((h*2)-1)/^3),w)");
    }
}
