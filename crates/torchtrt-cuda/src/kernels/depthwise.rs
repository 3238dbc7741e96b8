//! Launch geometry of the tiled depthwise convolution (`conv_depthwise_*` in `conv_cuda`):
//! the square windows and strides of [`WINDOWS`], without dilation. A block takes tiles of
//! [`rows`]·RG output rows × [`COLS`]·TC columns of P planes and stages their input windows
//! in shared memory; small planes share a block.

use crate::launch::Dim3;

/// The `(window, stride)` pairs the kernel is built for. 3×3 at stride 2 is left to the
/// thread-per-output kernel: through `torchtrtc bench` on the H200 the tiled one took 0.288 ms
/// for [32,96,112,112] against its 0.200 (BENCHMARKS.md, round 2 session 4).
pub(super) const WINDOWS: &[(usize, usize)] = &[(3, 1), (5, 1), (7, 1), (5, 2), (7, 2)];

/// Output rows a thread computes for a `k`×`k` window at stride `s`: eight for 3×3 at
/// stride 1, whose rows are cheap, four otherwise (measured on the H200: eight rows made the
/// other windows slower, the strided ones more than twice).
pub(super) fn rows(k: usize, s: usize) -> usize {
    if k == 3 && s == 1 { 8 } else { 4 }
}

/// Adjacent output columns a thread computes (`DW_RW`); `COLS · stride` must be even.
pub(super) const COLS: usize = 2;
/// Shared memory a block may take without opting in to more.
const SHARED: usize = 48 << 10;
/// Threads across a tile, at most (a tile spans up to `COLS · 64` output columns).
const ACROSS: usize = 64;
/// CUDA's limit on a block's third dimension, which counts the block's planes.
const MAX_BLOCK_Z: usize = 64;

/// Where the tiled kernel applies and how it is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tiling {
    pub grid: Dim3,
    /// `(TC, RG, P)`: threads across a tile, thread rows down it, planes in the block.
    pub block: Dim3,
    /// Rows and columns of a tile's input window, and the pitch of its rows (even).
    pub window: [usize; 3],
    /// How far a block's thread count steps a flat window index, in `(rows, columns)`.
    pub step: [usize; 2],
    pub shared_bytes: u32,
}

