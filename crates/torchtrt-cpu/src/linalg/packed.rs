//! f32 products for convolution on AVX-512 (and on AVX2, [`super::packed_avx2`]), after
//! MLAS: the weights (the left operand) are packed once into panels of [`MR`] rows, the
//! right operand (an im2col tile, a 1×1 layer's input, or a stride-1 layer's padded image
//! as a [`Grid`]) is read in place, and tiles of [`MR`] rows × up to [`NR`] columns
//! accumulate in registers over blocks of at most [`KC`] inner steps. The bias starts a
//! tile; a residual and the fused activation are applied to it before its last store.

use std::ops::Range;

use super::Epilogue;
#[cfg(target_arch = "x86_64")]
use super::packed_avx2;

/// Rows (output channels) of one packed panel and one register tile.
pub(crate) const MR: usize = 8;
/// Lanes of one vector.
const LANES: usize = 16;
/// Most columns (output positions) of one register tile: three vectors.
pub(crate) const NR: usize = 3 * LANES;
/// Most inner steps per block: one panel's `MR × KC` weights stay in L1 while it passes
/// over every column of the block, whose rows of the right operand stay in L2. The depth is
/// cut into blocks of equal size (144 steps are one block, not 128 + 16).
#[cfg(target_arch = "x86_64")]
const KC: usize = 256;

/// True when this CPU runs the packed kernels: with AVX-512 in the tiles below, with AVX2
/// in [`super::packed_avx2`]'s.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::v3()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when this CPU reads a padded image in place ([`Rhs::Grid`]): it has AVX-512.
pub(crate) fn grids() -> bool {
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
    /// lacks AVX2 or `w` has another size.
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

/// The right operand of a [`Block`].
#[derive(Clone, Copy)]
pub(crate) enum Rhs<'a> {
    /// `depth` rows of the block's columns, row `k` at `data[k · ldb..]`; output column `j`
    /// is stored at `j`.
    Rows {
        /// The elements.
        data: &'a [f32],
        /// Distance between rows.
        ldb: usize,
    },
    /// A stride-1 convolution's (padded) image read in place.
    Grid(Grid<'a>),
}

/// The right operand of a stride-1 convolution without im2col: the outputs are computed on
/// a grid of rows of `width` positions (the padded input's row length), of which the first
/// `valid` of each row are outputs and the rest are skipped on store. Tap `k` of grid
/// position `g` is `data[offsets[k] + g]`; the block's column `j` is grid position
/// `start + j`, and it is stored at its index among the outputs ([`Grid::packed`]).
#[derive(Clone, Copy)]
pub(crate) struct Grid<'a> {
    /// The padded image, one plane per input channel.
    pub(crate) data: &'a [f32],
    /// Offset of each tap (input channel, window position) in `data`.
    pub(crate) offsets: &'a [usize],
    /// Grid position of the block's first column.
    pub(crate) start: usize,
    /// Positions per grid row.
    pub(crate) width: usize,
    /// Outputs per grid row (at most `width`).
    pub(crate) valid: usize,
}

impl Grid<'_> {
    /// Index among the outputs of the first output at or after grid position `g`.
    pub(crate) fn packed(&self, g: usize) -> usize {
        g / self.width * self.valid + (g % self.width).min(self.valid)
    }

    /// The store mask of the 16 grid positions from `g`, of which the first `lanes` are
    /// columns of the block.
    #[cfg(target_arch = "x86_64")]
    fn mask(&self, g: usize, lanes: usize) -> u16 {
        let lanes = lanes.min(LANES) as isize;
        let below = |lane: isize| (1u32 << lane.clamp(0, lanes)) - 1;
        let (width, valid) = (self.width as isize, self.valid as isize);
        let mut mask = 0;
        let mut row = -((g % self.width) as isize);
        while row < lanes {
            mask |= below(row + valid) & !below(row);
            row += width;
        }
        mask as u16
    }
}

