//! A safe front to `gemm::gemm`: strided operands with bounds checked up front.

use gemm::Parallelism;
use half::bf16;
use half::slice::HalfFloatSliceExt;

use super::Epilogue;

/// Element types the `gemm` crate multiplies natively.
pub(crate) trait GemmElem: bytemuck::Pod + Send + Sync {
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;

    /// Applies `e` to every element of `xs`.
    fn activate(e: Epilogue, xs: &mut [Self]);
}

impl GemmElem for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;

    fn activate(e: Epilogue, xs: &mut [f32]) {
        e.apply(xs)
    }
}

impl GemmElem for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;

    fn activate(e: Epilogue, xs: &mut [f64]) {
        e.apply(xs)
    }
}

impl GemmElem for half::f16 {
    const ZERO: half::f16 = half::f16::ZERO;
    const ONE: half::f16 = half::f16::ONE;

    fn activate(e: Epilogue, xs: &mut [half::f16]) {
        if e == Epilogue::Identity {
            return;
        }
        let mut wide = xs.to_f32_vec();
        e.apply(&mut wide);
        xs.convert_from_f32_slice(&wide);
    }
}

/// A `rows × cols` matrix read from `data` with element `(i, j)` at
/// `i · row_stride + j · col_stride`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<'a, T> {
    /// The elements.
    pub(crate) data: &'a [T],
    /// Number of rows.
    pub(crate) rows: usize,
    /// Number of columns.
    pub(crate) cols: usize,
    /// Distance between rows, in elements.
    pub(crate) row_stride: usize,
    /// Distance between columns, in elements.
    pub(crate) col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A dense row-major matrix at the start of `data`.
    pub(crate) fn row_major(data: &'a [T], rows: usize, cols: usize) -> MatRef<'a, T> {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// Checks that every element lies inside `data`.
    fn check(&self, what: &str) -> Result<(), String> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .zip((self.cols - 1).checked_mul(self.col_stride))
            .and_then(|(r, c)| r.checked_add(c));
        match last {
            Some(last) if last < self.data.len() => Ok(()),
            _ => Err(format!(
                "gemm: {what} of {}×{} with strides ({}, {}) overruns its {} elements",
                self.rows,
                self.cols,
                self.row_stride,
                self.col_stride,
                self.data.len()
            )),
        }
    }
}

/// `dst = lhs · rhs`, or `dst += lhs · rhs` when `accumulate`; `dst` is dense row-major.
/// With `parallel` the product is split over the current rayon pool.
pub(crate) fn gemm<T: GemmElem>(
    dst: &mut [T],
    lhs: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
) -> Result<(), String> {
    let (m, n) = (lhs.rows, rhs.cols);
    if dst.len() != m * n {
        return Err(format!(
            "gemm: cannot multiply {m}×{}, {}×{n} into {} elements",
            lhs.cols,
            rhs.rows,
            dst.len()
        ));
    }
    // SAFETY: `dst` is an exclusive slice of exactly `m × n` elements, row stride `n`.
    unsafe { gemm_into(dst.as_mut_ptr(), n, lhs, rhs, accumulate, parallel) }
}

/// [`gemm()`] into an `lhs.rows × rhs.cols` block at `dst` whose rows lie `dst_stride`
/// elements apart (a tile of a larger matrix).
///
/// # Safety
/// Every element `dst + i · dst_stride + j` of the block must be valid for reads and writes
/// and accessed by no one else during the call.
pub(crate) unsafe fn gemm_into<T: GemmElem>(
    dst: *mut T,
    dst_stride: usize,
    lhs: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
) -> Result<(), String> {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    if rhs.rows != k {
        return Err(format!("gemm: cannot multiply {m}×{k} by {}×{n}", rhs.rows));
    }
    lhs.check("lhs")?;
    rhs.check("rhs")?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                // SAFETY: row `i` of the block is valid for writes (the caller's contract).
                unsafe { std::slice::from_raw_parts_mut(dst.add(i * dst_stride), n) }.fill(T::ZERO);
            }
        }
        return Ok(());
    }
    let parallelism = if parallel {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    let stride = |s: usize| isize::try_from(s).map_err(|_| format!("gemm: stride {s} too large"));
    let (lhs_rs, lhs_cs) = (stride(lhs.row_stride)?, stride(lhs.col_stride)?);
    let (rhs_rs, rhs_cs) = (stride(rhs.row_stride)?, stride(rhs.col_stride)?);
    let dst_rs = stride(dst_stride)?;
    // SAFETY: `T` is one of the types `gemm` supports (f32, f64, f16; the trait is sealed to
    // them), the caller guarantees the `m × n` block at `dst` with row stride `dst_stride`,
    // and `check` proved every element of `lhs` and `rhs` addressed by the strides lies
    // inside its slice.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs,
            accumulate,
            lhs.data.as_ptr(),
            lhs_cs,
            lhs_rs,
            rhs.data.as_ptr(),
            rhs_cs,
            rhs_rs,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            parallelism,
        );
    }
    Ok(())
}

/// Runs `f` on f32 copies of bf16 `inputs` and an f32 output, then rounds that output into
/// `out`: bf16 products are computed in f32.
pub(crate) fn via_f32<const N: usize>(
    inputs: [&[bf16]; N],
    out: &mut [bf16],
    f: impl FnOnce([&[f32]; N], &mut [f32]) -> Result<(), String>,
) -> Result<(), String> {
    let widened: Vec<Vec<f32>> = inputs.iter().map(|x| x.to_f32_vec()).collect();
    let views: [&[f32]; N] = std::array::from_fn(|i| widened[i].as_slice());
    let mut result = vec![0f32; out.len()];
    f(views, &mut result)?;
    out.convert_from_f32_slice(&result);
    Ok(())
}