impl Tiling {
    /// The tiling of a depthwise convolution with a `k`×`k` window at stride `s` (both dims)
    /// and dilation 1, producing `planes` planes of `oh`×`ow` from `h`×`w` inputs; `None`
    /// where the kernel does not apply (other windows or strides, positions that do not count
    /// in 32 bits, planes within 2^24 of that, where the kernel's plane loop could wrap).
    pub(super) fn of(
        k: usize,
        s: usize,
        [h, w]: [usize; 2],
        [oh, ow]: [usize; 2],
        planes: usize,
    ) -> Option<Tiling> {
        let fits = |v: usize| i32::try_from(v).is_ok();
        if !WINDOWS.contains(&(k, s))
            || oh == 0
            || ow == 0
            || !fits(h.checked_mul(w)?)
            || !fits(oh.checked_mul(ow)?)
            || !fits(planes + (1 << 24))
        {
            return None;
        }
        let budget = if oh * ow >= 512 { 256 } else { 128 };
        let cols = ow.div_ceil(COLS);
        let across = cols.div_ceil(ACROSS);
        let tc = cols.div_ceil(across);
        let per = rows(k, s);
        let rows = oh.div_ceil(per);
        let rg_most = (budget / tc).max(1);
        let mut rg = rows.div_ceil(rows.div_ceil(rg_most));
        let iw = (tc * COLS - 1) * s + k;
        let pitch = iw.next_multiple_of(2);
        let ih = |rg: usize| (rg * per - 1) * s + k;
        let bytes = |rg: usize, p: usize| p * (ih(rg) * pitch + k * k) * 4;
        while rg > 1 && bytes(rg, 1) > SHARED {
            rg -= 1;
        }
        if bytes(rg, 1) > SHARED {
            return None;
        }
        let down = oh.div_ceil(rg * per);
        let mut p = (budget / (tc * rg))
            .clamp(1, planes.max(1))
            .min(MAX_BLOCK_Z);
        while p > 1 && bytes(rg, p) > SHARED {
            p -= 1;
        }
        let threads = tc * rg * p;
        let dim = |v: usize| u32::try_from(v).ok().filter(|&v| v <= 65_535);
        Some(Tiling {
            grid: (
                dim(across)?,
                dim(down)?,
                dim(planes.div_ceil(p).min(65_535))?,
            ),
            block: (tc as u32, rg as u32, p as u32),
            window: [ih(rg), iw, pitch],
            step: [threads / iw, threads % iw],
            shared_bytes: u32::try_from(bytes(rg, p)).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(i: usize, k: usize, s: usize, pad: usize) -> usize {
        (i + 2 * pad - k) / s + 1
    }

    /// Tiny planes put many in a block, but never more than a block's third dimension
    /// holds: mobilenet_v3_small's 5×5 stride-2 layer on 4×4 planes (a 64×64 image) asked
    /// for 108 and failed to launch.
    #[test]
    fn planes_per_block_stay_within_cuda_limits() {
        for &(k, s) in WINDOWS {
            for (h, oh) in [(1, 1), (2, 1), (4, 2), (4, 4), (8, 4)] {
                let Some(t) = Tiling::of(k, s, [h, h], [oh, oh], 576) else {
                    continue;
                };
                assert!(t.block.2 as usize <= MAX_BLOCK_Z, "k{k} s{s} {h}: {t:?}");
                assert!(t.shared_bytes as usize <= SHARED, "k{k} s{s} {h}: {t:?}");
            }
        }
        let t = Tiling::of(5, 2, [4, 4], [2, 2], 576).expect("tiled");
        assert_eq!(t.block, (1, 1, 64));
        assert_eq!(t.grid.2, 9);
    }

    #[test]
    fn tiles_cover_every_output_once_within_the_limits() {
        for &(k, s) in WINDOWS {
            for (h, w) in [(7, 7), (14, 14), (56, 56), (112, 112), (1, 300), (300, 1)]
                .into_iter()
                .chain([(9, 5000), (3000, 9), (224, 224), (13, 29)])
            {
                let (h, w) = (h.max(k), w.max(k));
                let (oh, ow) = (out(h, k, s, k / 2), out(w, k, s, k / 2));
                for planes in [1, 3, 96, 3072, 200_000] {
                    let t = Tiling::of(k, s, [h, w], [oh, ow], planes).unwrap();
                    let (tc, rg, p) = (t.block.0 as usize, t.block.1 as usize, t.block.2);
                    let (across, down) = (t.grid.0 as usize, t.grid.1 as usize);
                    let what = format!("k{k} s{s} {h}x{w} planes {planes}: {t:?}");
                    assert!(
                        across * tc * COLS >= ow && (across - 1) * tc * COLS < ow,
                        "{what}"
                    );
                    let per = rows(k, s);
                    assert!(
                        down * rg * per >= oh && (down - 1) * rg * per < oh,
                        "{what}"
                    );
                    assert!(
                        tc * rg * p as usize <= 256 && t.shared_bytes as usize <= SHARED,
                        "{what}"
                    );
                    assert!(p as usize <= planes && t.grid.2 >= 1, "{what}");
                    assert!(p as usize <= MAX_BLOCK_Z, "{what}");
                    assert_eq!(t.window[0], (rg * per - 1) * s + k, "{what}");
                    assert_eq!(t.window[1], (tc * COLS - 1) * s + k, "{what}");
                    assert!(
                        t.window[2].is_multiple_of(2) && t.window[2] >= t.window[1],
                        "{what}"
                    );
                    let threads = tc * rg * p as usize;
                    assert_eq!(t.step[0] * t.window[1] + t.step[1], threads, "{what}");
                }
            }
        }
    }

    #[test]
    fn other_windows_and_oversized_planes_are_left_to_the_direct_kernel() {
        assert_eq!(Tiling::of(4, 1, [8, 8], [5, 5], 2), None);
        assert_eq!(Tiling::of(3, 3, [9, 9], [3, 3], 2), None);
        assert_eq!(Tiling::of(3, 2, [9, 9], [5, 5], 2), None);
        assert_eq!(
            Tiling::of(3, 1, [1 << 16, 1 << 16], [1 << 16, 1 << 16], 1),
            None
        );
        assert_eq!(
            Tiling::of(3, 1, [8, 8], [8, 8], (1 << 31) - (1 << 24)),
            None
        );
        assert!(Tiling::of(3, 1, [8, 8], [8, 8], (1 << 31) - (1 << 24) - 1).is_some());
        assert_eq!(Tiling::of(3, 1, [8, 8], [0, 8], 4), None);
    }
}