/// One output block of a product with [`PackedLhs`]: rows `rows` of group `group` times
/// `n` columns of the right operand.
pub(crate) struct Block<'a> {
    /// The group.
    pub(crate) group: usize,
    /// Rows within the group; the start is a multiple of [`MR`].
    pub(crate) rows: Range<usize>,
    /// The right operand.
    pub(crate) rhs: Rhs<'a>,
    /// Columns.
    pub(crate) n: usize,
    /// The group's bias, one per row of the group.
    pub(crate) bias: Option<&'a [f32]>,
    /// The activation applied last.
    pub(crate) epilogue: Epilogue,
    /// The inner steps taken, as ranges in order, their rows of the right operand following
    /// one another (a convolution's taps that read the input); `None`: all of them.
    pub(crate) steps: Option<&'a [Range<usize>]>,
}

/// Writes `epilogue(bias + lhs · rhs + residual)` for `block` into the `rows × n` block at
/// `dst` whose rows lie `ldc` elements apart; `residual`, when given, has the same layout.
/// With a [`Grid`], column `j` of row `i` is `dst + i · ldc + grid.packed(grid.start + j)`
/// and columns that are no output are not stored.
///
/// # Safety
/// Every element `dst + i · ldc + j` (`i < rows.len()`, `j < n`; with a grid, `j` each
/// stored index) must be valid for writes and touched by no one else during the call, and
/// the same elements of `residual` valid for reads.
pub(crate) unsafe fn run_block(
    lhs: &PackedLhs,
    block: &Block<'_>,
    dst: *mut f32,
    residual: Option<*const f32>,
    ldc: usize,
) -> Result<(), String> {
    let Block { group, n, .. } = *block;
    let rows = block.rows.clone();
    let depth = lhs.depth;
    let all = 0..depth;
    let ranges = block.steps.unwrap_or(std::slice::from_ref(&all));
    let taken: usize = ranges.iter().map(|r| r.len()).sum();
    let steps_fit = ranges.iter().all(|r| r.start < r.end && r.end <= depth);
    let operand = match block.rhs {
        Rhs::Rows { data, ldb } => ldb >= n && taken > 0 && data.len() >= (taken - 1) * ldb + n,
        Rhs::Grid(g) => {
            block.steps.is_none()
                && g.offsets.len() == depth
                && g.valid <= g.width
                && g.width > 0
                && g.offsets.iter().all(|&o| {
                    o.checked_add(g.start + n)
                        .is_some_and(|end| end <= g.data.len())
                })
        }
    };
    if group >= lhs.groups
        || rows.end > lhs.rows
        || !rows.start.is_multiple_of(MR)
        || n == 0
        || !steps_fit
        || !operand
        || block.bias.is_some_and(|b| b.len() < rows.end)
    {
        return Err(format!(
            "packed gemm: block of rows {rows:?} × {n} of group {group} does not fit weights \
             of {} groups × {} rows × {depth}, or its right operand",
            lhs.groups, lhs.rows,
        ));
    }
    #[cfg(target_arch = "x86_64")]
    {
        if !available() {
            return Err("packed gemm: this CPU lacks AVX2".into());
        }
        let wide = crate::simd::v4();
        if !wide && matches!(block.rhs, Rhs::Grid(_)) {
            return Err("packed gemm: reading a padded image in place needs AVX-512".into());
        }
        let grid_stores = match block.rhs {
            Rhs::Grid(g) => grid_stores(&g, n),
            Rhs::Rows { .. } => Vec::new(),
        };
        let mut blocks = Vec::new();
        let mut row_of = 0;
        for r in ranges {
            let step = r.len().div_ceil(r.len().div_ceil(KC));
            for k0 in r.clone().step_by(step) {
                let kc = step.min(r.end - k0);
                blocks.push((k0, kc, row_of + k0 - r.start));
            }
            row_of += r.len();
        }
        let last = blocks.len() - 1;
        let start = |index: usize, r0: usize| match (index, block.bias) {
            (0, Some(b)) => Start::Bias(b[r0..].as_ptr()),
            (0, None) => Start::Zero,
            _ => Start::Dst,
        };
        if let (false, Rhs::Rows { data, ldb }) = (wide, block.rhs) {
            for (index, &(k0, kc, b_row)) in blocks.iter().enumerate() {
                for j0 in (0..n).step_by(packed_avx2::COLS) {
                    for r0 in rows.clone().step_by(MR) {
                        let i = r0 - rows.start;
                        let panel = group * lhs.panels + r0 / MR;
                        let panel = packed_avx2::Panel {
                            a: lhs.data[(panel * depth + k0) * MR..].as_ptr(),
                            a_rows: 1,
                            a_steps: MR,
                            b: data[b_row * ldb + j0..].as_ptr(),
                            ldb,
                            kc,
                            c: dst.wrapping_add(i * ldc + j0),
                            ldc,
                            rows: MR.min(rows.end - r0),
                            width: packed_avx2::COLS.min(n - j0),
                            start: start(index, r0),
                            finish: (index == last).then(|| {
                                (
                                    block.epilogue,
                                    residual.map(|r| r.wrapping_add(i * ldc + j0)),
                                )
                            }),
                        };
                        // SAFETY: the checks above keep every read of `a` and `b` inside the
                        // packed panel and the right operand; the caller's contract covers
                        // the tile's rows and columns of `c` and the residual; `v3()` holds.
                        unsafe { packed_avx2::panel(&panel) };
                    }
                }
            }
            return Ok(());
        }
        for (index, &(k0, kc, b_row)) in blocks.iter().enumerate() {
            for r0 in rows.clone().step_by(MR) {
                for j0 in (0..n).step_by(NR) {
                    let width = NR.min(n - j0);
                    let vectors = width.div_ceil(LANES);
                    let mask = u16::MAX >> (vectors * LANES - width);
                    let panel = group * lhs.panels + r0 / MR;
                    let i = r0 - rows.start;
                    let (b, (ldb, table), stores, at) = match block.rhs {
                        Rhs::Rows { data, ldb } => {
                            let stores = std::array::from_fn(|v| {
                                let m = if v + 1 == vectors { mask } else { u16::MAX };
                                (m, v * LANES)
                            });
                            let b = data[b_row * ldb + j0..].as_ptr();
                            (b, (ldb, std::ptr::null()), stores, j0)
                        }
                        Rhs::Grid(g) => {
                            let (stores, at) = grid_stores[j0 / NR];
                            let table = g.offsets[k0..].as_ptr();
                            (g.data[g.start + j0..].as_ptr(), (0, table), stores, at)
                        }
                    };
                    let a = lhs.data[(panel * depth + k0) * MR..].as_ptr();
                    let step = Step {
                        a,
                        next: if r0 + MR < rows.end && j0 + NR >= n {
                            a.wrapping_add(depth * MR)
                        } else {
                            std::ptr::null()
                        },
                        b,
                        ldb,
                        table,
                        kc,
                        c: dst.wrapping_add(i * ldc + at),
                        ldc,
                        rows: MR.min(rows.end - r0),
                        mask,
                        stores,
                        start: start(index, r0),
                        finish: (index == last).then(|| {
                            (
                                block.epilogue,
                                residual.map(|r| r.wrapping_add(i * ldc + at)),
                            )
                        }),
                    };
                    let grid = matches!(block.rhs, Rhs::Grid(_));
                    // SAFETY: the checks above keep every read of `a` and `b` inside the packed
                    // panel and the right operand; the caller's contract covers `c` and the
                    // residual for the tile's `rows` rows and stored columns.
                    unsafe {
                        match (vectors, grid) {
                            (1, false) => tile::<1, false>(&step),
                            (2, false) => tile::<2, false>(&step),
                            (_, false) => tile::<3, false>(&step),
                            (1, true) => tile::<1, true>(&step),
                            (2, true) => tile::<2, true>(&step),
                            (_, true) => tile::<3, true>(&step),
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
        Err("packed gemm: this CPU lacks AVX2".into())
    }
}

/// For each register tile of a grid block's `n` columns (one per [`NR`]): where each
/// vector's lanes are stored, packed (see [`Step::stores`]), and the tile's first output.
/// The same for every row panel and block of inner steps, so computed once per block.
#[cfg(target_arch = "x86_64")]
fn grid_stores(g: &Grid<'_>, n: usize) -> Vec<([(u16, usize); 3], usize)> {
    (0..n)
        .step_by(NR)
        .map(|j0| {
            let (first, width) = (g.start + j0, NR.min(n - j0));
            let stores = std::array::from_fn(|v| {
                let from = first + v * LANES;
                let lanes = width.saturating_sub(v * LANES);
                (g.mask(from, lanes), g.packed(from) - g.packed(first))
            });
            (stores, g.packed(first))
        })
        .collect()
}

/// How a tile's accumulators start.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) enum Start {
    /// At zero.
    Zero,
    /// At the bias of each row.
    Bias(*const f32),
    /// At the bias of each column (a product whose right operand holds the weights).
    Columns(*const f32),
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
    /// The right operand's first column: row `k` lies `k · ldb` further, or, on a grid,
    /// `table[k]`.
    b: *const f32,
    ldb: usize,
    table: *const usize,
    kc: usize,
    /// The destination tile, rows `ldc` apart.
    c: *mut f32,
    ldc: usize,
    /// Valid rows of the tile.
    rows: usize,
    /// Valid lanes of the last vector of the right operand.
    mask: u16,
    /// Per vector: the lanes stored and where the first goes (from `c`); on a grid the lanes
    /// are packed together.
    stores: [(u16, usize); 3],
    start: Start,
    /// On the last block: the activation and the residual tile (rows `ldc` apart).
    finish: Option<(Epilogue, Option<*const f32>)>,
}

/// Accumulates one `MR × 16·NV` tile over `s.kc` steps; `PACKED` stores the lanes of each
/// vector packed together (a [`Grid`]'s outputs) and loads the residual and earlier sums
/// the same way.
///
/// # Safety
/// The CPU has AVX-512F; `s.a` holds `kc · MR` elements; `s.b` rows hold the masked lanes;
/// the first `s.rows` rows of the tile at `s.c` (and the residual) are valid in the stored
/// lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const NV: usize, const PACKED: bool>(s: &Step) {
    use std::arch::x86_64::*;

    let load = |v: usize, p: *const f32| {
        let (m, at) = s.stores[v];
        // SAFETY: the stored lanes of the tile are valid (the contract).
        unsafe {
            if PACKED {
                let first = (1u32 << m.count_ones()) - 1;
                _mm512_maskz_expand_ps(m, _mm512_maskz_loadu_ps(first as u16, p.add(at)))
            } else {
                _mm512_maskz_loadu_ps(m, p.add(at))
            }
        }
    };
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
            Start::Columns(bias) => {
                for row in acc.iter_mut().take(s.rows) {
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = load(v, bias);
                    }
                }
            }
            Start::Dst => {
                for (r, row) in acc.iter_mut().enumerate() {
                    if r < s.rows {
                        for (v, x) in row.iter_mut().enumerate() {
                            *x = load(v, s.c.add(r * s.ldc));
                        }
                    }
                }
            }
        }
        let (mut a, mut row) = (s.a, s.b);
        for k in 0..s.kc {
            if !s.next.is_null() && k % 2 == 0 {
                _mm_prefetch::<_MM_HINT_T0>(s.next.wrapping_add(k * MR).cast());
            }
            let b = if PACKED {
                s.b.add(*s.table.add(k))
            } else {
                row
            };
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
            row = row.wrapping_add(s.ldb);
        }
        for (r, row) in acc.iter_mut().enumerate() {
            if r >= s.rows {
                break;
            }
            for (v, x) in row.iter_mut().enumerate() {
                if let Some((epilogue, residual)) = s.finish {
                    if let Some(res) = residual {
                        *x = _mm512_add_ps(*x, load(v, res.add(r * s.ldc)));
                    }
                    *x = epilogue.vector(*x);
                }
                let (m, at) = s.stores[v];
                let p = s.c.add(r * s.ldc + at);
                if PACKED {
                    let first = (1u32 << m.count_ones()) - 1;
                    _mm512_mask_storeu_ps(p, first as u16, _mm512_maskz_compress_ps(m, *x));
                } else if m == u16::MAX {
                    _mm512_storeu_ps(p, *x);
                } else {
                    _mm512_mask_storeu_ps(p, m, *x);
                }
            }
        }
    }
}
