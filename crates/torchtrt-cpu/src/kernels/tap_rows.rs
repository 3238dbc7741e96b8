//! Rows of the direct convolution ([`super::conv_direct`]) on AVX-512, f32: each output
//! row is the bias plus every tap's weight times a shifted run of one prepared buffer (the
//! zero-padded plane, or its phases for stride 2). Four rows at a time, two vectors of each
//! stay in registers while every tap is added, so each output is stored once, and the taps
//! of one kernel column (a chain: each reads the run one output row after the last) share
//! their loads: a 5×5 kernel's 25 loads per output vector become 10. A row's last vector is
//! loaded and stored masked, so rows of any width run without scalar tails. Also the
//! even/odd split of input rows that stride-2 layers read, by two-source permutes, and the
//! masked copy of short rows.

use crate::linalg::Epilogue;
use crate::simd::first_lanes;

/// Lanes of one vector.
const LANES: usize = 16;
/// Vectors of a row held in registers at once, one row at a time.
const BLOCK: usize = 4;
/// Output rows computed at once where taps chain, and their vectors.
const ROWS: usize = 4;
/// Vectors of each of [`ROWS`] rows held in registers at once.
const ROW_BLOCK: usize = 2;
/// Most taps of a chain added in one unrolled piece ([`chained`]); longer chains (kernels
/// taller than 7) are added piece by piece.
const MOST_CHAINED: usize = 7;

/// One layer's taps at fixed offsets of a prepared buffer whose output rows lie `stride`
/// apart, also ordered into chains: runs of taps each `stride` after the one before (the
/// taps of one kernel column, when each output row reads the next input row). Rows computed
/// together then load each input run once for every tap of a chain that reads it.
pub(super) struct Chains {
    /// Each tap's offset, in the taps' order.
    pub(super) offsets: Vec<usize>,
    /// Elements between the starts of two output rows' runs.
    pub(super) stride: usize,
    /// The taps, chain by chain.
    order: Vec<usize>,
    /// The chains' lengths, in `order`.
    lengths: Vec<usize>,
}

impl Chains {
    /// The chains of taps at `offsets` for output rows `stride` apart.
    pub(super) fn new(offsets: Vec<usize>, stride: usize) -> Chains {
        let at = |o: usize| offsets.iter().position(|&x| x == o);
        let (mut order, mut lengths) = (Vec::new(), Vec::new());
        for (first, &o) in offsets.iter().enumerate() {
            if o.checked_sub(stride).and_then(at).is_some() && stride > 0 {
                continue;
            }
            let before = order.len();
            let mut next = Some(first);
            while let Some(t) = next.filter(|t| !order[before..].contains(t)) {
                order.push(t);
                next = (stride > 0).then(|| at(offsets[t] + stride)).flatten();
            }
            lengths.push(order.len() - before);
        }
        Chains {
            offsets,
            stride,
            order,
            lengths,
        }
    }

    /// Whether some chain has more than one tap.
    pub(super) fn chained(&self) -> bool {
        self.lengths.len() < self.order.len()
    }
}

/// Output rows of one plane from its taps' weights: output `(r, j)` is
/// `f(bias + Σₜ weights[t] · src[r · stride + offsets[t] + j])`, `f` the epilogue.
pub(super) struct TapRows<'a> {
    /// The prepared buffer.
    pub(super) src: &'a [f32],
    /// The taps' offsets and chains.
    pub(super) chains: &'a Chains,
    /// Each tap's weight.
    pub(super) weights: &'a [f32],
    /// Added to every output.
    pub(super) bias: f32,
    /// Applied to every output before it is stored.
    pub(super) epilogue: Epilogue,
}

