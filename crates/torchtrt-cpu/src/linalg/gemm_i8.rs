//! 8-bit integer matrix products with exact 32-bit accumulation: `C = A · B` for signed
//! `A` (weights, `rows × depth`) and unsigned `B` (activations, `depth × columns`), the
//! operand pair of x86's VNNI dot products (`vpdpbusd`: four `u8 · i8` products summed
//! into each 32-bit lane).
//!
//! `A` is packed once into blocks of [`MR`] rows and `B` per task into panels of [`NR`]
//! columns, both with depth in groups of four bytes, so a tile's inner loop reads two
//! 64-byte vectors of `B` and broadcasts four bytes of `A` per row. Depth is padded to a
//! multiple of four with zero weights, so whatever pads `B` adds nothing.

use crate::simd::multiversion;

/// Rows of `A` per tile.
pub(crate) const MR: usize = 8;
/// Columns of `B` per tile: two vectors of sixteen 32-bit lanes.
pub(crate) const NR: usize = 32;
/// Depth per dot-product step.
const QUAD: usize = 4;

/// The deepest product whose sums cannot overflow 32 bits: `255 · 128 · depth < 2³¹`.
pub(crate) const MAX_DEPTH: usize = (i32::MAX as usize) / (255 * 128);

/// Signed 8-bit rows packed into blocks of [`MR`] rows: for each block and each group of
/// four depths, `MR × 4` bytes. Keeps each row's sum, which the zero point of `B` needs.
pub(crate) struct PackedRows {
    rows: usize,
    quads: usize,
    data: Vec<i8>,
    sums: Vec<i32>,
}

impl PackedRows {
    /// Packs the row-major `rows × depth` matrix `a`; `None` when the depth exceeds
    /// [`MAX_DEPTH`] or `a` is not that size.
    pub(crate) fn new(a: &[i8], rows: usize, depth: usize) -> Option<PackedRows> {
        if depth > MAX_DEPTH || a.len() != rows.checked_mul(depth)? {
            return None;
        }
        let quads = depth.div_ceil(QUAD);
        let blocks = rows.div_ceil(MR);
        let mut data = vec![0i8; blocks * quads * MR * QUAD];
        for (r, row) in a.chunks_exact(depth.max(1)).enumerate().take(rows) {
            let block = &mut data[(r / MR) * quads * MR * QUAD..];
            for (k, &v) in row.iter().enumerate() {
                block[((k / QUAD) * MR + r % MR) * QUAD + k % QUAD] = v;
            }
        }
        let sums = (0..rows)
            .map(|r| {
                a[r * depth..(r + 1) * depth]
                    .iter()
                    .map(|&v| i32::from(v))
                    .sum()
            })
            .collect();
        Some(PackedRows {
            rows,
            quads,
            data,
            sums,
        })
    }

    /// Rows.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Groups of four depths.
    pub(crate) fn quads(&self) -> usize {
        self.quads
    }

    /// The sum of row `r`.
    pub(crate) fn row_sum(&self, r: usize) -> i32 {
        self.sums[r]
    }

    /// The packed block holding row `r` (a multiple of [`MR`]).
    fn block(&self, r: usize) -> &[i8] {
        let len = self.quads * MR * QUAD;
        &self.data[(r / MR) * len..(r / MR + 1) * len]
    }
}

/// Bytes of `B` panels for `columns` columns of depth `quads` groups.
pub(crate) fn panel_bytes(quads: usize, columns: usize) -> usize {
    columns.div_ceil(NR) * quads * NR * QUAD
}

/// Interleaves four byte rows into 32-bit words, byte `l` of word `i` from `rows[l][i]`,
/// XORed with `flip` (rows past the data are given as the padding row).
pub(crate) fn interleave_rows(rows: [&[u8]; QUAD], flip: u8, out: &mut [u32]) {
    interleave_words(rows, flip, out);
}

multiversion! {
    /// [`interleave_rows`], compiled per SIMD level.
    fn interleave_words<>(rows: [&[u8]; QUAD], flip: u8, out: &mut [u32]) {
        let flip = u32::from_ne_bytes([flip; QUAD]);
        let n = out.len();
        let [r0, r1, r2, r3] = rows.map(|r| &r[..n]);
        for (i, o) in out.iter_mut().enumerate() {
            let word = u32::from(r0[i])
                | u32::from(r1[i]) << 8
                | u32::from(r2[i]) << 16
                | u32::from(r3[i]) << 24;
            *o = word.to_le() ^ flip;
        }
    }
}

