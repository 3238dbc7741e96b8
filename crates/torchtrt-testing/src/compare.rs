//! The one comparison every suite uses.

use std::fmt;

/// A bound on `|got − want|` for one element: `atol + rtol·|want|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tol {
    /// Relative part, against each element's own reference value.
    pub rtol: f64,
    /// Absolute floor, for references at or near zero.
    pub atol: f64,
}

impl Tol {
    /// Bit-exact (integers, bools, and float results that must not change).
    pub const EXACT: Tol = Tol {
        rtol: 0.0,
        atol: 0.0,
    };

    /// A bound with these parts; both must be finite and non-negative.
    pub fn new(rtol: f64, atol: f64) -> Tol {
        assert!(
            rtol.is_finite() && atol.is_finite() && rtol >= 0.0 && atol >= 0.0,
            "tolerance rtol {rtol}, atol {atol}: both must be finite and non-negative"
        );
        Tol { rtol, atol }
    }

    /// f64 results: 1e-6 relative (the accuracy of the special functions).
    pub fn f64() -> Tol {
        Tol::new(1e-6, 1e-8)
    }

    /// f32 results: 1e-5 relative.
    pub fn f32() -> Tol {
        Tol::new(1e-5, 1e-7)
    }

    /// f16 results: 1e-2 relative (about ten units in the last place).
    pub fn f16() -> Tol {
        Tol::new(1e-2, 1e-4)
    }

    /// bf16 results: 2e-2 relative (about three units in the last place).
    pub fn bf16() -> Tol {
        Tol::new(2e-2, 2e-4)
    }

    /// The same relative part with the absolute floor at `rtol·scale`: for results that are
    /// sums of terms of magnitude `scale`, which may cancel to near zero.
    pub fn scaled(self, scale: f64) -> Tol {
        Tol::new(self.rtol, self.rtol * scale.abs())
    }

    /// The same relative part with this absolute floor.
    pub fn with_atol(self, atol: f64) -> Tol {
        Tol::new(self.rtol, atol)
    }

    /// The bound for an element whose reference is `want` (finite).
    pub fn bound(self, want: f64) -> f64 {
        self.atol + self.rtol * want.abs()
    }
}

/// Whether `got` matches `want`: NaN only NaN, an infinity only the same infinity, a finite
/// reference within `tol` (a NaN or infinite `got` never is).
pub fn close(got: f64, want: f64, tol: Tol) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        (got - want).abs() <= tol.bound(want)
    }
}

/// How far an element is outside its bound: 0 inside, `inf` for a NaN or infinity mismatch.
fn excess(got: f64, want: f64, tol: Tol) -> f64 {
    if close(got, want, tol) {
        return 0.0;
    }
    if !want.is_finite() || !got.is_finite() {
        return f64::INFINITY;
    }
    let bound = tol.bound(want);
    let diff = (got - want).abs();
    if bound > 0.0 {
        diff / bound
    } else {
        f64::INFINITY
    }
}

/// A comparison that failed: the lengths differ, or some elements are outside their bound
/// (the worst one named).
#[derive(Clone, Debug, PartialEq)]
pub enum Mismatch {
    /// `got` and `want` have different numbers of elements.
    Length {
        /// Elements produced.
        got: usize,
        /// Elements expected.
        want: usize,
    },
    /// Elements outside their bound.
    Values {
        /// How many elements fail.
        failed: usize,
        /// How many elements there are.
        len: usize,
        /// The flat index of the worst one.
        index: usize,
        /// Its value, printed.
        got: String,
        /// Its reference, printed.
        want: String,
        /// The bound it was held to (`None` for an exact comparison).
        tol: Option<Tol>,
        /// The shape, when known, to print the index as coordinates.
        shape: Option<Vec<usize>>,
    },
}

impl Mismatch {
    /// The same mismatch, printing its index as coordinates in `shape`.
    pub fn in_shape(self, dims: &[usize]) -> Mismatch {
        match self {
            Mismatch::Values {
                failed,
                len,
                index,
                got,
                want,
                tol,
                ..
            } => Mismatch::Values {
                failed,
                len,
                index,
                got,
                want,
                tol,
                shape: Some(dims.to_vec()),
            },
            other => other,
        }
    }
}

/// Coordinates of flat index `i` in a row-major `shape`.
fn coords(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for (c, &d) in out.iter_mut().zip(shape).rev() {
        if d > 0 {
            *c = i % d;
            i /= d;
        }
    }
    out
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Length { got, want } => {
                write!(f, "{got} elements, the reference has {want}")
            }
            Mismatch::Values {
                failed,
                len,
                index,
                got,
                want,
                tol,
                shape,
            } => {
                write!(
                    f,
                    "{failed} of {len} elements differ; worst: element {index}"
                )?;
                if let Some(s) = shape {
                    write!(f, " {:?} of {s:?}", coords(*index, s))?;
                }
                write!(f, ": got {got}, want {want}")?;
                match tol {
                    Some(t) => write!(f, " (rtol {:e}, atol {:e})", t.rtol, t.atol),
                    None => write!(f, " (exact)"),
                }
            }
        }
    }
}

