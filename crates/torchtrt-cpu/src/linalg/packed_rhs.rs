//! f32 products whose right operand is a constant (a MatMul's weights): the weights `B`
//! (`depth × cols`) are packed once, when the engine is prepared, into panels of [`NR`]
//! columns (on AVX2, [`super::packed_avx2::COLS`]) stored step-major (`[panel][k][NR]`, the
//! last panel zero-padded; on AVX2 a block of the depth at a time); the left operand's rows
//! are read in place. On AVX-512 each register tile of [`MR`] rows × [`NR`] columns keeps
//! its sums in registers over the whole depth, one broadcast of `A` per row and step
//! against the panel's vectors, and is stored once, with the bias added; AVX2 runs
//! [`super::packed_rhs_avx2`]. Nothing is packed or allocated per call, unlike a general
//! product that packs both operands every time.

use rayon::prelude::*;

use super::Epilogue;

/// Rows of one register tile.
const MR: usize = 6;
/// Lanes of one vector.
const LANES: usize = 16;
/// Columns of one panel and one register tile: four vectors.
const NR: usize = 4 * LANES;
/// f32 values in one cache line.
const LINE: usize = 16;
/// Steps ahead a tile whose panel is not in cache fetches it.
#[cfg(target_arch = "x86_64")]
const COLD_AHEAD: usize = 16;
/// Packed weights up to this size (all panels stay in L2) are run tile by tile, every
/// panel of a row tile in turn, so that each task reads its rows of the left operand once;
/// larger ones panel by panel. convnext_tiny's 384 → 96 products, run panel by panel, did
/// not speed up on a second thread: each task streamed all the rows for one panel.
const TILE_MAJOR_BYTES: usize = 512 * 1024;
/// Most steps of one block of the depth when products run panel by panel: a panel's block
/// (`KC · NR` values, 32 KiB) stays in L1 while every row tile of a task passes over it,
/// the partial sums going through the output between blocks. Without it each row tile
/// streamed the whole panel from L2 (ResNet's 3×3 layers on 7×7: a 1.2 MB panel).
const KC: usize = 128;

/// Row `r0` and the row count of tile `tile` of `tiles`, the rows spread evenly (tiles of
/// [`MR`] and `MR − 1` rows rather than a last tile of one or two).
fn row_split(rows: usize, tiles: usize, tile: usize) -> (usize, usize) {
    let (base, extra) = (rows / tiles, rows % tiles);
    (
        tile * base + tile.min(extra),
        base + usize::from(tile < extra),
    )
}

/// What a product adds to its sums, and applies, before it stores them.
#[derive(Clone, Copy)]
pub(crate) struct Finish<'a> {
    /// One value per column, added first.
    pub(crate) bias: Option<&'a [f32]>,
    /// `rows × cols`, row-major like the output, added after the bias.
    pub(crate) residual: Option<&'a [f32]>,
    /// Applied last.
    pub(crate) epilogue: Epilogue,
}