/// Packs the rows `0..n` of the row-major `n × depth` byte matrix `src` as the columns of
/// [`NR`]-column panels (row `t` becomes column `t`: a matrix product's activations, one
/// token per row), each byte XORed with `flip`; depth past `depth` and columns past `n` are
/// filled with `pad`.
pub(crate) fn pack_rows(src: &[u8], depth: usize, n: usize, flip: u8, pad: u8, dst: &mut [u8]) {
    let quads = depth.div_ceil(QUAD);
    for (p, panel) in dst.chunks_exact_mut(quads * NR * QUAD).enumerate() {
        for (q, step) in panel.chunks_exact_mut(NR * QUAD).enumerate() {
            let k = q * QUAD;
            let take = QUAD.min(depth.saturating_sub(k));
            for (c, word) in step.chunks_exact_mut(QUAD).enumerate() {
                let t = p * NR + c;
                word.fill(pad);
                if t < n {
                    let row = &src[t * depth + k..t * depth + k + take];
                    for (w, &v) in word.iter_mut().zip(row) {
                        *w = v ^ flip;
                    }
                }
            }
        }
    }
}

/// One tile's sums: `MR × NR` 32-bit integers.
pub(crate) type Acc = [[i32; NR]; MR];

/// The products of rows `r0..r0 + MR` of `a` with one panel of `B`, into `acc`
/// (overwritten). The panel's groups of four depths lie `stride` bytes apart in `b`, each
/// [`NR`] columns of four bytes: packed panels have `stride = NR · 4`; a matrix of 32-bit
/// words, four depths each (channel-interleaved activations), has its row length.
pub(crate) fn tile(a: &PackedRows, r0: usize, b: &[u8], stride: usize, acc: &mut Acc) {
    let block = a.block(r0);
    let quads = a.quads;
    let reach = quads.saturating_sub(1) * stride + NR * QUAD;
    assert!(
        quads == 0 || b.len() >= reach,
        "a tile reads {reach} bytes of B, {} given",
        b.len()
    );
    #[cfg(target_arch = "x86_64")]
    if vnni() {
        // SAFETY: `vnni()` reports the CPU has AVX-512 F, BW and VNNI; `block` holds
        // `quads · MR · 4` bytes and `b` the `reach` bytes checked above, which is what
        // the kernel reads.
        unsafe { tile_vnni(block.as_ptr(), b.as_ptr(), quads, stride, acc) };
        return;
    }
    tile_portable(block, b, quads, stride, acc);
}

/// Whether the VNNI tile may run: the SIMD level is AVX-512 and the CPU has VNNI.
pub(crate) fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static VNNI: OnceLock<bool> = OnceLock::new();
        crate::simd::v4()
            && *VNNI.get_or_init(|| {
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vnni")
            })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_vnni(a: *const i8, b: *const u8, quads: usize, stride: usize, acc: &mut Acc) {
    use std::arch::x86_64::*;
    let mut c = [[_mm512_setzero_si512(); 2]; MR];
    for q in 0..quads {
        // SAFETY: the caller guarantees `quads` steps of `NR · 4` bytes `stride` apart at
        // `b`, and of `MR · 4` bytes at `a`.
        unsafe {
            let bq = b.add(q * stride);
            let b0 = _mm512_loadu_si512(bq.cast());
            let b1 = _mm512_loadu_si512(bq.add(64).cast());
            let aq = a.add(q * MR * QUAD);
            for (r, cr) in c.iter_mut().enumerate() {
                let w = _mm512_set1_epi32(std::ptr::read_unaligned(aq.add(r * QUAD).cast::<i32>()));
                cr[0] = _mm512_dpbusd_epi32(cr[0], b0, w);
                cr[1] = _mm512_dpbusd_epi32(cr[1], b1, w);
            }
        }
    }
    for (row, cr) in acc.iter_mut().zip(&c) {
        // SAFETY: each row holds `NR` = 32 lanes: two 16-lane stores.
        unsafe {
            _mm512_storeu_si512(row.as_mut_ptr().cast(), cr[0]);
            _mm512_storeu_si512(row.as_mut_ptr().add(16).cast(), cr[1]);
        }
    }
}