impl std::error::Error for Mismatch {}

/// A value that compares as an f64 (every float type the kernels produce).
pub trait AsF64: Copy {
    /// The value, exactly.
    fn as_f64(self) -> f64;
}

impl AsF64 for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}

impl AsF64 for f32 {
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}

impl AsF64 for half::f16 {
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

impl AsF64 for half::bf16 {
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

/// Checks each `got[i]` against `want[i]` with [`close`]; a failure names the element
/// furthest outside its bound (a NaN or infinity mismatch first).
pub fn check_floats<G: AsF64, W: AsF64>(got: &[G], want: &[W], tol: Tol) -> Result<(), Mismatch> {
    check_floats_by(got, want, |_| tol)
}

/// [`check_floats`] with a bound per element: `tol_at(i)` for element `i` (for sums, whose
/// rounding error scales with `Σ|terms|` of that element rather than with its value).
pub fn check_floats_by<G: AsF64, W: AsF64>(
    got: &[G],
    want: &[W],
    tol_at: impl Fn(usize) -> Tol,
) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch::Length {
            got: got.len(),
            want: want.len(),
        });
    }
    let mut failed = 0;
    let mut worst: Option<(f64, usize, Tol)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = tol_at(i);
        let e = excess(g.as_f64(), w.as_f64(), tol);
        if e > 0.0 {
            failed += 1;
            if worst.is_none_or(|(x, _, _)| e > x) {
                worst = Some((e, i, tol));
            }
        }
    }
    let Some((_, i, tol)) = worst else {
        return Ok(());
    };
    Err(Mismatch::Values {
        failed,
        len: got.len(),
        index: i,
        got: format!("{:?}", got[i].as_f64()),
        want: format!("{:?}", want[i].as_f64()),
        tol: Some(tol),
        shape: None,
    })
}

/// Checks `got` equals `want` element by element (integers, bools, raw bytes); a failure
/// names the first differing element.
pub fn check_exact<T: PartialEq + fmt::Debug>(got: &[T], want: &[T]) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch::Length {
            got: got.len(),
            want: want.len(),
        });
    }
    let mut bad = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w);
    let Some((index, (g, w))) = bad.next() else {
        return Ok(());
    };
    Err(Mismatch::Values {
        failed: 1 + bad.count(),
        len: got.len(),
        index,
        got: format!("{g:?}"),
        want: format!("{w:?}"),
        tol: None,
        shape: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinities_match_only_the_same_infinity() {
        let t = Tol::f32();
        assert!(close(f64::INFINITY, f64::INFINITY, t));
        assert!(close(f64::NEG_INFINITY, f64::NEG_INFINITY, t));
        assert!(!close(f64::NEG_INFINITY, f64::INFINITY, t));
        assert!(!close(1e30, f64::INFINITY, t));
        assert!(!close(f64::NAN, f64::INFINITY, t));
        assert!(!close(f64::INFINITY, 1e30, t));
    }

    #[test]
    fn nan_matches_only_nan() {
        let t = Tol::new(1.0, 1.0);
        assert!(close(f64::NAN, f64::NAN, t));
        assert!(!close(f64::NAN, 0.0, t));
        assert!(!close(0.0, f64::NAN, t));
        let e = check_floats(&[1.0, f64::NAN, 3.0], &[1.0, 2.0, 3.5], Tol::f32()).unwrap_err();
        assert!(
            matches!(
                e,
                Mismatch::Values {
                    failed: 2,
                    index: 1,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn tolerance_is_relative_to_each_element() {
        let t = Tol::new(1e-3, 1e-6);
        assert!(close(1000.9, 1000.0, t));
        assert!(!close(1001.1, 1000.0, t));
        assert!(close(1e-3 + 1e-9, 1e-3, t));
        assert!(!close(1e-3 + 1e-5, 1e-3, t));
        assert!(close(5e-7, 0.0, t));
        assert!(!close(2e-6, 0.0, t));
    }

    #[test]
    fn the_report_names_the_worst_element() {
        let got = [1.0f32, 2.5, 3.0, 4.01];
        let want = [1.0f32, 2.0, 3.0, 4.0];
        let e = check_floats(&got, &want, Tol::new(1e-3, 0.0))
            .unwrap_err()
            .in_shape(&[2, 2]);
        let text = e.to_string();
        assert!(
            text.starts_with(
                "2 of 4 elements differ; worst: element 1 [0, 1] of [2, 2]: got 2.5, want 2.0"
            ),
            "{text}"
        );
    }

    #[test]
    fn integers_compare_exactly_beyond_f64() {
        let big = (1i64 << 53) + 1;
        assert!(check_exact(&[big], &[big]).is_ok());
        assert!(check_exact(&[big], &[big - 1]).is_err());
        assert!(check_exact(&[5005i64], &[5000]).is_err());
        assert_eq!(
            check_exact(&[1u8, 2], &[1]),
            Err(Mismatch::Length { got: 2, want: 1 })
        );
    }
}
