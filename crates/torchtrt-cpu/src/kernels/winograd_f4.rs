//! The transforms of Winograd F(4×4, 3×3): 6×6 input patches, 4×4 output tiles, 36 products
//! per channel pair (interpolation points 0, ±1, ±2, ∞), for images large enough that the
//! fourfold larger transformed weights pay for 2.25 times fewer products than F(2×2, 3×3).

/// Transform points per tile (6 × 6).
pub(super) const POINTS: usize = 36;

/// `G g Gᵀ` of one 3×3 filter `g` (row-major), as 36 points row-major.
pub(super) fn transform_filter(g: &[f32]) -> [f32; POINTS] {
    let rows = |a: f32, b: f32, c: f32| {
        [
            a / 4.0,
            -(a + b + c) / 6.0,
            -(a - b + c) / 6.0,
            a / 24.0 + b / 12.0 + c / 6.0,
            a / 24.0 - b / 12.0 + c / 6.0,
            c,
        ]
    };
    let mut gg = [[0f32; 3]; 6];
    for col in 0..3 {
        for (i, v) in rows(g[col], g[3 + col], g[6 + col]).into_iter().enumerate() {
            gg[i][col] = v;
        }
    }
    let mut u = [0f32; POINTS];
    for (i, r) in gg.iter().enumerate() {
        u[6 * i..6 * i + 6].copy_from_slice(&rows(r[0], r[1], r[2]));
    }
    u
}

/// `Bᵀ d` of six values.
#[inline(always)]
fn input_points(d: [f32; 6]) -> [f32; 6] {
    let [d0, d1, d2, d3, d4, d5] = d;
    [
        4.0 * d0 - 5.0 * d2 + d4,
        -4.0 * (d1 + d2) + d3 + d4,
        4.0 * (d1 - d2) - d3 + d4,
        -2.0 * (d1 - d3) - d2 + d4,
        2.0 * (d1 - d3) - d2 + d4,
        4.0 * d1 - 5.0 * d3 + d5,
    ]
}

/// `Aᵀ m` of six values.
#[inline(always)]
fn output_points(m: [f32; 6]) -> [f32; 4] {
    let [m0, m1, m2, m3, m4, m5] = m;
    let (a, b, c, d) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
    [m0 + a + c, b + 2.0 * d, a + 4.0 * c, b + 8.0 * d + m5]
}

/// Values one step of the vector loops of [`input_row`] takes per line (one AVX-512 vector).
const STEP: usize = 16;

/// Scratch of [`input_row`] for a row of `cols` tiles, in f32.
pub(super) fn row_scratch(cols: usize) -> usize {
    12 * row_stride(cols)
}

/// Stride of one phase in [`input_row`]'s phase-split rows: `cols + 1` rounded up to whole
/// steps, so a step's stores stay inside its phase.
fn phase_stride(cols: usize) -> usize {
    (cols + 1).next_multiple_of(STEP)
}

/// Stride of [`input_row`]'s transformed and phase-split rows: four phases and a step of
/// slack, so whole-step loads and stores never leave the row.
fn row_stride(cols: usize) -> usize {
    4 * phase_stride(cols) + STEP
}

