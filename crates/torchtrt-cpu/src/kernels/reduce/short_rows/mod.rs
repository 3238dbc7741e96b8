//! f32 rows of a few vectors (a 64-wide last axis): each row is loaded once into registers,
//! its last vector masked, reduced across its vectors and then across lanes by one
//! horizontal step. The lane-array folds of [`super::fold`] merge their lanes through memory
//! once per row, which for rows this short costs as much as reading them.
//!
//! The kernels are written once over the vector operations of [`lanes`] and compiled for
//! AVX-512 (rows of up to sixteen 16-lane vectors) and AVX2 with FMA (up to sixteen 8-lane
//! vectors); the level [`crate::simd::level`] allows picks one.

#[cfg(target_arch = "x86_64")]
mod kernels;
#[cfg(target_arch = "x86_64")]
mod lanes;
#[cfg(test)]
mod tests;

/// Rows a softmax takes through each of its passes before the next pass: the passes of
/// different rows overlap where one row's chain (maximum, exponentials, sum, scale) would
/// leave the vector units waiting on each step.
const GROUP: usize = 8;

/// The reductions of one row these kernels compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowFold {
    /// `Σ x`.
    Sum,
    /// `Σ x / n`.
    Mean,
    /// `max x`, NaN if any value is NaN.
    Max,
    /// `min x`, NaN if any value is NaN.
    Min,
}

/// An instruction set the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// AVX-512 F: sixteen lanes.
    Avx512,
    /// AVX2 and FMA: eight lanes.
    Avx2,
}

impl Isa {
    /// The widest the level allows, if any.
    fn current() -> Option<Isa> {
        if crate::simd::v4() {
            Some(Isa::Avx512)
        } else if crate::simd::v3() {
            Some(Isa::Avx2)
        } else {
            None
        }
    }

    /// Longest row it takes: sixteen vectors.
    fn max_len(self) -> usize {
        match self {
            Isa::Avx512 => 16 * 16,
            Isa::Avx2 => 16 * 8,
        }
    }

    /// Whether it takes rows of `len` values.
    fn takes(self, len: usize) -> bool {
        (1..=self.max_len()).contains(&len)
    }
}

/// Whether rows of `len` values run here: the level allows AVX-512 (rows of at most 256
/// values) or AVX2 (at most 128), and `len ≥ 1`.
pub(crate) fn takes(len: usize) -> bool {
    Isa::current().is_some_and(|isa| isa.takes(len))
}

/// `out[j]` = the fold of row `j` of `x` (rows of `len` values back to back); `false`
/// (nothing written) when [`takes`] refuses `len` or `x` is shorter than `out.len()` rows.
pub(crate) fn reduce(fold: RowFold, x: &[f32], len: usize, out: &mut [f32]) -> bool {
    Isa::current().is_some_and(|isa| reduce_on(isa, fold, x, len, out))
}

/// Softmax (or log-softmax) of each row of `len` values of `x` into the same place in `out`
/// (whole rows, `x.len() == out.len()`); `false` (nothing written) when [`takes`] refuses
/// `len` or the lengths do not match.
pub(crate) fn softmax(x: &[f32], len: usize, log: bool, out: &mut [f32]) -> bool {
    Isa::current().is_some_and(|isa| softmax_on(isa, x, len, log, out))
}

/// `x[k] = e^(x[k] − shift)` in place for a `shift` at least every value (as a row's
/// maximum is), returning their sum; `None` (nothing written) when [`takes`] refuses
/// `x.len()`.
pub(crate) fn exp_shifted(x: &mut [f32], shift: f32) -> Option<f32> {
    Isa::current().and_then(|isa| exp_shifted_on(isa, x, shift))
}

/// [`reduce`] with `isa`, which the CPU has.
fn reduce_on(isa: Isa, fold: RowFold, x: &[f32], len: usize, out: &mut [f32]) -> bool {
    if !isa.takes(len) || out.len().checked_mul(len).is_none_or(|n| x.len() < n) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has `isa` (the caller's contract), which takes `len`, and `x` holds
    // `out.len()` rows of `len`.
    unsafe {
        kernels::reduce(isa, fold, x, len, out)
    };
    cfg!(target_arch = "x86_64")
}

/// [`softmax`] with `isa`, which the CPU has.
fn softmax_on(isa: Isa, x: &[f32], len: usize, log: bool, out: &mut [f32]) -> bool {
    if !isa.takes(len) || x.len() != out.len() || !out.len().is_multiple_of(len) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has `isa` (the caller's contract), which takes `len`, and `x`, `out`
    // hold the same whole rows.
    unsafe {
        kernels::softmax(isa, x, len, log, out)
    };
    cfg!(target_arch = "x86_64")
}

/// [`exp_shifted`] with `isa`, which the CPU has.
fn exp_shifted_on(isa: Isa, x: &mut [f32], shift: f32) -> Option<f32> {
    if !isa.takes(x.len()) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has `isa` (the caller's contract), which takes `x.len()`.
    return Some(unsafe { kernels::exp_shifted(isa, x, shift) });
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = shift;
        None
    }
}
