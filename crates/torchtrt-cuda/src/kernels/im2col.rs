//! im2col for the GEMM convolutions: the gathered matrix of one chunk of images, rows
//! `(image·group, channel, kh, kw)` (or, for wide products, `(channel, kh, kw, image)`) by
//! output positions, zeros in the padding and in the rows that pad the reduction to a
//! multiple of 8. For kernels larger than 1×1 whose band of input rows fits in shared memory,
//! a block stages one input plane's band (or several small planes) with coalesced loads and
//! writes every kernel tap's row from it (`im2col_band`): the input is read from memory once
//! instead of once per tap, and the rows are stored as 16-, 4- or 2-byte words as their
//! alignment allows. Otherwise a flat pass gathers each element from global memory
//! (`im2col_flat`).

use super::PrepareCtx;
use super::operands::{arg_i32, grid_for};
use super::prelude::{Program, with_prelude};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Convolution";

static IM2COL: Program = Program::new("core_im2col", || with_prelude(BODY));

const BODY: &str = r#"
/* A word of SB bytes: VW elements of T. */
template <typename T, int SB> struct Word;
template <typename T> struct Word<T, 16> { typedef uint4 W; };
template <typename T> struct Word<T, 4> { typedef unsigned W; };
template <typename T> struct Word<T, 2> { typedef unsigned short W; };

/* One chunk's geometry: CG channels a group, REAL = CG·KH·KW rows a group of which the
   first PADDED are stored (zeros past REAL); NB > 0: rows (r, image) of one group. */
struct Im2col {
    int CG, REAL, PADDED, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, NB;
};

/* The first element of gathered row r of image·group ig. */
__device__ __forceinline__ i64 col_row(const Im2col& g, int r, unsigned ig) {
    i64 row = g.NB > 0 ? (i64)r * g.NB + ig : (i64)ig * g.PADDED + r;
    return row * g.OH * g.OW;
}

/* Blocks over (input plane, band of `band` output rows), `bands` a plane, or, where one band
   covers a plane, over runs of `per` planes: the block's input rows are staged in shared
   memory, then each thread takes words of VW consecutive output positions of a plane and
   writes them for every kernel tap of the plane's channel (and the zero rows, from a group's
   last channel). Words never straddle rows of the matrix: OH·OW is a multiple of VW, and so
   is band·OW unless one band covers the plane. */
template <typename T, int SB>
__device__ __forceinline__ void im2col_band(const T* __restrict__ x, T* __restrict__ col,
        Im2col g, int band, int bands, int per, unsigned planes, unsigned blocks) {
    extern __shared__ __align__(16) unsigned char im_sh[];
    typedef typename Word<T, SB>::W Wd;
    const int VW = SB / sizeof(T);
    T* s = reinterpret_cast<T*>(im_sh);
    const int kk = g.KH * g.KW;
    for (unsigned b = blockIdx.x; b < blocks; b += gridDim.x) {
        unsigned first = b / bands * per;
        int oh0 = (int)(b % bands) * band, oh1 = min(g.OH, oh0 + band);
        int count = (int)min((unsigned)per, planes - first);
        int lo = max(0, oh0 * g.SH - g.PH);
        int hi = min(g.H, (oh1 - 1) * g.SH - g.PH + (g.KH - 1) * g.DH + 1);
        int n = max(0, hi - lo) * g.W;
        for (int q = 0; q < count; ++q) {
            const T* src = x + ((i64)(first + q) * g.H + lo) * g.W;
            T* dst = s + q * n;
            if (((size_t)src | (size_t)n * sizeof(T)) % 16 == 0) {
                for (int i = threadIdx.x; i < n * (int)sizeof(T) / 16; i += blockDim.x)
                    reinterpret_cast<uint4*>(dst)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
            } else {
                for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
            }
        }
        __syncthreads();
        int p0 = oh0 * g.OW, np = (oh1 - oh0) * g.OW, nv = (np + VW - 1) / VW;
        for (int item = threadIdx.x; item < count * nv; item += blockDim.x) {
            int q = item / nv, v = item - q * nv;
            unsigned plane = first + q, ig = plane / g.CG;
            int c = (int)(plane - ig * g.CG);
            const T* sp = s + q * n;
            int p = p0 + v * VW, oh = p / g.OW, ow = p - oh * g.OW;
            bool whole = v * VW + VW <= np;
            int kh = 0, kw = 0;
            for (int kidx = 0; kidx < kk; ++kidx) {
                union { T e[VW]; Wd w; } u;
                int a = oh, b2 = ow;
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    int ih = a * g.SH - g.PH + kh * g.DH, iw = b2 * g.SW - g.PW + kw * g.DW;
                    bool ok = ih >= lo && ih < hi && (unsigned)iw < (unsigned)g.W;
                    u.e[j] = ok ? sp[(ih - lo) * g.W + iw] : (T)0;
                    if (++b2 == g.OW) { b2 = 0; ++a; }
                }
                T* dst = col + col_row(g, c * kk + kidx, ig) + p;
                if (whole) {
                    *reinterpret_cast<Wd*>(dst) = u.w;
                } else {
#pragma unroll
                    for (int j = 0; j < VW; ++j) if (v * VW + j < np) dst[j] = u.e[j];
                }
                if (++kw == g.KW) { kw = 0; ++kh; }
            }
            if (c == g.CG - 1) {
                for (int r = g.REAL; r < g.PADDED; ++r) {
                    T* dst = col + col_row(g, r, ig) + p;
#pragma unroll
                    for (int j = 0; j < VW; ++j) if (v * VW + j < np) dst[j] = (T)0;
                }
            }
        }
        __syncthreads();
    }
}