impl TapRows<'_> {
    /// Writes `rows` rows of `len` outputs, `len` apart, into `dst`; `false` (nothing
    /// written) when the CPU lacks AVX-512 or a run would leave `src` or `dst`.
    pub(super) fn run(&self, rows: usize, len: usize, dst: &mut [f32]) -> bool {
        let c = self.chains;
        let reach = c.offsets.iter().max().map_or(0, |&o| o + len);
        let fits = rows == 0
            || c.offsets.len() == self.weights.len()
                && c.order.len() == c.offsets.len()
                && (rows - 1) * c.stride + reach <= self.src.len()
                && rows * len <= dst.len();
        if !(fits && crate::simd::v4()) {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let mut r = 0;
            while c.chained() && r + ROWS <= rows {
                // SAFETY: the CPU has AVX-512 F (`v4`), and every run of rows
                // `r..r + ROWS` lies in `src` (`fits`).
                unsafe { self.rows(r, len, &mut dst[r * len..(r + ROWS) * len]) };
                r += ROWS;
            }
            for (r, out) in dst
                .chunks_exact_mut(len.max(1))
                .enumerate()
                .take(rows)
                .skip(r)
            {
                // SAFETY: as above, for row `r`.
                unsafe { self.row(r * c.stride, out) };
            }
        }
        cfg!(target_arch = "x86_64")
    }

    /// [`ROWS`] output rows from row `first` on, [`ROW_BLOCK`] vectors of each at a time.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, and `src` holds every run of those rows (`first + ROWS - 1`
    /// strides past each offset, plus `len`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn rows(&self, first: usize, len: usize, out: &mut [f32]) {
        let mut j = 0;
        while j < len {
            let n = (len - j).min(ROW_BLOCK * LANES);
            // SAFETY: as the caller's promise, for columns `j..j + n`.
            unsafe {
                if n > LANES {
                    self.row_block::<ROW_BLOCK>(first, j, n, len, out);
                } else {
                    self.row_block::<1>(first, j, n, len, out);
                }
            }
            j += n;
        }
    }

    /// Columns `j..j + n` (`n` at most `V` vectors) of [`ROWS`] output rows from row
    /// `first` on, into `out` (those rows, `len` apart): each chain's input runs loaded
    /// once, each added to every row whose tap of the chain reads it.
    ///
    /// # Safety
    /// As [`Self::rows`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn row_block<const V: usize>(
        &self,
        first: usize,
        j: usize,
        n: usize,
        len: usize,
        out: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        let c = self.chains;
        let masks: [u16; V] = std::array::from_fn(|v| first_lanes(n.saturating_sub(v * LANES)));
        let mut acc = [[_mm512_set1_ps(self.bias); V]; ROWS];
        let base = first * c.stride + j;
        let mut start = 0;
        for &length in &c.lengths {
            for piece in c.order[start..start + length].chunks(MOST_CHAINED) {
                let at = self.src.as_ptr().wrapping_add(base + c.offsets[piece[0]]);
                macro_rules! unrolled {
                    ($($l:literal)*; $most:expr) => {
                        match piece.len() {
                            $($l => self.piece::<$l, V>(&mut acc, at, piece, &masks),)*
                            _ => self.piece::<$most, V>(&mut acc, at, piece, &masks),
                        }
                    };
                }
                // SAFETY: the piece's runs for these rows lie in `src` (the caller's
                // promise: a piece of a chain is a chain).
                unsafe { unrolled!(1 2 3 4 5 6; MOST_CHAINED) };
            }
            start += length;
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, a) in row.iter().enumerate() {
                let at = r * len + j + v * LANES;
                let a = self.epilogue.vector(*a);
                // SAFETY: the lanes set in `masks[v]` are columns `j..j + n` of row `r`
                // of `out`.
                unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().add(at), masks[v], a) };
            }
        }
    }

    /// [`chained`] for the taps `piece` (`L` of them, a chain's consecutive taps), their
    /// weights read from `weights`.
    ///
    /// # Safety
    /// As [`chained`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn piece<const L: usize, const V: usize>(
        &self,
        acc: &mut [[std::arch::x86_64::__m512; V]; ROWS],
        at: *const f32,
        piece: &[usize],
        masks: &[u16; V],
    ) {
        let w: [f32; L] = std::array::from_fn(|q| self.weights[piece[q]]);
        // SAFETY: as the caller's promise.
        unsafe { chained::<L, V>(acc, at, self.chains.stride, &w, masks) }
    }

    /// One output row whose runs start `base` into `src`, dispatched on its vectors.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, and `src` holds `base + offset + out.len()` elements for
    /// every offset.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn row(&self, base: usize, out: &mut [f32]) {
        let len = out.len();
        let mut j = 0;
        while j + BLOCK * LANES <= len {
            // SAFETY: as the caller's promise, for the columns `j..j + 64` of `out`.
            unsafe { self.block::<BLOCK>(base + j, &mut out[j..j + BLOCK * LANES]) };
            j += BLOCK * LANES;
        }
        let rest = &mut out[j..];
        // SAFETY: as above, for the last columns.
        unsafe {
            match rest.len().div_ceil(LANES) {
                0 => {}
                1 => self.block::<1>(base + j, rest),
                2 => self.block::<2>(base + j, rest),
                3 => self.block::<3>(base + j, rest),
                _ => self.block::<BLOCK>(base + j, rest),
            }
        }
    }

    /// `V` vectors of outputs (`out`, of more than `V - 1` vectors and at most `V`) whose
    /// runs start `base` into `src`.
    ///
    /// # Safety
    /// As [`Self::row`], with `out.len()` the run's length.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn block<const V: usize>(&self, base: usize, out: &mut [f32]) {
        use std::arch::x86_64::*;
        let masks: [u16; V] =
            std::array::from_fn(|v| first_lanes(out.len().saturating_sub(v * LANES)));
        let mut acc = [_mm512_set1_ps(self.bias); V];
        for (&offset, &w) in self.chains.offsets.iter().zip(self.weights) {
            let w = _mm512_set1_ps(w);
            let at = self.src.as_ptr().wrapping_add(base + offset);
            for (v, a) in acc.iter_mut().enumerate() {
                // SAFETY: lanes set in `masks[v]` read `src[base + offset + v·16 + l]` with
                // `v·16 + l < out.len()`, inside `src` by the caller's promise.
                let x = unsafe { _mm512_maskz_loadu_ps(masks[v], at.add(v * LANES)) };
                *a = _mm512_fmadd_ps(x, w, *a);
            }
        }
        for (v, a) in acc.iter().enumerate() {
            let a = self.epilogue.vector(*a);
            // SAFETY: the lanes set in `masks[v]` are columns of `out`.
            unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().add(v * LANES), masks[v], a) };
        }
    }
}

