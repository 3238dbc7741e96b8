//! An AVX-512 row kernel for two-tap tables (linear resampling along the innermost axis)
//! that the periodic kernels do not cover, e.g. `align_corners`: every block of sixteen
//! outputs reads a window of at most 32 consecutive inputs, loaded as two vectors (masked
//! at the row's end); each tap is picked out of them with one permute and the taps are
//! combined with the scalar gather's multiply-add order, so both give identical results.

use std::arch::x86_64::{
    __m512i, __mmask16, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_loadu_si512,
    _mm512_maskz_loadu_ps, _mm512_mul_ps, _mm512_permutex2var_ps, _mm512_storeu_ps,
};
use std::ops::Range;

use crate::kernels::simd::avx512;

/// Outputs of one block.
const LANES: usize = 16;

/// The blocks of a two-tap table, for whole blocks of sixteen outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct TwoTapRows {
    blocks: Vec<Block>,
}

/// Sixteen outputs: their window's first input, each tap's position in the window, and
/// each tap's weight.
#[derive(Clone, Debug, PartialEq)]
struct Block {
    base: usize,
    first: [i32; LANES],
    second: [i32; LANES],
    w0: [f32; LANES],
    w1: [f32; LANES],
}

impl TwoTapRows {
    /// The blocks of `index` / `weight` (two taps per output), when the CPU has AVX-512 and
    /// every whole block reads fewer than 32 consecutive inputs.
    pub fn new(index: &[usize], weight: &[f32]) -> Option<TwoTapRows> {
        if !avx512() {
            return None;
        }
        let blocks = index
            .chunks_exact(2 * LANES)
            .zip(weight.chunks_exact(2 * LANES))
            .map(|(idx, w)| {
                let base = idx.iter().copied().min()?;
                if idx.iter().any(|&i| i - base >= 2 * LANES) {
                    return None;
                }
                let mut b = Block {
                    base,
                    first: [0; LANES],
                    second: [0; LANES],
                    w0: [0.0; LANES],
                    w1: [0.0; LANES],
                };
                for l in 0..LANES {
                    b.first[l] = (idx[2 * l] - base) as i32;
                    b.second[l] = (idx[2 * l + 1] - base) as i32;
                    b.w0[l] = w[2 * l];
                    b.w1[l] = w[2 * l + 1];
                }
                Some(b)
            })
            .collect::<Option<Vec<Block>>>()?;
        (!blocks.is_empty()).then_some(TwoTapRows { blocks })
    }

    /// The outputs of `outputs` that whole blocks cover.
    pub fn whole_blocks(&self, outputs: &Range<usize>) -> Range<usize> {
        let start = outputs.start.next_multiple_of(LANES);
        let end = (outputs.end / LANES).min(self.blocks.len()) * LANES;
        start..end.max(start)
    }

    /// Outputs `outputs` (whole blocks, from [`TwoTapRows::whole_blocks`]) of every row of
    /// `src` (rows of `in_len` inputs, input index `lo` first, covering every tap of those
    /// outputs) into `dst`: rows `width` apart, starting where the first row's outputs go.
    pub fn rows(
        &self,
        src: &[f32],
        in_len: usize,
        lo: usize,
        outputs: Range<usize>,
        dst: &mut [f32],
        width: usize,
    ) {
        let blocks = &self.blocks[outputs.start / LANES..outputs.end / LANES];
        let rows = src.len() / in_len.max(1);
        assert!(
            blocks.iter().all(|b| b.base >= lo && b.base - lo < in_len)
                && (rows == 0 || (rows - 1) * width + blocks.len() * LANES <= dst.len()),
            "two-tap rows: the row or the outputs do not cover the blocks"
        );
        // SAFETY: `new` made the blocks only where `avx512()` holds; the assertion keeps
        // every window start inside its row and every block's outputs inside `dst`.
        unsafe { run(blocks, src, in_len, lo, dst, width) }
    }
}

/// Block by block, with its indices and weights in registers, every row.
#[target_feature(enable = "avx512f")]
fn run(blocks: &[Block], src: &[f32], in_len: usize, lo: usize, dst: &mut [f32], width: usize) {
    let rows = src.len() / in_len.max(1);
    for (k, b) in blocks.iter().enumerate() {
        let at = b.base - lo;
        let left = in_len - at;
        let (m0, m1) = (mask(left), mask(left.saturating_sub(LANES)));
        let out = k * LANES;
        // SAFETY: the block's arrays are sixteen lanes each; loads stay inside row `r` of
        // `src` (lanes at or past its end masked off) and stores inside row `r` of `dst`
        // (`dst` starts at the first output's column of row 0, so row `r`'s block lies
        // inside it).
        unsafe {
            let i0: __m512i = _mm512_loadu_si512(b.first.as_ptr().cast());
            let i1: __m512i = _mm512_loadu_si512(b.second.as_ptr().cast());
            let w0 = _mm512_loadu_ps(b.w0.as_ptr());
            let w1 = _mm512_loadu_ps(b.w1.as_ptr());
            for r in 0..rows {
                let p = src.as_ptr().add(r * in_len + at);
                let a = _mm512_maskz_loadu_ps(m0, p);
                let c = _mm512_maskz_loadu_ps(m1, p.add(LANES));
                let x0 = _mm512_permutex2var_ps(a, i0, c);
                let x1 = _mm512_permutex2var_ps(a, i1, c);
                let y = _mm512_fmadd_ps(w1, x1, _mm512_mul_ps(w0, x0));
                _mm512_storeu_ps(dst.as_mut_ptr().add(r * width + out), y);
            }
        }
    }
}

/// The first `min(n, 16)` lanes.
#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    ((1u32 << n.min(LANES)) - 1) as __mmask16
}
