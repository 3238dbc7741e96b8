//! f32 products for convolution on AVX-512, after MLAS: the weights (the left operand) are
//! packed once into panels of [`MR`] rows, the right operand (an im2col tile or a 1×1
//! layer's input) is read in place, and tiles of [`MR`] rows × up to [`NR`] columns
//! accumulate in registers over blocks of [`KC`] inner steps. The bias starts a tile; a
//! residual and the fused activation are applied to it before its last store.

use std::ops::Range;

use super::Epilogue;

/// Rows (output channels) of one packed panel and one register tile.
pub(crate) const MR: usize = 8;
/// Lanes of one vector.
const LANES: usize = 16;
/// Most columns (output positions) of one register tile: three vectors.
pub(crate) const NR: usize = 3 * LANES;
/// Inner steps per block: one panel's `MR × KC` weights stay in L1 while it passes over
/// every column of the block, whose `KC` rows of the right operand stay in L2.
#[cfg(target_arch = "x86_64")]
const KC: usize = 128;

/// True when this CPU runs the packed kernels.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::v4()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The weights of a grouped product, `groups` blocks of `rows × depth`, packed per group into
/// panels of [`MR`] rows stored step-major (`[panel][k][MR]`, the last panel zero-padded).
pub(crate) struct PackedLhs {
    groups: usize,
    rows: usize,
    depth: usize,
    panels: usize,
    data: Vec<f32>,
}

impl PackedLhs {
    /// Packs `w` (`groups · rows` rows of `depth` elements, row-major); `None` when the CPU
    /// lacks AVX-512 or `w` has another size.
    pub(crate) fn new(w: &[f32], groups: usize, rows: usize, depth: usize) -> Option<PackedLhs> {
        if !available() || depth == 0 || w.len() != groups * rows * depth {
            return None;
        }
        let panels = rows.div_ceil(MR);
        let mut data = vec![0f32; groups * panels * depth * MR];
        for (row, src) in w.chunks_exact(depth).enumerate() {
            let (g, r) = (row / rows, row % rows);
            let base = (g * panels + r / MR) * depth * MR + r % MR;
            for (k, &v) in src.iter().enumerate() {
                data[base + k * MR] = v;
            }
        }
        Some(PackedLhs {
            groups,
            rows,
            depth,
            panels,
            data,
        })
    }

    /// True when these weights are `groups` blocks of `rows × depth`.
    pub(crate) fn fits(&self, groups: usize, rows: usize, depth: usize) -> bool {
        (self.groups, self.rows, self.depth) == (groups, rows, depth)
    }
}

/// One output block of a product with [`PackedLhs`]: rows `rows` of group `group` times
/// `n` columns of the right operand.
pub(crate) struct Block<'a> {
    /// The group.
    pub(crate) group: usize,
    /// Rows within the group; the start is a multiple of [`MR`].
    pub(crate) rows: Range<usize>,
    /// The right operand: `depth` rows of `n` elements, row `k` at `k · ldb`.
    pub(crate) rhs: &'a [f32],
    /// Distance between rows of `rhs`.
    pub(crate) ldb: usize,
    /// Columns.
    pub(crate) n: usize,
    /// The group's bias, one per row of the group.
    pub(crate) bias: Option<&'a [f32]>,
    /// The activation applied last.
    pub(crate) epilogue: Epilogue,
}

/// Writes `epilogue(bias + lhs · rhs + residual)` for `block` into the `rows × n` block at
/// `dst` whose rows lie `ldc` elements apart; `residual`, when given, has the same layout.
///
/// # Safety
/// Every element `dst + i · ldc + j` (`i < rows.len()`, `j < n`) must be valid for writes and
/// touched by no one else during the call, and the same elements of `residual` valid for
/// reads.
pub(crate) unsafe fn run_block(
    lhs: &PackedLhs,
    block: &Block<'_>,
    dst: *mut f32,
    residual: Option<*const f32>,
    ldc: usize,
) -> Result<(), String> {
    let Block { group, n, ldb, .. } = *block;
    let rows = block.rows.clone();
    let depth = lhs.depth;
    if group >= lhs.groups
        || rows.end > lhs.rows
        || !rows.start.is_multiple_of(MR)
        || n == 0
        || ldb < n
        || block.rhs.len() < (depth - 1) * ldb + n
        || block.bias.is_some_and(|b| b.len() < rows.end)
    {
        return Err(format!(
            "packed gemm: block of rows {rows:?} × {n} of group {group} does not fit weights \
             of {} groups × {} rows × {depth}, or its {} operand elements (stride {ldb})",
            lhs.groups,
            lhs.rows,
            block.rhs.len()
        ));
    }
    #[cfg(target_arch = "x86_64")]
    {
        if !available() {
            return Err("packed gemm: this CPU lacks AVX-512".into());
        }
        for k0 in (0..depth).step_by(KC) {
            let kc = KC.min(depth - k0);
            for r0 in rows.clone().step_by(MR) {
                for j0 in (0..n).step_by(NR) {
                    let width = NR.min(n - j0);
                    let vectors = width.div_ceil(LANES);
                    let mask = u16::MAX >> (vectors * LANES - width);
                    let panel = group * lhs.panels + r0 / MR;
                    let i = r0 - rows.start;
                    let start = if k0 > 0 {
                        Start::Dst
                    } else {
                        block
                            .bias
                            .map_or(Start::Zero, |b| Start::Bias(b[r0..].as_ptr()))
                    };
                    let a = lhs.data[(panel * depth + k0) * MR..].as_ptr();
                    let step = Step {
                        a,
                        next: if r0 + MR < rows.end && j0 + NR >= n {
                            a.wrapping_add(depth * MR)
                        } else {
                            std::ptr::null()
                        },
                        b: block.rhs[k0 * ldb + j0..].as_ptr(),
                        ldb,
                        kc,
                        c: dst.wrapping_add(i * ldc + j0),
                        ldc,
                        rows: MR.min(rows.end - r0),
                        mask,
                        start,
                        finish: (k0 + kc == depth).then(|| {
                            (
                                block.epilogue,
                                residual.map(|r| r.wrapping_add(i * ldc + j0)),
                            )
                        }),
                    };
                    // SAFETY: the checks above keep every read of `a` and `b` inside the packed
                    // panel and `rhs`; the caller's contract covers `c` and the residual for the
                    // tile's `rows` rows and `n` columns.
                    unsafe {
                        match vectors {
                            1 => tile::<1>(&step),
                            2 => tile::<2>(&step),
                            _ => tile::<3>(&step),
                        }
                    }
                }
            }
        }
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (dst, residual, ldc);
        Err("packed gemm: this CPU lacks AVX-512".into())
    }
}