impl<'a> Finish<'a> {
    /// The bias alone.
    pub(crate) fn bias(bias: Option<&'a [f32]>) -> Finish<'a> {
        Finish {
            bias,
            residual: None,
            epilogue: Epilogue::Identity,
        }
    }
}

/// The right operand of a product, `depth × cols`, packed into column panels.
pub(crate) struct PackedRhs {
    depth: usize,
    cols: usize,
    panels: usize,
    /// Columns per panel: [`NR`] with AVX-512, fewer with AVX2 only.
    panel_cols: usize,
    data: Vec<f32>,
    /// Whether products run tile by tile ([`TILE_MAJOR_BYTES`]) rather than panel by panel.
    tile_major: bool,
}

impl PackedRhs {
    /// Packs `b`, whose element `(k, j)` is `b[k · row_stride + j · col_stride]`; `None`
    /// when the CPU lacks AVX2, a size is zero, or `b` is too short.
    pub(crate) fn new(
        b: &[f32],
        depth: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Option<PackedRhs> {
        let panel_cols = panel_cols()?;
        if depth == 0 || cols == 0 {
            return None;
        }
        let last = (depth - 1)
            .checked_mul(row_stride)?
            .checked_add((cols - 1).checked_mul(col_stride)?)?;
        if last >= b.len() {
            return None;
        }
        let panels = cols.div_ceil(panel_cols);
        let mut data = vec![0f32; panels.checked_mul(depth)?.checked_mul(panel_cols)?];
        for k in 0..depth {
            for p in 0..panels {
                let at = step_offset(panel_cols, depth, panels, k, p);
                let step = &mut data[at..at + panel_cols];
                for (c, x) in step.iter_mut().enumerate() {
                    let j = p * panel_cols + c;
                    if j < cols {
                        *x = b[k * row_stride + j * col_stride];
                    }
                }
            }
        }
        let tile_major = data.len() * size_of::<f32>() <= TILE_MAJOR_BYTES;
        Some(PackedRhs {
            depth,
            cols,
            panels,
            panel_cols,
            data,
            tile_major,
        })
    }

    /// Inner dimension.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// `out = epilogue(a · B + bias + residual)` for `rows` rows of `a` (row `i` at
    /// `a[i · lda..]`, `depth` elements) into `out` (`rows × cols`, row-major), split over
    /// `threads` workers.
    pub(crate) fn product(
        &self,
        a: &[f32],
        lda: usize,
        rows: usize,
        finish: Finish<'_>,
        out: &mut [f32],
        threads: usize,
    ) -> Result<(), String> {
        let Finish { bias, residual, .. } = finish;
        let (depth, cols) = (self.depth, self.cols);
        let a_needed = if rows == 0 {
            0
        } else {
            (rows - 1)
                .checked_mul(lda)
                .and_then(|n| n.checked_add(depth))
                .ok_or("packed product: the left operand's size overflows")?
        };
        if lda < depth
            || a.len() < a_needed
            || out.len() != rows * cols
            || bias.is_some_and(|b| b.len() != cols)
            || residual.is_some_and(|r| r.len() != out.len())
        {
            return Err(format!(
                "packed product: {rows} rows of {} (stride {lda}) · {depth}×{cols}{}{} into {} \
                 elements do not fit",
                a.len(),
                bias.map_or(String::new(), |b| format!(" + bias of {}", b.len())),
                residual.map_or(String::new(), |r| format!(" + residual of {}", r.len())),
                out.len()
            ));
        }
        if rows == 0 {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        {
            if panel_cols() != Some(self.panel_cols) {
                return Err("packed product: the weights were packed for another CPU".into());
            }
            if self.panel_cols != NR {
                let product = super::packed_rhs_avx2::Product {
                    weights: &self.data,
                    depth,
                    cols,
                    a,
                    lda,
                    rows,
                    finish,
                };
                return product.run(out, threads);
            }
            let row_tiles = rows.div_ceil(MR);
            let work = self.panels * row_tiles;
            let panel_len = depth * NR;
            let share = panel_len.div_ceil(row_tiles).next_multiple_of(LINE);
            let tasks = work.min(threads.max(1) * 4).max(1);
            let tile_major = self.tile_major;
            let out_ptr = SendPtr(out.as_mut_ptr());
            let blocks = if tile_major { 1 } else { depth.div_ceil(KC) };
            let kc = depth.div_ceil(blocks);
            let coords = |w: usize| {
                if tile_major {
                    (w % self.panels, w / self.panels)
                } else {
                    (w / row_tiles, w % row_tiles)
                }
            };
            let run = |t: usize| {
                let (from, to) = (work * t / tasks, work * (t + 1) / tasks);
                let mut first_of_run = from;
                while first_of_run < to {
                    let (panel, _) = coords(first_of_run);
                    let end = if tile_major {
                        first_of_run + 1
                    } else {
                        to.min((panel + 1) * row_tiles)
                    };
                    let j0 = panel * NR;
                    let width = NR.min(cols - j0);
                    let vectors = width.div_ceil(LANES);
                    for block in 0..blocks {
                        let k0 = block * kc;
                        let steps = kc.min(depth - k0);
                        for w in first_of_run..end {
                            let (_, tile) = coords(w);
                            let (r0, tile_rows) = row_split(rows, row_tiles, tile);
                            let ahead = match panel + 1 < self.panels && block == 0 {
                                true => {
                                    &self.data[(panel + 1) * panel_len..(panel + 2) * panel_len]
                                }
                                false => &[],
                            };
                            let ahead = &ahead[(tile * share).min(ahead.len())..];
                            let ahead = &ahead[..share.min(ahead.len())];
                            let step = Step {
                                a: a[r0 * lda + k0..].as_ptr(),
                                lda,
                                ahead: ahead.as_ptr(),
                                ahead_lines: ahead.len() / LINE,
                                cold: w == first_of_run,
                                b: self.data[(panel * depth + k0) * NR..].as_ptr(),
                                depth: steps,
                                first: block == 0,
                                last: block + 1 == blocks,
                                bias: bias.map(|b| b[j0..].as_ptr()),
                                residual: residual.map(|r| r[r0 * cols + j0..].as_ptr()),
                                epilogue: finish.epilogue,
                                c: out_ptr.at(r0 * cols + j0),
                                ldc: cols,
                                rows: tile_rows,
                                mask: u16::MAX >> (vectors * LANES - width),
                            };
                            // SAFETY: the checks above keep the reads of `a` (rows r0..,
                            // steps k0.. of `depth`), of the panel, the bias and the
                            // residual (laid out as `out`) inside their slices; tiles are
                            // disjoint, so each output element is written by one task only.
                            unsafe { dispatch(vectors, &step) }
                        }
                    }
                    first_of_run = end;
                }
            };
            if tasks == 1 {
                run(0);
            } else {
                (0..tasks).into_par_iter().for_each(run);
            }
            Ok(())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = threads;
            Err("packed product: this CPU lacks AVX2".into())
        }
    }
}

/// Where step `k` of panel `p` starts in weights of `depth` steps packed into `panels`
/// panels of `panel_cols`: panel after panel on AVX-512, block-major on AVX2
/// ([`super::packed_rhs_avx2::step_offset`]).
fn step_offset(panel_cols: usize, depth: usize, panels: usize, k: usize, p: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if panel_cols != NR {
        return super::packed_rhs_avx2::step_offset(depth, panels, k, p);
    }
    let _ = panels;
    (p * depth + k) * panel_cols
}

/// Columns per packed panel on this CPU: [`NR`] with AVX-512, three AVX2 vectors without;
/// `None` without AVX2.
fn panel_cols() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::v4() {
            return Some(NR);
        }
        if crate::simd::v3() {
            return Some(super::packed_avx2::COLS);
        }
    }
    None
}

/// The output of a product, shared by tasks that write disjoint tiles of it.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);

impl SendPtr {
    /// The address `offset` elements on (not dereferenced here).
    pub(super) fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}
// SAFETY: tasks write disjoint tiles through it (see `product`).
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// One register tile's work.
#[cfg(target_arch = "x86_64")]
struct Step {
    /// The tile's first row of the left operand; rows `lda` apart.
    a: *const f32,
    lda: usize,
    /// The tile's share of the next panel, `ahead_lines` cache lines, fetched into L2
    /// while this tile computes (one line every few steps): the next panel's first tile
    /// then finds it in cache instead of waiting on memory at every step (weights read
    /// once per run come from DRAM).
    ahead: *const f32,
    ahead_lines: usize,
    /// No earlier tile fetched this tile's panel ahead (the first tile of a task): the tile
    /// then fetches its own panel [`COLD_AHEAD`] steps ahead.
    cold: bool,
    /// The panel's block: `depth` steps of [`NR`] values.
    b: *const f32,
    depth: usize,
    /// The block is the first of the depth (the sums start at zero, not at the tile's
    /// partial sums in `c`) and the last (the sums are finished and stored).
    first: bool,
    last: bool,
    /// The bias of the tile's first column.
    bias: Option<*const f32>,
    /// The residual of the tile's first element, rows `ldc` apart.
    residual: Option<*const f32>,
    epilogue: Epilogue,
    /// The destination tile, rows `ldc` apart.
    c: *mut f32,
    ldc: usize,
    /// Valid rows.
    rows: usize,
    /// Valid lanes of the last vector.
    mask: u16,
}

/// Runs the tile kernel for `vectors` vectors and `s.rows` rows.
///
/// # Safety
/// As [`tile`].
#[cfg(target_arch = "x86_64")]
unsafe fn dispatch(vectors: usize, s: &Step) {
    macro_rules! by_rows {
        ($nv:literal) => {
            match s.rows {
                1 => tile::<$nv, 1>(s),
                2 => tile::<$nv, 2>(s),
                3 => tile::<$nv, 3>(s),
                4 => tile::<$nv, 4>(s),
                5 => tile::<$nv, 5>(s),
                _ => tile::<$nv, MR>(s),
            }
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        match vectors {
            1 => by_rows!(1),
            2 => by_rows!(2),
            3 => by_rows!(3),
            _ => by_rows!(4),
        }
    }
}

/// One `R × 16·NV` tile over one block of the depth (`R` = `s.rows`).
///
/// # Safety
/// The CPU has AVX-512F; `s.a` rows `0..R` hold `s.depth` elements each; the panel holds
/// `s.depth · NR`; the bias and the residual the masked lanes; the tile's masked lanes at
/// `s.c` are writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const NV: usize, const R: usize>(s: &Step) {
    use std::arch::x86_64::*;
    let zero = _mm512_setzero_ps();
    let lane_mask = |v: usize| if v + 1 == NV { s.mask } else { u16::MAX };
    let mut acc = [[zero; NV]; R];
    // SAFETY (whole body): every pointer stays inside the regions of the contract.
    unsafe {
        if !s.first {
            for (r, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_maskz_loadu_ps(lane_mask(v), s.c.add(r * s.ldc + v * LANES));
                }
            }
        }
        let rows: [*const f32; R] = std::array::from_fn(|r| s.a.add(r * s.lda));
        let mut b = s.b;
        let every = (s.depth / s.ahead_lines.max(1)).max(1);
        let (mut countdown, mut fetched) = (0, 0);
        for k in 0..s.depth {
            if countdown == 0 {
                if fetched < s.ahead_lines {
                    _mm_prefetch::<_MM_HINT_T1>(s.ahead.add(fetched * LINE).cast());
                    fetched += 1;
                }
                countdown = every;
            }
            countdown -= 1;
            if s.cold {
                for line in 0..NR / LINE {
                    _mm_prefetch::<_MM_HINT_T0>(
                        b.wrapping_add(COLD_AHEAD * NR + line * LINE).cast(),
                    );
                }
            }
            let mut bv = [zero; NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm512_loadu_ps(b.add(v * LANES));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let w = _mm512_set1_ps(*rows[r].add(k));
                for (x, &bx) in row.iter_mut().zip(&bv) {
                    *x = _mm512_fmadd_ps(w, bx, *x);
                }
            }
            b = b.add(NR);
        }
        store::<NV, R>(s, &acc);
    }
}