/* The flat gather: col element e (< 2^31) from global memory, 8 consecutive a thread stored
   as one 16-byte vector; rows decoded once per vector and where the run crosses a row. */
template <typename T>
__device__ __forceinline__ void im2col_flat(const T* __restrict__ x, T* __restrict__ col,
        Im2col g, unsigned total) {
    const unsigned ohw = (unsigned)g.OH * g.OW;
    const int kk = g.KH * g.KW;
    for (unsigned e = (blockIdx.x * blockDim.x + threadIdx.x) * 8; e < total;
         e += gridDim.x * blockDim.x * 8) {
        unsigned rowc = e / ohw;
        int p = (int)(e - rowc * ohw);
        int oh = p / g.OW, ow = p - oh * g.OW;
        const T* plane = x;
        int ih0 = 0, iw0 = 0;
        bool zero = true;
        auto decode = [&](unsigned rc) {
            unsigned img, r;
            if (g.NB > 0) { r = rc / g.NB; img = rc - r * g.NB; }
            else { img = rc / g.PADDED; r = rc - img * g.PADDED; }
            zero = (int)r >= g.REAL;
            int c = (int)r / kk, kidx = (int)r - c * kk, kh = kidx / g.KW, kw = kidx - kh * g.KW;
            ih0 = kh * g.DH - g.PH;
            iw0 = kw * g.DW - g.PW;
            plane = x + ((i64)img * g.CG + c) * g.H * g.W;
        };
        decode(rowc);
        union { T e[8]; uint4 q[8 * sizeof(T) / 16]; } v;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            int ih = oh * g.SH + ih0, iw = ow * g.SW + iw0;
            bool ok = !zero && e + j < total && (unsigned)ih < (unsigned)g.H &&
                      (unsigned)iw < (unsigned)g.W;
            v.e[j] = ok ? plane[ih * g.W + iw] : (T)0;
            if (++ow == g.OW) {
                ow = 0;
                if (++oh == g.OH && j + 1 < 8) { oh = 0; decode(++rowc); }
            }
        }
        if (e + 8 <= total) {
#pragma unroll
            for (int j = 0; j < 8 * (int)sizeof(T) / 16; ++j)
                reinterpret_cast<uint4*>(col + e)[j] = v.q[j];
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) if (e + j < total) col[e + j] = v.e[j];
        }
    }
}

#define IM_ARGS int CG, int REAL, int PADDED, int H, int W, int KH, int KW, int SH, int SW, \
    int PH, int PW, int DH, int DW, int OH, int OW, int NB