/// How a tile's accumulators start.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Start {
    /// At zero.
    Zero,
    /// At the bias of each row.
    Bias(*const f32),
    /// At the destination (a later block of inner steps).
    Dst,
}

/// One register tile's work.
#[cfg(target_arch = "x86_64")]
struct Step {
    /// `kc` steps of [`MR`] weights.
    a: *const f32,
    /// The weights of the next tile, prefetched while this one runs (null: none).
    next: *const f32,
    /// `kc` rows of the right operand, `ldb` apart.
    b: *const f32,
    ldb: usize,
    kc: usize,
    /// The destination tile, rows `ldc` apart.
    c: *mut f32,
    ldc: usize,
    /// Valid rows of the tile.
    rows: usize,
    /// Valid lanes of the last vector of each row.
    mask: u16,
    start: Start,
    /// On the last block: the activation and the residual tile (rows `ldc` apart).
    finish: Option<(Epilogue, Option<*const f32>)>,
}

/// Accumulates one `MR × 16·NV` tile over `s.kc` steps.
///
/// # Safety
/// The CPU has AVX-512F; `s.a` holds `kc · MR` elements; `s.b` rows hold the masked lanes;
/// the first `s.rows` rows of the tile at `s.c` (and the residual) are valid in the masked
/// lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const NV: usize>(s: &Step) {
    use std::arch::x86_64::*;
    let lane_mask = |v: usize| if v + 1 == NV { s.mask } else { u16::MAX };
    let zero = _mm512_setzero_ps();
    let mut acc = [[zero; NV]; MR];
    // SAFETY (whole body): every pointer below stays inside the regions of the contract.
    unsafe {
        match s.start {
            Start::Zero => {}
            Start::Bias(bias) => {
                for (r, row) in acc.iter_mut().enumerate() {
                    if r < s.rows {
                        *row = [_mm512_set1_ps(*bias.add(r)); NV];
                    }
                }
            }
            Start::Dst => {
                for (r, row) in acc.iter_mut().enumerate() {
                    if r < s.rows {
                        for (v, x) in row.iter_mut().enumerate() {
                            let p = s.c.add(r * s.ldc + v * LANES);
                            *x = _mm512_maskz_loadu_ps(lane_mask(v), p);
                        }
                    }
                }
            }
        }
        let (mut a, mut b) = (s.a, s.b);
        for k in 0..s.kc {
            if !s.next.is_null() && k % 2 == 0 {
                _mm_prefetch::<_MM_HINT_T0>(s.next.wrapping_add(k * MR).cast());
            }
            let mut bv = [zero; NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = if v + 1 == NV {
                    _mm512_maskz_loadu_ps(s.mask, b.add(v * LANES))
                } else {
                    _mm512_loadu_ps(b.add(v * LANES))
                };
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let w = _mm512_set1_ps(*a.add(r));
                for (x, &bx) in row.iter_mut().zip(&bv) {
                    *x = _mm512_fmadd_ps(w, bx, *x);
                }
            }
            a = a.add(MR);
            b = b.add(s.ldb);
        }
        for (r, row) in acc.iter_mut().enumerate() {
            if r >= s.rows {
                break;
            }
            for (v, x) in row.iter_mut().enumerate() {
                let at = r * s.ldc + v * LANES;
                if let Some((epilogue, residual)) = s.finish {
                    if let Some(res) = residual {
                        *x = _mm512_add_ps(*x, _mm512_maskz_loadu_ps(lane_mask(v), res.add(at)));
                    }
                    *x = match epilogue {
                        Epilogue::Identity => *x,
                        Epilogue::Relu => _mm512_max_ps(zero, *x),
                        Epilogue::LeakyRelu(alpha) => {
                            let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(*x, zero);
                            _mm512_mask_mul_ps(*x, neg, *x, _mm512_set1_ps(alpha as f32))
                        }
                        Epilogue::Clip(lo, hi) => _mm512_min_ps(
                            _mm512_set1_ps(hi as f32),
                            _mm512_max_ps(_mm512_set1_ps(lo as f32), *x),
                        ),
                    };
                }
                let m = lane_mask(v);
                if m == u16::MAX {
                    _mm512_storeu_ps(s.c.add(at), *x);
                } else {
                    _mm512_mask_storeu_ps(s.c.add(at), m, *x);
                }
            }
        }
    }
}
