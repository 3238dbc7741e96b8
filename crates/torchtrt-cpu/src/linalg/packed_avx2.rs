//! The packed products' register tiles for CPUs with AVX2 and FMA but no AVX-512: half of
//! a panel's rows ([`ROWS`]) × up to [`COLS`] columns accumulate in twelve 256-bit
//! registers, which leaves room for three vectors of the right operand and one broadcast
//! value of the left (sixteen registers in all). Each step takes seven loads for twelve
//! multiply-adds, so the two FMA pipes, not the loads, bound it. The callers walk every row
//! panel over one strip of [`COLS`] columns before the next, so the strip's rows stay in L1
//! and only the left operand (16 of the 112 bytes a step reads) comes from L2.
//!
//! The left operand is either packed weights ([`super::PackedLhs`]: a panel's rows side by
//! side, step after step) or a product's rows read in place ([`super::PackedRhs`], whose
//! right operand holds the weights); [`Panel::a_rows`] and [`Panel::a_steps`] say which.

use std::arch::x86_64::*;

use super::Epilogue;
use super::packed::{MR, Start};

/// Rows of one tile: half a packed panel.
const ROWS: usize = MR / 2;
/// Lanes of one vector.
const LANES: usize = 8;
/// Most columns of one tile: three vectors.
pub(super) const COLS: usize = 3 * LANES;

/// One panel's work on one strip: `rows` rows (at most [`MR`]) × `width` columns (at most
/// [`COLS`]) over `kc` inner steps.
pub(super) struct Panel {
    /// The left operand: row `r`'s value for step `k` is at `r · a_rows + k · a_steps`
    /// (packed weights: `1` and [`MR`], the panel's rows zero-padded; rows in place: their
    /// distance and `1`).
    pub(super) a: *const f32,
    pub(super) a_rows: usize,
    pub(super) a_steps: usize,
    /// The right operand's first column; row `k` lies `k · ldb` further.
    pub(super) b: *const f32,
    pub(super) ldb: usize,
    pub(super) kc: usize,
    /// The destination tile, rows `ldc` apart.
    pub(super) c: *mut f32,
    pub(super) ldc: usize,
    /// Valid rows.
    pub(super) rows: usize,
    /// Columns.
    pub(super) width: usize,
    pub(super) start: Start,
    /// On the last block of inner steps: the activation and the residual tile (rows `ldc`
    /// apart).
    pub(super) finish: Option<(Epilogue, Option<*const f32>)>,
}

/// One tile of a [`Panel`]: its first row and how many rows.
struct Tile {
    row: usize,
    rows: usize,
}

/// Accumulates the panel's strip: each half of its rows as one tile, or, for fewer than
/// eight columns of packed weights, all its rows at once ([`narrow`]).
///
/// # Safety
/// The CPU has AVX2 and FMA; `p.width ≤ COLS`; `p.a` holds the `kc` steps of the panel's
/// rows (with `a_rows == 1`, of all [`MR`] rows, the padding included); each of the `kc`
/// rows at `p.b` holds `width` elements; the first `rows` rows of `width` elements at `p.c`
/// (and at the residual) are valid, and `p.c`'s only this call's; with [`Start::Bias`],
/// `rows` biases, with [`Start::Columns`], `width`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn panel(p: &Panel) {
    let width = p.width;
    if width < LANES && p.a_rows == 1 {
        // SAFETY: as for the tiles below.
        unsafe { narrow(p) };
        return;
    }
    for row in (0..p.rows).step_by(ROWS) {
        let t = Tile {
            row,
            rows: ROWS.min(p.rows - row),
        };
        // SAFETY: the tile lies inside the panel (the caller's contract).
        unsafe {
            match (width.div_ceil(LANES), width.is_multiple_of(LANES)) {
                (1, true) => tile::<1, true>(p, &t),
                (2, true) => tile::<2, true>(p, &t),
                (_, true) => tile::<3, true>(p, &t),
                (1, false) => tile::<1, false>(p, &t),
                (2, false) => tile::<2, false>(p, &t),
                (_, false) => tile::<3, false>(p, &t),
            }
        }
    }
}