/// Transforms the 6×6 patches of one tile row: `src[k]` starts with input line `k` under it
/// (`width` values, zeros for lines outside the image; values past `width` are read and
/// ignored) whose first column sits at column `left` of the zero-padded row;
/// `scratch` holds [`row_scratch`] values, and `v[ξ]` receives the row's `cols` tiles of
/// point `ξ` (values past `cols` may be overwritten when `v[ξ]` is longer).
///
/// The vertical transform runs first, along whole lines into zero-padded rows; each row is
/// then split into 4 phases (phase `p` holds columns `p, p + 4, …`) so that the horizontal
/// transform reads contiguous runs. Every loop moves whole vectors through locals, so it
/// vectorises without aliasing checks or calls to `memcpy`.
#[inline(always)]
pub(super) fn input_row(
    src: &[&[f32]; 6],
    width: usize,
    left: usize,
    scratch: &mut [f32],
    v: &mut [&mut [f32]; POINTS],
    cols: usize,
) {
    let padded = 4 * cols + 4;
    let (qs, stride) = (phase_stride(cols), row_stride(cols));
    let width = width.min(padded.saturating_sub(left));
    let (e, phases) = scratch.split_at_mut(6 * stride);
    let mut x = 0;
    while x < width {
        let step = STEP.min(width - x);
        let d: [[f32; STEP]; 6] = std::array::from_fn(|k| load(&src[k][x..], step));
        let t = lanes(&d);
        for (ti, row) in t.iter().zip(e.chunks_exact_mut(stride)) {
            store(&mut row[left + x..], ti, step);
        }
        x += step;
    }
    for row in e.chunks_exact_mut(stride) {
        row[..left].fill(0.0);
        row[left + width..padded].fill(0.0);
    }
    let q = cols + 1;
    for (row, split) in e.chunks_exact(stride).zip(phases.chunks_exact_mut(stride)) {
        for j in 0..q.div_ceil(STEP) {
            let Some(quads) = row[4 * STEP * j..].first_chunk::<{ 4 * STEP }>() else {
                return;
            };
            let mut p = [[0f32; STEP]; 4];
            for k in 0..STEP {
                for (i, pi) in p.iter_mut().enumerate() {
                    pi[k] = quads[4 * k + i];
                }
            }
            for (i, pi) in p.iter().enumerate() {
                store(&mut split[i * qs + j * STEP..], pi, STEP);
            }
        }
    }
    for (i, ei) in phases.chunks_exact(stride).enumerate() {
        let mut tx = 0;
        while tx < cols {
            let step = STEP.min(cols - tx);
            let d: [[f32; STEP]; 6] =
                std::array::from_fn(|k| load(&ei[(k % 4) * qs + k / 4 + tx..], step));
            let t = lanes(&d);
            for (ti, vj) in t.iter().zip(&mut v[6 * i..6 * i + 6]) {
                store(&mut vj[tx..], ti, step);
            }
            tx += step;
        }
    }
}

/// The first `len` (at most `W`) values of `src`, extended to `W` with whatever follows
/// them (zeros where `src` ends); a whole `W` is one fixed-size copy, so it compiles to
/// vector loads instead of a call.
#[inline(always)]
pub(super) fn load<const W: usize>(src: &[f32], len: usize) -> [f32; W] {
    if let Some(whole) = src.first_chunk::<W>() {
        return *whole;
    }
    let mut d = [0f32; W];
    d[..len].copy_from_slice(&src[..len]);
    d
}

/// Stores `values` at the start of `dst`: all `W` where `dst` has room for them, else their
/// first `len`.
#[inline(always)]
pub(super) fn store<const W: usize>(dst: &mut [f32], values: &[f32; W], len: usize) {
    if let Some(whole) = dst.first_chunk_mut::<W>() {
        *whole = *values;
        return;
    }
    dst[..len].copy_from_slice(&values[..len]);
}

/// [`input_points`] of `STEP` columns side by side.
#[inline(always)]
fn lanes(d: &[[f32; STEP]; 6]) -> [[f32; STEP]; 6] {
    let mut t = [[0f32; STEP]; 6];
    for j in 0..STEP {
        let p = input_points(std::array::from_fn(|k| d[k][j]));
        for (ti, pi) in t.iter_mut().zip(p) {
            ti[j] = pi;
        }
    }
    t
}

/// Tiles the vector path of the output transform takes at a time.
pub(super) const LANES: usize = 16;

/// [`output_tile`] for `LANES` tiles side by side: the tiles' four output rows, each
/// `4 · LANES` wide (tile `k` at columns `4k..4k + 4`).
#[inline(always)]
pub(super) fn output_lanes(m: &[[f32; LANES]; POINTS], bias: f32) -> [[f32; 4 * LANES]; 4] {
    let mut s = [[[0f32; LANES]; 6]; 4];
    for j in 0..6 {
        for k in 0..LANES {
            let col = output_points(std::array::from_fn(|i| m[6 * i + j][k]));
            for (si, c) in s.iter_mut().zip(col) {
                si[j][k] = c;
            }
        }
    }
    let mut y = [[0f32; 4 * LANES]; 4];
    for (row, si) in y.iter_mut().zip(&s) {
        for k in 0..LANES {
            let out = output_points(std::array::from_fn(|j| si[j][k]));
            for (q, v) in out.into_iter().enumerate() {
                row[4 * k + q] = v + bias;
            }
        }
    }
    y
}