/// Copies `src` into `dst` (of the same length) by masked vectors: the rows of small planes,
/// where a call of `memcpy` per row would cost more than the copy; `false` (nothing
/// written) without AVX-512.
pub(super) fn copy(dst: &mut [f32], src: &[f32]) -> bool {
    if dst.len() != src.len() || !crate::simd::v4() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512 F, and the lengths agree.
    unsafe {
        copy_v4(dst, src)
    };
    cfg!(target_arch = "x86_64")
}

/// [`copy`] on AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, and `dst` is as long as `src`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn copy_v4(dst: &mut [f32], src: &[f32]) {
    use std::arch::x86_64::*;
    for at in (0..src.len()).step_by(LANES) {
        let mask = first_lanes(src.len() - at);
        // SAFETY: the lanes set in `mask` are elements `at..` below the common length.
        unsafe {
            let x = _mm512_maskz_loadu_ps(mask, src.as_ptr().add(at));
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(at), mask, x);
        }
    }
}

/// Adds one chain of `L` taps (weights `w`, `L` at most [`MOST_CHAINED`]) to [`ROWS`] rows of `V` vectors: run `p` of the
/// chain (`at + p · stride`) is row `r`'s run of its tap `p - r`, so each run is loaded once
/// for up to `min(L, ROWS)` rows. Unrolled whole: which rows a run feeds is known at compile
/// time, so the loop has no branches.
///
/// # Safety
/// The CPU has AVX-512 F, and `at + p · stride + v · 16 + l` lies in the buffer for
/// `p < L + ROWS - 1` wherever `masks[v]` sets lane `l`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chained<const L: usize, const V: usize>(
    acc: &mut [[std::arch::x86_64::__m512; V]; ROWS],
    at: *const f32,
    stride: usize,
    w: &[f32; L],
    masks: &[u16; V],
) {
    use std::arch::x86_64::*;
    for p in 0..L + ROWS - 1 {
        let mut x = [_mm512_setzero_ps(); V];
        for (v, x) in x.iter_mut().enumerate() {
            // SAFETY: as the caller's promise.
            *x = unsafe { _mm512_maskz_loadu_ps(masks[v], at.add(p * stride + v * LANES)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            if p >= r && p - r < L {
                let w = _mm512_set1_ps(w[p - r]);
                for (a, x) in row.iter_mut().zip(&x) {
                    *a = _mm512_fmadd_ps(*x, w, *a);
                }
            }
        }
    }
}

/// Splits `row`'s pairs into `even` (first elements) and `odd` (second elements), the last
/// element of an odd-length row into `even`; `false` (nothing written) without AVX-512.
pub(super) fn deinterleave(even: &mut [f32], odd: &mut [f32], row: &[f32]) -> bool {
    let pairs = row.len() / 2;
    if even.len() < row.len().div_ceil(2) || odd.len() < pairs || !crate::simd::v4() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512 F, and the lengths were checked above.
    unsafe {
        deinterleave_v4(even, odd, row)
    };
    cfg!(target_arch = "x86_64")
}

/// [`deinterleave`] on AVX-512, 16 pairs per step.
///
/// # Safety
/// The CPU has AVX-512 F; `even` holds `⌈row.len() / 2⌉` elements and `odd`
/// `⌊row.len() / 2⌋`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn deinterleave_v4(even: &mut [f32], odd: &mut [f32], row: &[f32]) {
    use std::arch::x86_64::*;
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let steps = row.len().div_ceil(2 * LANES);
    for s in 0..steps {
        let at = 2 * LANES * s;
        let rest = row.len() - at;
        let (lo, hi) = (first_lanes(rest), first_lanes(rest.saturating_sub(LANES)));
        // SAFETY: step `s` reads `row[at..]` where `lo` and `hi` are set (below
        // `row.len()`) and writes `even` at `16s + l` for `l < ⌈rest / 2⌉` and `odd` for
        // `l < ⌊rest / 2⌋`, inside both (checked by the caller).
        unsafe {
            let lo = _mm512_maskz_loadu_ps(lo, row.as_ptr().add(at));
            let hi = _mm512_maskz_loadu_ps(hi, row.as_ptr().add(at + LANES));
            let (e, o) = (
                _mm512_permutex2var_ps(lo, evens, hi),
                _mm512_permutex2var_ps(lo, odds, hi),
            );
            _mm512_mask_storeu_ps(
                even.as_mut_ptr().add(LANES * s),
                first_lanes(rest.div_ceil(2)),
                e,
            );
            _mm512_mask_storeu_ps(odd.as_mut_ptr().add(LANES * s), first_lanes(rest / 2), o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Chains;

    #[test]
    fn kernel_columns_chain_by_the_row_stride() {
        let offsets = (0..3).flat_map(|ky| (0..3).map(move |kx| ky * 10 + kx));
        let c = Chains::new(offsets.collect(), 10);
        assert_eq!(c.lengths, [3, 3, 3]);
        assert_eq!(c.order, [0, 3, 6, 1, 4, 7, 2, 5, 8]);
    }

    #[test]
    fn stride_two_phases_chain_every_other_kernel_row() {
        let (half, phase) = (8, 64);
        let offsets = (0..5).flat_map(|ky| {
            (0..5).map(move |kx| ((ky % 2) * 2 + kx % 2) * phase + (ky / 2) * half + kx / 2)
        });
        let c = Chains::new(offsets.collect(), half);
        assert_eq!(c.lengths, [3, 3, 3, 3, 3, 2, 2, 2, 2, 2]);
        assert_eq!(&c.order[..3], [0, 10, 20]);
        let mut all = c.order.clone();
        all.sort_unstable();
        assert_eq!(all, (0..25).collect::<Vec<_>>());
    }

    #[test]
    fn no_chains_without_a_stride() {
        let c = Chains::new(vec![0, 1, 2], 0);
        assert_eq!(c.lengths, [1, 1, 1]);
    }
}