/// A strip of fewer than eight columns, the panel's [`MR`] rows along the lanes: each
/// step multiplies the step's weights (one vector) by each column's broadcast element, so
/// every lane does work (a tile of rows would fill `width` of eight).
///
/// # Safety
/// As [`panel`], with `p.width < 8`.
#[target_feature(enable = "avx2,fma")]
unsafe fn narrow(p: &Panel) {
    let width = p.width;
    macro_rules! columns {
        ($($w:literal)*) => {
            match width {
                // SAFETY: the panel has `width` columns.
                $($w => unsafe { narrow_sums::<$w>(p) },)*
                _ => unreachable!("a narrow strip has fewer than eight columns"),
            }
        };
    }
    let sums = columns!(1 2 3 4 5 6 7);
    for (r, sums) in sums.iter().enumerate().take(p.rows) {
        // SAFETY: row `r` of the panel holds `width` columns at `c` (the contract).
        unsafe {
            let c = p.c.add(r * p.ldc);
            let mut row = *sums;
            let row = &mut row[..width];
            match p.start {
                Start::Zero => {}
                Start::Bias(bias) => row.iter_mut().for_each(|x| *x += *bias.add(r)),
                Start::Columns(bias) => {
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += *bias.add(j);
                    }
                }
                Start::Dst => {
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += *c.add(j);
                    }
                }
            }
            if let Some((epilogue, residual)) = p.finish {
                if let Some(res) = residual {
                    let res = res.add(r * p.ldc);
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += *res.add(j);
                    }
                }
                epilogue.apply(row);
            }
            std::ptr::copy_nonoverlapping(row.as_ptr(), c, width);
        }
    }
}

/// The products of [`narrow`]'s `W` columns: `[row][column]`.
///
/// # Safety
/// As [`narrow`] with `width = W`.
#[target_feature(enable = "avx2,fma")]
unsafe fn narrow_sums<const W: usize>(p: &Panel) -> [[f32; LANES]; LANES] {
    let mut acc = [_mm256_setzero_ps(); W];
    // SAFETY: reads `kc` steps of [`MR`] weights at `a` and `W` elements of each row at `b`.
    unsafe {
        let (mut a, mut b) = (p.a, p.b);
        for _ in 0..p.kc {
            let w = _mm256_loadu_ps(a);
            for (j, x) in acc.iter_mut().enumerate() {
                *x = _mm256_fmadd_ps(w, _mm256_broadcast_ss(&*b.add(j)), *x);
            }
            a = a.add(p.a_steps);
            b = b.wrapping_add(p.ldb);
        }
    }
    let mut columns = [[0f32; LANES]; LANES];
    for (column, x) in columns.iter_mut().zip(&acc) {
        // SAFETY: `column` holds eight lanes.
        unsafe { _mm256_storeu_ps(column.as_mut_ptr(), *x) };
    }
    std::array::from_fn(|r| std::array::from_fn(|j| columns[j][r]))
}

/// Accumulates one `ROWS × 8·NV` tile of `p` over its `kc` steps; the last vector holds
/// `p.width − 8·(NV − 1)` columns, all eight when `FULL` (then no mask takes a register).
///
/// # Safety
/// As [`panel`], for the tile `t` of `p`.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const NV: usize, const FULL: bool>(p: &Panel, t: &Tile) {
    let tail = p.width - (NV - 1) * LANES;
    let mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(tail as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    // SAFETY (whole body): every pointer below stays inside the regions of the contract:
    // the last vector of a row reads or writes only its `tail` columns.
    unsafe {
        let load = |v: usize, at: *const f32| {
            if v + 1 == NV && !FULL {
                _mm256_maskload_ps(at.add(v * LANES), mask)
            } else {
                _mm256_loadu_ps(at.add(v * LANES))
            }
        };
        let c = p.c.add(t.row * p.ldc);
        let zero = _mm256_setzero_ps();
        let mut acc = [[zero; NV]; ROWS];
        match p.start {
            Start::Zero => {}
            Start::Bias(bias) => {
                for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
                    *row = [_mm256_set1_ps(*bias.add(t.row + r)); NV];
                }
            }
            Start::Columns(bias) => {
                let bias: [__m256; NV] = std::array::from_fn(|v| load(v, bias));
                acc.iter_mut().take(t.rows).for_each(|row| *row = bias);
            }
            Start::Dst => {
                for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = load(v, c.add(r * p.ldc));
                    }
                }
            }
        }
        let (mut a, mut b) = (p.a.add(t.row * p.a_rows), p.b);
        // Packed weights are zero-padded to whole tiles; rows in place are not.
        let named = NV == 3 && FULL && (t.rows == ROWS || p.a_rows == 1);
        if named && p.kc > 0 {
            // SAFETY: with `NV == 3` the accumulators are `[[__m256; 3]; ROWS]`.
            let acc = &mut *(&mut acc as *mut [[__m256; NV]; ROWS]).cast::<[[__m256; 3]; ROWS]>();
            steps_4x24(acc, a, [p.a_rows, p.a_steps], b, p.ldb, p.kc);
        }
        for _ in 0..if named { 0 } else { p.kc } {
            let mut bv = [_mm256_setzero_ps(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = load(v, b);
            }
            for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
                let w = _mm256_broadcast_ss(&*a.add(r * p.a_rows));
                for (x, &bx) in row.iter_mut().zip(&bv) {
                    *x = _mm256_fmadd_ps(w, bx, *x);
                }
            }
            a = a.add(p.a_steps);
            b = b.wrapping_add(p.ldb);
        }
        for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
            for (v, x) in row.iter_mut().enumerate() {
                if let Some((epilogue, residual)) = p.finish {
                    if let Some(res) = residual {
                        let res = res.add((t.row + r) * p.ldc);
                        *x = _mm256_add_ps(*x, load(v, res));
                    }
                    *x = epilogue.vector8(*x);
                }
                let at = c.add(r * p.ldc + v * LANES);
                if v + 1 == NV && !FULL {
                    let mut lanes = [0f32; LANES];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), *x);
                    std::ptr::copy_nonoverlapping(lanes.as_ptr(), at, tail);
                } else {
                    _mm256_storeu_ps(at, *x);
                }
            }
        }
    }
}

