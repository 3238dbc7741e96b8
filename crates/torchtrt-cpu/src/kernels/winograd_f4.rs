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

/// Transforms the 6×6 patches of one tile row: `lines` holds the six input lines under it,
/// zero-padded to `4 · cols + 4` and split into 4 phases of `cols + 1` (phase `p` holds
/// columns `p, p + 4, …`), `e` is scratch of the same size, and `v[ξ]` receives the row's
/// `cols` tiles of point `ξ`.
#[inline(always)]
pub(super) fn input_row(lines: &[f32], e: &mut [f32], v: &mut [&mut [f32]; POINTS], cols: usize) {
    let padded = 4 * cols + 4;
    let d: [&[f32]; 6] = std::array::from_fn(|k| &lines[k * padded..(k + 1) * padded]);
    {
        let mut it = e.chunks_exact_mut(padded);
        let mut e: [&mut [f32]; 6] = std::array::from_fn(|_| it.next().unwrap_or_default());
        for x in 0..padded {
            let p = input_points([d[0][x], d[1][x], d[2][x], d[3][x], d[4][x], d[5][x]]);
            for (ei, pi) in e.iter_mut().zip(p) {
                ei[x] = pi;
            }
        }
    }
    let q = cols + 1;
    for (i, ei) in e.chunks_exact(padded).enumerate() {
        let (e0, e1, e2, e3) = (&ei[..q], &ei[q..2 * q], &ei[2 * q..3 * q], &ei[3 * q..]);
        let Some([v0, v1, v2, v3, v4, v5]) = v[6 * i..6 * i + 6].first_chunk_mut::<6>() else {
            return;
        };
        let (v0, v1, v2) = (&mut v0[..cols], &mut v1[..cols], &mut v2[..cols]);
        let (v3, v4, v5) = (&mut v3[..cols], &mut v4[..cols], &mut v5[..cols]);
        let (e0, e1, e2, e3, f0, f1) = (
            &e0[..cols],
            &e1[..cols],
            &e2[..cols],
            &e3[..cols],
            &e0[1..=cols],
            &e1[1..=cols],
        );
        for tx in 0..cols {
            let p = input_points([e0[tx], e1[tx], e2[tx], e3[tx], f0[tx], f1[tx]]);
            v0[tx] = p[0];
            v1[tx] = p[1];
            v2[tx] = p[2];
            v3[tx] = p[3];
            v4[tx] = p[4];
            v5[tx] = p[5];
        }
    }
}

/// `Aᵀ m A + bias` of tile `t`: `m[ξ][t]` in, 4×4 outputs out.
#[inline(always)]
pub(super) fn output_tile(m: &[&[f32]; POINTS], t: usize, bias: f32) -> [[f32; 4]; 4] {
    let mut s = [[0f32; 6]; 4];
    for j in 0..6 {
        let col = output_points(std::array::from_fn(|i| m[6 * i + j][t]));
        for (si, c) in s.iter_mut().zip(col) {
            si[j] = c;
        }
    }
    s.map(|row| output_points(row).map(|v| v + bias))
}

/// Tiles the vector path of the output transform takes at a time.
pub(super) const LANES: usize = 16;

/// [`output_tile`] for `LANES` tiles side by side: the tiles' four output rows, each
/// `4 · LANES` wide (tile `k` at columns `4k..4k + 4`).
#[inline(always)]
pub(super) fn output_lanes(m: &[&[f32; LANES]; POINTS], bias: f32) -> [[f32; 4 * LANES]; 4] {
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