multiversion! {
    /// [`tile`] in plain integer arithmetic, for CPUs without VNNI.
    fn tile_portable<>(a: &[i8], b: &[u8], quads: usize, stride: usize, acc: &mut Acc) {
        for row in acc.iter_mut() {
            row.fill(0);
        }
        for q in 0..quads {
            let bq = &b[q * stride..q * stride + NR * QUAD];
            let aq = &a[q * MR * QUAD..(q + 1) * MR * QUAD];
            for (row, w) in acc.iter_mut().zip(aq.chunks_exact(QUAD)) {
                let w = [w[0], w[1], w[2], w[3]].map(i16::from);
                for (sum, v) in row.iter_mut().zip(bq.chunks_exact(QUAD)) {
                    let dot = (0..QUAD).fold(0i32, |s, j| {
                        s + i32::from(w[j] * i16::from(v[j]))
                    });
                    *sum += dot;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// Every tile equals the plain product, with ragged depth, rows and columns, at the
    /// process's SIMD level and in the portable form.
    #[test]
    fn tiles_equal_the_plain_product() {
        let mut seed = 7;
        for (rows, depth, n) in [
            (8, 4, 32),
            (5, 7, 3),
            (13, 37, 45),
            (16, 576, 64),
            (3, 1, 1),
        ] {
            let a: Vec<i8> = (0..rows * depth).map(|_| lcg(&mut seed) as i8).collect();
            let b: Vec<u8> = (0..depth * n).map(|_| lcg(&mut seed) as u8).collect();
            let bt: Vec<u8> = (0..n * depth)
                .map(|i| b[(i % depth) * n + i / depth])
                .collect();
            let packed = PackedRows::new(&a, rows, depth).unwrap();
            let mut panels = vec![0u8; panel_bytes(packed.quads(), n)];
            pack_rows(&bt, depth, n, 0, 77, &mut panels);
            let panel_len = packed.quads() * NR * QUAD;
            for r0 in (0..rows).step_by(MR) {
                for (p, panel) in panels.chunks_exact(panel_len).enumerate() {
                    let (mut fast, mut plain) = ([[0; NR]; MR], [[0; NR]; MR]);
                    tile(&packed, r0, panel, NR * QUAD, &mut fast);
                    tile_portable(
                        packed.block(r0),
                        panel,
                        packed.quads(),
                        NR * QUAD,
                        &mut plain,
                    );
                    for r in r0..rows.min(r0 + MR) {
                        for c in p * NR..n.min(p * NR + NR) {
                            let want: i32 = (0..depth)
                                .map(|k| i32::from(a[r * depth + k]) * i32::from(b[k * n + c]))
                                .sum();
                            assert_eq!(
                                fast[r - r0][c - p * NR],
                                want,
                                "{rows}x{depth}x{n} ({r},{c})"
                            );
                            assert_eq!(plain[r - r0][c - p * NR], want);
                        }
                    }
                }
            }
            for r in 0..rows {
                let sum: i32 = a[r * depth..(r + 1) * depth]
                    .iter()
                    .map(|&v| i32::from(v))
                    .sum();
                assert_eq!(packed.row_sum(r), sum);
            }
        }
    }

    /// Rows packed as columns give the product with the transposed matrix.
    #[test]
    fn packed_rows_are_the_transposed_columns() {
        let mut seed = 3;
        for (rows, depth, n) in [(8, 37, 45), (3, 4, 1), (16, 64, 33)] {
            let a: Vec<i8> = (0..rows * depth).map(|_| lcg(&mut seed) as i8).collect();
            let bt: Vec<u8> = (0..n * depth).map(|_| lcg(&mut seed) as u8).collect();
            let packed = PackedRows::new(&a, rows, depth).unwrap();
            let mut panels = vec![0u8; panel_bytes(packed.quads(), n)];
            pack_rows(&bt, depth, n, 0x80, 9, &mut panels);
            let panel_len = packed.quads() * NR * QUAD;
            for (p, panel) in panels.chunks_exact(panel_len).enumerate() {
                let mut acc = [[0; NR]; MR];
                tile(&packed, 0, panel, NR * QUAD, &mut acc);
                for r in 0..rows.min(MR) {
                    for c in p * NR..n.min(p * NR + NR) {
                        let want: i32 = (0..depth)
                            .map(|k| {
                                i32::from(a[r * depth + k]) * i32::from(bt[c * depth + k] ^ 0x80)
                            })
                            .sum();
                        assert_eq!(acc[r][c - p * NR], want);
                    }
                }
            }
        }
    }

    #[test]
    fn too_deep_products_are_refused() {
        assert!(PackedRows::new(&[], 0, MAX_DEPTH + 1).is_none());
        assert!(PackedRows::new(&[1, 2, 3], 2, 2).is_none());
    }
}