#define IM_MAKE Im2col{CG, REAL, PADDED, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, NB}
#define BAND(S, T, SB) extern "C" __global__ void im2col_band_##S##_##SB(const T* x, T* col, \
    IM_ARGS, int band, int bands, int per, unsigned planes, unsigned blocks) { \
    im2col_band<T, SB>(x, col, IM_MAKE, band, bands, per, planes, blocks); }
BAND(2, u16, 16) BAND(2, u16, 4) BAND(2, u16, 2)
BAND(4, float, 16) BAND(4, float, 4)
extern "C" __global__ void im2col_flat_2(const u16* x, u16* col, IM_ARGS, unsigned total) {
    im2col_flat<u16>(x, col, IM_MAKE, total);
}
extern "C" __global__ void im2col_flat_4(const float* x, float* col, IM_ARGS, unsigned total) {
    im2col_flat<float>(x, col, IM_MAKE, total);
}
"#;

/// Shared memory a band may take: eight blocks of 256 threads an SM stay resident.
const BAND_BYTES: usize = 24 << 10;
/// Blocks a launch should have at least before bands grow to their shared-memory limit.
const MIN_BLOCKS: usize = 1024;
/// Gathered elements a block of the band kernel should write at least: small planes are
/// taken several a block (at one 7×7 plane a block, resnet50's layer4 3×3 gathers measured
/// 46 µs on an H200, the flat pass 30 µs).
const BLOCK_WORK: usize = 4096;
const THREADS: u32 = 256;

/// One chunk's gather: what `Im2col` in the source holds, and where.
#[derive(Clone, Copy, Debug)]
pub(super) struct Gather {
    /// Device address of the chunk's first input image.
    pub x: u64,
    /// Device address of the gathered matrix.
    pub col: u64,
    /// Images·groups in the chunk (images when `interleave`).
    pub groups: usize,
    /// Input channels a group.
    pub cg: usize,
    /// Stored rows a group (`cg·kh·kw` rounded up for 16-bit tensor cores).
    pub rows: usize,
    /// Input `[h, w]`.
    pub input: [usize; 2],
    /// Kernel `[kh, kw]`.
    pub kernel: [usize; 2],
    /// Strides `[h, w]`.
    pub stride: [usize; 2],
    /// Padding at the start of each dim.
    pub pad: [usize; 2],
    /// Dilations `[h, w]`.
    pub dilation: [usize; 2],
    /// Output `[oh, ow]`.
    pub output: [usize; 2],
    /// Rows `(r, image)` of one group instead of `(image, r)`.
    pub interleave: bool,
}

/// The im2col kernels of one element size.
pub(super) struct Im2col {
    size: usize,
    flat: Function,
    /// Band kernels by word bytes, widest first.
    band: Vec<(usize, Function)>,
}

impl Im2col {
    /// Loads the kernels for elements of `size` bytes (2 or 4).
    pub(super) fn load(ctx: &PrepareCtx<'_>, size: usize) -> Result<Im2col, String> {
        let f = |name: String| {
            ctx.programs
                .function(&IM2COL.source(), &name)
                .map_err(|e| format!("{WHAT}: loading {name}: {e}"))
        };
        let words: &[usize] = if size == 2 { &[16, 4, 2] } else { &[16, 4] };
        Ok(Im2col {
            size,
            flat: f(format!("im2col_flat_{size}"))?,
            band: words
                .iter()
                .map(|&w| Ok((w, f(format!("im2col_band_{size}_{w}"))?)))
                .collect::<Result<_, String>>()?,
        })
    }