/// Stores a tile's sums: partial sums as they are, the last with the bias, residual and
/// epilogue. Not inlined: the epilogue's
/// constants (SiLU's polynomial) would otherwise take registers across the tile's loop,
/// and its 24 sums would be spilled to the stack at every step.
///
/// # Safety
/// As [`tile`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn store<const NV: usize, const R: usize>(
    s: &Step,
    acc: &[[std::arch::x86_64::__m512; NV]; R],
) {
    use std::arch::x86_64::*;
    let lane_mask = |v: usize| if v + 1 == NV { s.mask } else { u16::MAX };
    // SAFETY (whole body): every pointer stays inside the regions of the contract.
    unsafe {
        if !s.last {
            for (r, row) in acc.iter().enumerate() {
                for (v, x) in row.iter().enumerate() {
                    _mm512_mask_storeu_ps(s.c.add(r * s.ldc + v * LANES), lane_mask(v), *x);
                }
            }
            return;
        }
        let bias: [__m512; NV] = std::array::from_fn(|v| match s.bias {
            Some(p) => _mm512_maskz_loadu_ps(lane_mask(v), p.add(v * LANES)),
            None => _mm512_setzero_ps(),
        });
        for (r, row) in acc.iter().enumerate() {
            for (v, x) in row.iter().enumerate() {
                let m = lane_mask(v);
                let mut y = _mm512_add_ps(*x, bias[v]);
                if let Some(res) = s.residual {
                    let add = _mm512_maskz_loadu_ps(m, res.add(r * s.ldc + v * LANES));
                    y = _mm512_add_ps(y, add);
                }
                let y = s.epilogue.vector(y);
                let p = s.c.add(r * s.ldc + v * LANES);
                if m == u16::MAX {
                    _mm512_storeu_ps(p, y);
                } else {
                    _mm512_mask_storeu_ps(p, m, y);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use torchtrt_testing::values;

    /// Every tile shape — rows 1..2·MR+1, columns across vector, strip and panel edges,
    /// depth 1 and long (blocks of the depth), transposed weights, a bias, a residual and a
    /// ReLU, strided left rows, tile- and panel-major order — against the naive sum in f64,
    /// on this CPU's level (AVX-512's panels, or AVX2's strips and tiles).
    #[test]
    fn products_match_the_naive_sum() {
        if panel_cols().is_none() {
            println!("skipped: no AVX2");
            return;
        }
        let mut case = 0u64;
        for rows in [1, 4, 5, 6, 7, 9, 13] {
            for cols in [1, 7, 8, 15, 16, 17, 23, 24, 25, 49, 64, 65, 100, 200] {
                for depth in [1, 3, 70, 300] {
                    for transposed in [false, true] {
                        case += 1;
                        let lda = depth + (case as usize % 3);
                        let a = values(rows * lda, case);
                        let b = values(depth * cols, case + 1000);
                        let bias = case.is_multiple_of(2).then(|| values(cols, case + 2000));
                        let residual = (case % 5 < 2).then(|| values(rows * cols, case + 3000));
                        let relu = case % 4 == 1;
                        let (rs, cs) = if transposed { (1, depth) } else { (cols, 1) };
                        let mut packed = PackedRhs::new(&b, depth, cols, rs, cs).expect("packs");
                        packed.tile_major = case.is_multiple_of(3);
                        let mut out = vec![f32::NAN; rows * cols];
                        let finish = Finish {
                            bias: bias.as_deref(),
                            residual: residual.as_deref(),
                            epilogue: if relu {
                                Epilogue::Relu
                            } else {
                                Epilogue::Identity
                            },
                        };
                        packed
                            .product(&a, lda, rows, finish, &mut out, 2)
                            .expect("runs");
                        for i in 0..rows {
                            for j in 0..cols {
                                let mut want: f64 = bias.as_ref().map_or(0.0, |b| b[j].into());
                                for k in 0..depth {
                                    want +=
                                        f64::from(a[i * lda + k]) * f64::from(b[k * rs + j * cs]);
                                }
                                if let Some(r) = &residual {
                                    want += f64::from(r[i * cols + j]);
                                }
                                if relu {
                                    want = want.max(0.0);
                                }
                                let got = f64::from(out[i * cols + j]);
                                assert!(
                                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                    "rows {rows} cols {cols} depth {depth} t {transposed}: \
                                     ({i},{j}) {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Products large enough to be cut into chunks of depth blocks and groups of rows on
    /// AVX2 (and into blocks on AVX-512), on one and two threads, against the naive sum.
    #[test]
    fn large_products_match_the_naive_sum() {
        if panel_cols().is_none() {
            return;
        }
        for (case, (rows, depth, cols)) in [(120, 600, 200), (400, 256, 200), (37, 3000, 30)]
            .into_iter()
            .enumerate()
        {
            let case = case as u64 * 10;
            let a = values(rows * depth, case);
            let b = values(depth * cols, case + 1);
            let bias = values(cols, case + 2);
            let residual = values(rows * cols, case + 3);
            let packed = PackedRhs::new(&b, depth, cols, cols, 1).expect("packs");
            let finish = Finish {
                bias: Some(&bias),
                residual: Some(&residual),
                epilogue: Epilogue::Relu,
            };
            let want: Vec<f64> = (0..rows * cols)
                .map(|e| {
                    let (i, j) = (e / cols, e % cols);
                    let sum: f64 = (0..depth)
                        .map(|k| f64::from(a[i * depth + k]) * f64::from(b[k * cols + j]))
                        .sum();
                    (sum + f64::from(bias[j]) + f64::from(residual[e])).max(0.0)
                })
                .collect();
            for threads in [1, 2] {
                let mut out = vec![f32::NAN; rows * cols];
                packed
                    .product(&a, depth, rows, finish, &mut out, threads)
                    .expect("runs");
                for (e, (&got, &want)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{rows}×{depth}×{cols} on {threads}: element {e} {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn sizes_that_do_not_fit_are_errors() {
        if panel_cols().is_none() {
            return;
        }
        let b = values(12, 1);
        assert!(
            PackedRhs::new(&b, 4, 4, 4, 1).is_none(),
            "13 elements needed"
        );
        let packed = PackedRhs::new(&b, 3, 4, 4, 1).expect("packs");
        let mut out = vec![0.0; 8];
        let none = Finish::bias(None);
        assert!(packed.product(&[0.0; 5], 3, 2, none, &mut out, 1).is_err());
        assert!(packed.product(&[0.0; 6], 2, 2, none, &mut out, 1).is_err());
        assert!(
            packed
                .product(&[0.0; 6], 3, 2, Finish::bias(Some(&[0.0; 3])), &mut out, 1)
                .is_err()
        );
        assert!(
            packed
                .product(&[0.0; 6], 3, 2, none, &mut out[..7], 1)
                .is_err()
        );
        let short = Finish {
            residual: Some(&[0.0; 7]),
            ..none
        };
        assert!(packed.product(&[0.0; 6], 3, 2, short, &mut out, 1).is_err());
        assert!(packed.product(&[0.0; 6], 3, 2, none, &mut out, 1).is_ok());
    }
}