/// The inner steps of a full `4 × 24` tile in named registers: twelve accumulators
/// (`ymm0`–`ymm11`), the right operand's three vectors (`ymm12`–`ymm14`) and the broadcast
/// value of the left (`ymm15`). Written out because LLVM, given the same loop in
/// intrinsics, keeps one accumulator on the stack (a store and a load every step).
///
/// # Safety
/// The CPU has AVX2 and FMA; `kc > 0`; for `[rows, steps]` = `a_strides`, the left
/// operand's row `r < 4` at step `k < kc` is `a[r · rows + k · steps]`; each of the `kc`
/// rows at `b`, `ldb` apart, holds 24 elements.
#[target_feature(enable = "avx2,fma")]
unsafe fn steps_4x24(
    acc: &mut [[__m256; 3]; ROWS],
    a: *const f32,
    a_strides: [usize; 2],
    b: *const f32,
    ldb: usize,
    kc: usize,
) {
    let [[c0, c1, c2], [c3, c4, c5], [c6, c7, c8], [c9, c10, c11]] = acc;
    // SAFETY: reads `kc` steps of `a` and rows of `b`, within the contract.
    unsafe {
        std::arch::asm!(
            "2:",
            "vmovups ymm12, [{b}]",
            "vmovups ymm13, [{b} + 32]",
            "vmovups ymm14, [{b} + 64]",
            "vbroadcastss ymm15, [{a}]",
            "vfmadd231ps ymm0, ymm15, ymm12",
            "vfmadd231ps ymm1, ymm15, ymm13",
            "vfmadd231ps ymm2, ymm15, ymm14",
            "vbroadcastss ymm15, [{a} + {rs}]",
            "vfmadd231ps ymm3, ymm15, ymm12",
            "vfmadd231ps ymm4, ymm15, ymm13",
            "vfmadd231ps ymm5, ymm15, ymm14",
            "vbroadcastss ymm15, [{a} + {rs} * 2]",
            "vfmadd231ps ymm6, ymm15, ymm12",
            "vfmadd231ps ymm7, ymm15, ymm13",
            "vfmadd231ps ymm8, ymm15, ymm14",
            "vbroadcastss ymm15, [{a} + {rs3}]",
            "vfmadd231ps ymm9, ymm15, ymm12",
            "vfmadd231ps ymm10, ymm15, ymm13",
            "vfmadd231ps ymm11, ymm15, ymm14",
            "add {a}, {step}",
            "add {b}, {ldb}",
            "dec {k}",
            "jnz 2b",
            a = inout(reg) a => _,
            b = inout(reg) b => _,
            k = inout(reg) kc => _,
            ldb = in(reg) ldb * 4,
            rs = in(reg) a_strides[0] * 4,
            rs3 = in(reg) a_strides[0] * 12,
            step = in(reg) a_strides[1] * 4,
            inout("ymm0") *c0,
            inout("ymm1") *c1,
            inout("ymm2") *c2,
            inout("ymm3") *c3,
            inout("ymm4") *c4,
            inout("ymm5") *c5,
            inout("ymm6") *c6,
            inout("ymm7") *c7,
            inout("ymm8") *c8,
            inout("ymm9") *c9,
            inout("ymm10") *c10,
            inout("ymm11") *c11,
            out("ymm12") _,
            out("ymm13") _,
            out("ymm14") _,
            out("ymm15") _,
            options(nostack, readonly),
        );
    }
}