    /// Queues the gather `g` on `stream`.
    pub(super) fn run(&self, g: &Gather, stream: &Stream) -> Result<(), String> {
        let [oh, ow] = g.output;
        let ohw = oh * ow;
        let total = g.groups * g.rows * ohw;
        if total == 0 {
            return Ok(());
        }
        let i = |v: usize| arg_i32(v, WHAT);
        let mut args = KernelArgs::new().ptr(g.x).ptr(g.col);
        let packed = [
            g.cg,
            g.cg * g.kernel[0] * g.kernel[1],
            g.rows,
            g.input[0],
            g.input[1],
            g.kernel[0],
            g.kernel[1],
            g.stride[0],
            g.stride[1],
            g.pad[0],
            g.pad[1],
            g.dilation[0],
            g.dilation[1],
            oh,
            ow,
            if g.interleave { g.groups } else { 0 },
        ];
        for v in packed {
            args = args.i32(i(v)?);
        }
        let planes = g.groups * g.cg;
        if let Some((word, f)) = self
            .band
            .iter()
            .find(|(w, _)| (ohw * self.size).is_multiple_of(*w))
            && let Some(plan) = plan_band(g, self.size, *word / self.size, planes)
        {
            let blocks = planes.div_ceil(plan.per) * plan.bands;
            let blocks = i32::try_from(blocks)
                .map_err(|_| format!("{WHAT}: {planes} planes exceed the im2col grid"))?
                as u32;
            let mut args = args
                .i32(i(plan.band)?)
                .i32(i(plan.bands)?)
                .i32(i(plan.per)?)
                .u32(planes as u32)
                .u32(blocks);
            let grid = (blocks.min(1 << 20), 1, 1);
            // SAFETY: the arguments match `im2col_band_*`; `col` holds the chunk's `total`
            // elements, `x` its `planes` input planes, and `plan.shared` bytes hold a block's
            // staged input rows.
            return unsafe { f.launch(stream, grid, (THREADS, 1, 1), plan.shared, &mut args) }
                .map_err(|e| format!("{WHAT}: {e}"));
        }
        let total = i32::try_from(total)
            .map_err(|_| format!("{WHAT}: im2col chunk exceeds 2^31 elements"))?
            as u32;
        let blocks = grid_for((total as usize).div_ceil(8), THREADS);
        let mut args = args.u32(total);
        // SAFETY: the arguments match `im2col_flat_*`; `col` holds `total` elements.
        unsafe {
            self.flat
                .launch(stream, (blocks, 1, 1), (THREADS, 1, 1), 0, &mut args)
        }
        .map_err(|e| format!("{WHAT}: {e}"))
    }
}

/// Bytes of the input rows, of `size`-byte elements, that a band of `band` output rows reads.
fn staged_bytes(g: &Gather, band: usize, size: usize) -> usize {
    let span = (band - 1) * g.stride[0] + (g.kernel[0] - 1) * g.dilation[0] + 1;
    span.min(g.input[0]) * g.input[1] * size
}

/// How the band kernel covers the gather of `size`-byte elements (words of `lanes`
/// elements), `None` where the flat pass runs: 1×1 kernels (a strided copy that reads each
/// input once anyway) and bands whose input rows exceed [`BAND_BYTES`].
fn plan_band(g: &Gather, size: usize, lanes: usize, planes: usize) -> Option<BandPlan> {
    let kk = g.kernel[0] * g.kernel[1];
    if kk == 1 || planes >= 1 << 31 {
        return None;
    }
    let band = band_rows(g, size, lanes, planes)?;
    let [oh, ow] = g.output;
    let bytes = staged_bytes(g, band, size);
    let bands = oh.div_ceil(band);
    let per = if bands == 1 {
        (BLOCK_WORK / (kk * oh * ow))
            .min(BAND_BYTES / bytes.max(1))
            .min(planes / MIN_BLOCKS)
            .max(1)
    } else {
        1
    };
    Some(BandPlan {
        band,
        bands,
        per,
        shared: (per * bytes) as u32,
    })
}

/// Output rows a band: whole words of `lanes` elements a band (unless one band covers the
/// plane), its input rows within [`BAND_BYTES`], smaller while the launch would have fewer
/// than [`MIN_BLOCKS`] blocks; `None` when no band fits.
fn band_rows(g: &Gather, size: usize, lanes: usize, planes: usize) -> Option<usize> {
    let [oh, ow] = g.output;
    let fits = |band: usize| staged_bytes(g, band, size) <= BAND_BYTES;
    if fits(oh) && (planes >= MIN_BLOCKS || oh == 1) {
        return Some(oh);
    }
    let step = lanes / gcd(ow, lanes);
    let wanted = oh.div_ceil(MIN_BLOCKS.div_ceil(planes.max(1)));
    let mut band = wanted.next_multiple_of(step).min(oh.next_multiple_of(step));
    while band > step && !fits(band) {
        band -= step;
    }
    if band >= oh {
        return fits(oh).then_some(oh);
    }
    fits(band).then_some(band)
}

