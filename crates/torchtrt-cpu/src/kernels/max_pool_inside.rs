//! 2-D max pooling of f32 planes whose windows all lie inside the input (no padding, no
//! overhang) and whose rows are at most 64 wide, any kernel, stride and dilation, on
//! AVX-512: adaptive pooling's ONNX stand-ins (k(6,8) s(4,6) on 30×45). Each output row's
//! window rows are reduced into registers, the row's last vector loaded masked, so rows of
//! any width run without scalar tails. The window columns are then reduced by doubling, in
//! registers: each pass takes the maximum of a run and the run `2ⁱ` columns on, and each
//! output is the maximum of the two power-of-two runs that cover its window.

use crate::linalg::Window;
use crate::parallel::for_each_row;

/// Whether [`run`] pools this window on this CPU.
pub(super) fn applies(w: &Window) -> bool {
    let [_, ih, iw] = w.input;
    let [_, kh, kw] = w.kernel;
    let [_, sh, sw] = w.stride;
    let [_, dh, dw] = w.dilation;
    let [_, oh, ow] = w.output;
    let reach = |o: usize, s: usize, k: usize, d: usize| (o - 1) * s + (k - 1) * d + 1;
    crate::simd::v4()
        && w.input[0] == 1
        && w.output[0] == 1
        && w.kernel[0] == 1
        && w.pad_begin == [0; 3]
        && w.pad_end == [0; 3]
        && oh > 0
        && ow > 0
        && kh * kw > 4
        && iw <= MOST_VECTORS * LANES
        && reach(oh, sh, kh, dh) <= ih
        && reach(ow, sw, kw, dw) <= iw
}

/// Max-pools every plane of `x` into `out` (planes of `w.input` in, of `w.output` out);
/// `w` must satisfy [`applies`].
pub(super) fn run(w: &Window, x: &[f32], out: &mut [f32]) {
    let (plane_in, plane_out) = (w.input[1] * w.input[2], w.output[1] * w.output[2]);
    let work = plane_out * w.kernel[1] * w.kernel[2];
    for_each_row(
        out,
        plane_out,
        work,
        || (),
        |_, p, dst| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `applies` checked that the CPU has AVX-512 F.
            unsafe {
                plane(w, &x[p * plane_in..(p + 1) * plane_in], dst)
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (p, dst);
        },
    );
}

/// Lanes of one vector.
const LANES: usize = 16;
/// Most vectors of an input row the row stays in registers as (64 columns).
const MOST_VECTORS: usize = 4;

/// One plane `src` into `dst`, dispatched on the vectors of an input row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn plane(w: &Window, src: &[f32], dst: &mut [f32]) {
    match w.input[2].div_ceil(LANES) {
        1 => plane_in::<1>(w, src, dst),
        2 => plane_in::<2>(w, src, dst),
        3 => plane_in::<3>(w, src, dst),
        _ => plane_in::<MOST_VECTORS>(w, src, dst),
    }
}

/// [`plane`] with each reduced row held in `V` vectors: its window rows reduced by masked
/// loads, then its doubling passes shifting whole registers (a two-source permute), so no
/// load reads what a store has just written.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn plane_in<const V: usize>(w: &Window, src: &[f32], dst: &mut [f32]) {
    use std::arch::x86_64::*;
    let [_, _, iw] = w.input;
    let [_, kh, kw] = w.kernel;
    let [_, sh, sw] = w.stride;
    let [_, dh, dw] = w.dilation;
    let [_, _, ow] = w.output;
    let tail = ((1u32 << (iw - (V - 1) * LANES)) - 1) as u16;
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let lowest = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut line = [0f32; MOST_VECTORS * LANES];
    for (r, out) in dst.chunks_exact_mut(ow).enumerate() {
        let mut row = [lowest; V];
        for (v, acc) in row.iter_mut().enumerate() {
            let mask = if v + 1 == V { tail } else { u16::MAX };
            let at = |k: usize| (r * sh + k * dh) * iw + v * LANES;
            // SAFETY: lane `l` of the load from window row `k` reads `src[at(k) + l]` only
            // where the mask is set, i.e. within that input row, and the rows read lie in
            // the plane (`applies` bounds the windows' reach).
            *acc = unsafe { _mm512_maskz_loadu_ps(mask, src.as_ptr().add(at(0))) };
            for k in 1..kh {
                let x = unsafe { _mm512_maskz_loadu_ps(mask, src.as_ptr().add(at(k))) };
                *acc = _mm512_max_ps(x, *acc);
            }
        }
        let mut run = 1;
        while 2 * run <= kw {
            let shift = run * dw;
            let (skip, lane) = (shift / LANES, shift % LANES);
            let index = _mm512_add_epi32(lanes, _mm512_set1_epi32(lane as i32));
            let mut next = row;
            for (v, n) in next.iter_mut().enumerate() {
                let lo = row.get(v + skip).copied().unwrap_or(lowest);
                let hi = row.get(v + skip + 1).copied().unwrap_or(lowest);
                *n = _mm512_max_ps(_mm512_permutex2var_ps(lo, index, hi), row[v]);
            }
            row = next;
            run *= 2;
        }
        for (v, x) in row.iter().enumerate() {
            // SAFETY: `line` holds `MOST_VECTORS ≥ V` vectors.
            unsafe { _mm512_storeu_ps(line.as_mut_ptr().add(v * LANES), *x) };
        }
        let last = (kw - run) * dw;
        for (c, o) in out.iter_mut().enumerate() {
            let (x, y) = (line[c * sw], line[c * sw + last]);
            *o = if y > x { y } else { x };
        }
    }
}
