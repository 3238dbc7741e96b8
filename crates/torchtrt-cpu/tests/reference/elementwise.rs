//! Binary operations with numpy broadcasting.

use torchtrt_core::layers::ElementwiseOp;

use super::Nd;

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let da = if i + a.len() >= rank {
                a[i + a.len() - rank]
            } else {
                1
            };
            let db = if i + b.len() >= rank {
                b[i + b.len() - rank]
            } else {
                1
            };
            da.max(db)
        })
        .collect()
}

/// The element of `x` that output `index` reads under broadcasting.
pub fn read_broadcast(x: &Nd, index: &[usize]) -> f64 {
    let lead = index.len() - x.shape.len();
    let idx: Vec<usize> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { index[lead + d] })
        .collect();
    x.at(&idx)
}

/// `f(a, b)` broadcast.
pub fn binary(a: &Nd, b: &Nd, f: impl Fn(f64, f64) -> f64) -> Nd {
    let shape = broadcast(&a.shape, &b.shape);
    Nd::from_fn(shape, |i| f(read_broadcast(a, i), read_broadcast(b, i)))
}

/// The ONNX definition of `op` on two values; `int` selects integer semantics (truncating
/// division), `fmod` C remainder semantics. Comparisons and logic give 0 or 1. Shifts are
/// exact for counts within the width (the caller wraps the result to the dtype).
pub fn apply(op: ElementwiseOp, fmod: bool, int: bool, x: f64, y: f64) -> f64 {
    use ElementwiseOp as E;
    let bool = |c: bool| if c { 1.0 } else { 0.0 };
    match op {
        E::Add => x + y,
        E::Sub => x - y,
        E::Mul => x * y,
        E::Div if int => (x / y).trunc(),
        E::Div => x / y,
        E::Pow if int => x.powf(y).trunc(),
        E::Pow => x.powf(y),
        E::Max => x.max(y),
        E::Min => x.min(y),
        E::Mod => {
            let r = x % y;
            if !fmod && r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else {
                r
            }
        }
        E::PRelu => {
            if x < 0.0 {
                y * x
            } else {
                x
            }
        }
        E::And => bool(x != 0.0 && y != 0.0),
        E::Or => bool(x != 0.0 || y != 0.0),
        E::Xor => bool((x != 0.0) != (y != 0.0)),
        E::Equal => bool(x == y),
        E::Less => bool(x < y),
        E::LessOrEqual => bool(x <= y),
        E::Greater => bool(x > y),
        E::GreaterOrEqual => bool(x >= y),
        E::ShiftLeft => x * 2f64.powf(y),
        E::ShiftRight => (x / 2f64.powf(y)).floor(),
    }
}