/// The band kernel's cover of one gather.
#[derive(Debug)]
struct BandPlan {
    /// Output rows a band, bands a plane, planes a block (several only when one band
    /// covers a plane).
    band: usize,
    bands: usize,
    per: usize,
    /// Shared memory a block stages.
    shared: u32,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A square 2-D gather of `images` images of `channels` channels.
    fn gather(images: usize, channels: usize, hw: usize, k: usize, stride: usize) -> Gather {
        let pad = k / 2;
        let out = (hw + 2 * pad - k) / stride + 1;
        Gather {
            x: 0,
            col: 0,
            groups: images,
            cg: channels,
            rows: channels * k * k,
            input: [hw, hw],
            kernel: [k, k],
            stride: [stride, stride],
            pad: [pad, pad],
            dilation: [1, 1],
            output: [out, out],
            interleave: false,
        }
    }

    fn assert_within_limits(g: &Gather, size: usize, lanes: usize, p: &BandPlan) {
        let [oh, ow] = g.output;
        let staged = staged_bytes(g, p.band, size);
        assert!(p.per * staged <= BAND_BYTES, "{p:?}");
        assert_eq!(p.shared as usize, p.per * staged);
        assert_eq!(p.bands, oh.div_ceil(p.band));
        assert!(p.bands == 1 || (p.band * ow).is_multiple_of(lanes), "{p:?}");
        assert!(p.per == 1 || p.bands == 1, "{p:?}");
    }

    #[test]
    fn large_planes_take_a_block_each_in_one_band() {
        let g = gather(32, 64, 56, 3, 1);
        let p = plan_band(&g, 2, 8, 32 * 64).expect("banded");
        assert_eq!((p.band, p.bands, p.per), (56, 1, 1));
        assert_within_limits(&g, 2, 8, &p);
    }

    #[test]
    fn few_planes_split_into_bands_of_whole_words() {
        let g = gather(32, 3, 224, 7, 2);
        let p = plan_band(&g, 2, 8, 96).expect("banded");
        assert!(p.bands > 1 && 96 * p.bands >= MIN_BLOCKS, "{p:?}");
        assert_within_limits(&g, 2, 8, &p);
        let g = gather(1, 3, 30, 3, 1);
        let p = plan_band(&g, 2, 4, 3).expect("banded");
        assert!(p.bands > 1, "{p:?}");
        assert_within_limits(&g, 2, 4, &p);
    }

    #[test]
    fn small_planes_share_a_block() {
        let g = gather(32, 512, 7, 3, 1);
        let p = plan_band(&g, 2, 1, 32 * 512).expect("banded");
        assert_eq!((p.bands, p.per), (1, BLOCK_WORK / (9 * 49)));
        assert_within_limits(&g, 2, 1, &p);
        let few = plan_band(&g, 2, 1, 1500).expect("banded");
        assert_eq!(
            few.per, 1,
            "fewer than two blocks' worth of planes a block: {few:?}"
        );
    }

    #[test]
    fn pointwise_and_wide_rows_run_the_flat_pass() {
        let g = gather(32, 256, 56, 1, 1);
        assert!(plan_band(&g, 2, 8, 32 * 256).is_none());
        let mut wide = gather(1, 2, 4, 3, 1);
        wide.input = [4, 4000];
        wide.output = [4, 4000];
        let f32_rows = plan_band(&wide, 4, 4, 2);
        assert!(
            f32_rows.is_none(),
            "3 rows of 4000 f32 exceed a band: {f32_rows:?}"
        );
        let f16_rows = plan_band(&wide, 2, 8, 2).expect("3 rows of 4000 f16 fit");
        assert_eq!(f16_rows.band, 1);
        assert_within_limits(&wide, 2, 8, &f16_rows);
    }

    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::IM2COL);
    }
}
