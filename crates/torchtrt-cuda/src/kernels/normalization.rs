//! Mean/variance normalization (`Normalization` layers: layer, instance and group norm)
//! over one run of consecutive axes, two passes in f32 per group, then
//! `(x − mean) / √(var + eps) · scale + bias` with scale and bias broadcast to `x`;
//! `RmsNormalization` is the same with the mean taken as 0 and no bias. Axis
//! sets that are not consecutive run on the host. Layer norm over contiguous rows of up to
//! [`REG_ROW_MAX`] elements, with scale and bias (if any) indexed by the position in the row,
//! keeps each row in one warp's registers (`norm_regs`, or `norm_packs` moving 16-byte packs
//! when the row is whole packs and the operands aligned): x is read once, and no broadcast
//! index is computed per element.

use torchtrt_core::layers::{InferInput, LayerKind, Normalization};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{arg_i32, dims, expect_dtype, expect_inputs};
use super::prelude::{Program, dtype_suffix, with_prelude};
use super::reduce::axis_run;
use super::rows::{ROWS, RowKernels, entry_points, split};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Normalization";

const PTRS: &str = "const void* x, void* y, const void* scale, const void* bias";
const PARAMS: &str = ", float eps, int rms, int s0, int s1, int s2, int s3, int s4, int s5, int s6, \
    int s7, int s8, int b0, int b1, int b2, int b3, int b4, int b5, int b6, int b7, int b8";
const ARGS: &str = ", eps, rms, Bcast{s0, s1, s2, s3, s4, s5, s6, s7, s8}, \
    Bcast{b0, b1, b2, b3, b4, b5, b6, b7, b8}";

static PROGRAM: Program = Program::new("core_normalization", || {
    let ep = entry_points("norm", PTRS, "x, y, scale, bias", PARAMS, ARGS);
    let mut regs = String::new();
    for (kind, counts) in [("regs", &REG_COUNTS), ("packs", &PACK_COUNTS)] {
        for n in counts {
            for (dt, d) in [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")] {
                regs.push_str(&format!(
                    "extern \"C\" __global__ void __launch_bounds__(128) norm_{kind}_{n}_{dt}({PTRS}, \
                     i64 outer, int R, float eps, int rms) \
                     {{ norm_{kind}<{d}, {n}>(x, y, scale, bias, outer, R, eps, rms); }}\n"
                ));
            }
        }
    }
    with_prelude(&format!("{ROWS}{BODY}{ep}{regs}"))
});

/// Elements per lane of the register-row kernels (`norm_regs_<n>_<dt>`): rows of up to
/// 32 · n elements.
const REG_COUNTS: [usize; 4] = [4, 8, 16, 32];

/// 16-byte packs per lane of the packed register-row kernels (`norm_packs_<n>_<dt>`): rows
/// of up to 32 · n packs.
const PACK_COUNTS: [usize; 4] = [1, 2, 4, 8];

/// The longest row the register kernels take.
pub(crate) const REG_ROW_MAX: usize = 32 * 32;

/// A broadcast table (see `broadcast_index`) reading element `r` of the reduced run.
fn indexed_by_row(table: &[i32; 9], r: usize) -> bool {
    table == &[1, 1, 0, 1, r as i32, 1, 1, 1, 0]
}

const BODY: &str = r#"
/* Where a broadcast operand reads for (outer o, reduced r, inner i): per part,
   ((index / div) % mod) * mul. */
struct Bcast { int d0, m0, s0, d1, m1, s1, d2, m2, s2; };
__device__ __forceinline__ i64 bidx(const Bcast& b, i64 o, i64 r, i64 i) {
    return ((o / b.d0) % b.m0) * b.s0 + ((r / b.d1) % b.m1) * b.s1 + ((i / b.d2) % b.m2) * b.s2;
}
template <typename D>
__device__ __forceinline__ float affine(float v, const void* scale, const void* bias,
    const Bcast& sb, const Bcast& bb, i64 o, i64 r, i64 i) {
    if (scale) v *= LOAD(D, scale, bidx(sb, o, r, i));
    if (bias) v += LOAD(D, bias, bidx(bb, o, r, i));
    return v;
}

template <typename D, bool B>
__device__ __forceinline__ void norm_rows(const void* x, void* y, const void* scale,
    const void* bias, i64 outer, int R, float eps, int rms, Bcast sb, Bcast bb) {
    typedef Grp<B> G;
    __shared__ float sh[32];
    for (i64 row = G::first(); row < outer; row += G::step()) {
        i64 base = row * R;
        float mean = 0.0f;
        if (!rms) {
            float s = 0.0f;
            for (int r = G::lane(); r < R; r += G::size()) s += LOAD(D, x, base + r);
            mean = G::reduce(0, s, sh) / (float)R;
        }
        float q = 0.0f;
        for (int r = G::lane(); r < R; r += G::size()) {
            float d = LOAD(D, x, base + r) - mean;
            q += d * d;
        }
        float inv = 1.0f / sqrtf(G::reduce(0, q, sh) / (float)R + eps);
        for (int r = G::lane(); r < R; r += G::size()) {
            float v = (LOAD(D, x, base + r) - mean) * inv;
            STORE(D, y, base + r, affine<D>(v, scale, bias, sb, bb, row, r, 0));
        }
    }
}

/* A warp per contiguous row of R <= 32 N elements, the row in registers (lane l holds
   elements l, l + 32, ...); scale and bias, when given, are indexed by the position r. */
template <typename D, int N>
__device__ __forceinline__ void norm_regs(const void* x, void* y, const void* scale,
    const void* bias, i64 outer, int R, float eps, int rms) {
    i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= outer) return;
    int lane = threadIdx.x & 31;
    i64 base = row * R;
    float v[N];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        int r = lane + 32 * k;
        v[k] = r < R ? LOAD(D, x, base + r) : 0.0f;
        s += v[k];
    }
    float mean = rms ? 0.0f : warp_reduce(0, s) / (float)R;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        float d = lane + 32 * k < R ? v[k] - mean : 0.0f;
        q += d * d;
    }
    float inv = 1.0f / sqrtf(warp_reduce(0, q) / (float)R + eps);
#pragma unroll
    for (int k = 0; k < N; ++k) {
        int r = lane + 32 * k;
        if (r >= R) break;
        float o = (v[k] - mean) * inv;
        if (scale) o *= LOAD(D, scale, r);
        if (bias) o += LOAD(D, bias, r);
        STORE(D, y, base + r, o);
    }
}

/* As norm_regs, the row moved in 16-byte packs of V elements (R a multiple of V, every
   operand 16-byte aligned): lane l holds packs l, l + 32, ... — up to P of them. */
template <typename D, int P>
__device__ __forceinline__ void norm_packs(const void* x, void* y, const void* scale,
    const void* bias, i64 outer, int R, float eps, int rms) {
    const int V = Lanes<D>::V;
    i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= outer) return;
    const int lane = threadIdx.x & 31, packs = R / V;
    const i64 base = row * R;
    float v[P][V];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
        int c = lane + 32 * k;
        if (c < packs) {
            Lanes<D>::load(x, base + (i64)c * V, v[k]);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) v[k][j] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < V; ++j) s += v[k][j];
    }
    float mean = rms ? 0.0f : warp_reduce(0, s) / (float)R;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
        if (lane + 32 * k >= packs) break;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            float d = v[k][j] - mean;
            q += d * d;
        }
    }
    float inv = 1.0f / sqrtf(warp_reduce(0, q) / (float)R + eps);
#pragma unroll
    for (int k = 0; k < P; ++k) {
        int c = lane + 32 * k;
        if (c >= packs) break;
        float sc[V], bi[V];
        if (scale) Lanes<D>::load(scale, (i64)c * V, sc);
        if (bias) Lanes<D>::load(bias, (i64)c * V, bi);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            v[k][j] = (v[k][j] - mean) * inv;
            if (scale) v[k][j] *= sc[j];
            if (bias) v[k][j] += bi[j];
        }
        Lanes<D>::store(y, base + (i64)c * V, v[k]);
    }
}

template <typename D>
__device__ __forceinline__ void norm_cols(const void* x, void* y, const void* scale,
    const void* bias, i64 outer, int R, int inner, float eps, int rms, Bcast sb, Bcast bb) {
    GRID_LOOP(i, outer * inner) {
        i64 o = i / inner, in = i % inner;
        i64 base = o * R * (i64)inner + in;
        float s = 0.0f;
        if (!rms)
            for (int r = 0; r < R; ++r) s += LOAD(D, x, base + (i64)r * inner);
        float mean = s / (float)R, q = 0.0f;
        for (int r = 0; r < R; ++r) {
            float d = LOAD(D, x, base + (i64)r * inner) - mean;
            q += d * d;
        }
        float inv = 1.0f / sqrtf(q / (float)R + eps);
        for (int r = 0; r < R; ++r) {
            i64 at = base + (i64)r * inner;
            float v = (LOAD(D, x, at) - mean) * inv;
            STORE(D, y, at, affine<D>(v, scale, bias, sb, bb, o, r, in));
        }
    }
}
"#;

struct NormKernel {
    dtype: DType,
    layer: Normalization,
    /// Root mean square only (no mean, no bias).
    rms: bool,
    rows: RowKernels,
    /// `norm_regs_<n>_<dt>` for each of [`REG_COUNTS`].
    regs: Vec<Function>,
    /// `norm_packs_<n>_<dt>` for each of [`PACK_COUNTS`].
    packs: Vec<Function>,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let (l, rms) = match layer {
        LayerKind::Normalization(l) => (l.clone(), false),
        LayerKind::RmsNormalization(l) => (
            Normalization {
                axes: l.axes.clone(),
                epsilon: l.epsilon,
            },
            true,
        ),
        _ => return None,
    };
    let x = inputs.first()?;
    if inputs.iter().any(|i| i.dtype != x.dtype) {
        return None;
    }
    axis_run(&l.resolved_axes(x.shape.len()).ok()?)?;
    let rows = RowKernels::load(ctx, &PROGRAM.source(), "norm", x.dtype)?;
    let suffix = dtype_suffix(x.dtype)?;
    let load = |kind: &str, counts: &[usize]| {
        counts
            .iter()
            .map(|n| {
                let entry = format!("norm_{kind}_{n}_{suffix}");
                ctx.programs
                    .function(&PROGRAM.source(), &entry)
                    .map_err(|e| format!("loading {entry}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()
    };
    let (regs, packs) = (load("regs", &REG_COUNTS), load("packs", &PACK_COUNTS));
    Some(rows.and_then(|rows| {
        Ok(Box::new(NormKernel {
            dtype: x.dtype,
            layer: l,
            rms,
            rows,
            regs: regs?,
            packs: packs?,
        }) as Box<dyn DeviceKernel>)
    }))
}

/// How an operand of shape `t` broadcast to `x` is indexed from `[outer, R, inner]`
/// positions, the parts being `x`'s dims `..first`, `first..last`, `last..`: per part
/// `(div, mod, mul)`. `None` when within a part the dims it varies along are not one run
/// laid out contiguously (no such layer comes out of the ONNX importer).
fn broadcast_index(t: &[usize], x: &[usize], first: usize, last: usize) -> Option<[i32; 9]> {
    if t.len() > x.len() {
        return None;
    }
    let lead = x.len() - t.len();
    let size = |d: usize| if d < lead { 1 } else { t[d - lead] };
    if (0..x.len()).any(|d| size(d) != 1 && size(d) != x[d]) {
        return None;
    }
    let mut stride = vec![0usize; x.len()];
    let mut s = 1;
    for d in (0..x.len()).rev() {
        if size(d) > 1 {
            stride[d] = s;
            s *= size(d);
        }
    }
    let mut out = [0i32; 9];
    for (p, range) in [(0, first), (first, last), (last, x.len())]
        .into_iter()
        .enumerate()
    {
        let varying: Vec<usize> = (range.0..range.1).filter(|&d| size(d) > 1).collect();
        let (div, modulo, mul) = match (varying.first(), varying.last()) {
            (Some(&lo), Some(&hi)) => {
                if hi - lo + 1 != varying.len() {
                    return None;
                }
                let div: usize = x[hi + 1..range.1].iter().product();
                let modulo: usize = x[lo..=hi].iter().product();
                (div, modulo, stride[hi])
            }
            _ => (1, 1, 0),
        };
        let c = |v: usize| i32::try_from(v).ok();
        out[3 * p..3 * p + 3].copy_from_slice(&[c(div)?, c(modulo)?, c(mul)?]);
    }
    Some(out)
}

impl DeviceKernel for NormKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_inputs(WHAT, inputs, outputs, 1..=3 - usize::from(self.rms), 1)?;
        expect_dtype(WHAT, inputs, self.dtype)?;
        expect_dtype(WHAT, outputs, self.dtype)?;
        let x = dims(&inputs[0].desc)?;
        if dims(&outputs[0].desc)? != x {
            return Err(format!(
                "{WHAT}: output {:?} must have the input's shape {x:?}",
                outputs[0].desc.shape
            ));
        }
        let axes = self
            .layer
            .resolved_axes(x.len())
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let (first, last) = axis_run(&axes)
            .ok_or_else(|| format!("{WHAT}: axes {:?} are not consecutive", self.layer.axes))?;
        let mut tables = [[1, 1, 0, 1, 1, 0, 1, 1, 0]; 2];
        let mut ptrs = [inputs[0].ptr, outputs[0].ptr, 0, 0];
        for (k, t) in inputs[1..].iter().enumerate() {
            let shape = dims(&t.desc)?;
            tables[k] = broadcast_index(&shape, &x, first, last).ok_or_else(|| {
                format!(
                    "{WHAT}: {} {shape:?} does not broadcast to {x:?} in a layout the CUDA kernel reads",
                    ["scale", "bias"][k]
                )
            })?;
            ptrs[2 + k] = t.ptr;
        }
        let eps = self.layer.epsilon;
        let [outer, r, inner] = split(&x, first, last);
        let by_row = (0..2).all(|k| ptrs[2 + k] == 0 || indexed_by_row(&tables[k], r));
        if inner == 1 && r <= REG_ROW_MAX && by_row && outer > 0 {
            return self.launch_regs(stream, &ptrs, outer, r, eps);
        }
        let rms = i32::from(self.rms);
        let extra = |a: KernelArgs| {
            tables
                .iter()
                .flatten()
                .fold(a.f32(eps).i32(rms), |a, &v| a.i32(v))
        };
        self.rows
            .launch(stream, &ptrs, [outer, r, inner], extra, WHAT)
    }
}

impl NormKernel {
    /// Queues the register-row kernel with the fewest elements per lane that hold a row of
    /// `r`: `norm_packs` when the row is whole 16-byte packs and every operand is aligned to
    /// them, else `norm_regs`.
    fn launch_regs(
        &self,
        stream: &Stream,
        ptrs: &[u64; 4],
        outer: usize,
        r: usize,
        eps: f32,
    ) -> Result<(), String> {
        let per_pack = 16 / self.dtype.size();
        let packed = r.is_multiple_of(per_pack) && ptrs.iter().all(|p| p.is_multiple_of(16));
        let (kernels, counts, per_lane) = if packed {
            (&self.packs, &PACK_COUNTS[..], per_pack)
        } else {
            (&self.regs, &REG_COUNTS[..], 1)
        };
        let k = counts
            .iter()
            .position(|&n| r <= 32 * n * per_lane)
            .ok_or_else(|| format!("{WHAT}: a row of {r} is too long for the register kernel"))?;
        let mut args = ptrs
            .iter()
            .fold(KernelArgs::new(), |a, &p| a.ptr(p))
            .i64(outer as i64)
            .i32(arg_i32(r, WHAT)?)
            .f32(eps)
            .i32(i32::from(self.rms));
        let grid = u32::try_from(outer.div_ceil(4))
            .map_err(|_| format!("{WHAT}: {outer} rows exceed the CUDA grid"))?;
        // SAFETY: `norm_regs` and `norm_packs` take the four pointers, `i64 outer`, `int R`,
        // `float eps`, `int rms`; the tensors hold `outer · r` elements (scale and bias `r`),
        // checked by `execute`; `norm_packs` only for rows of whole packs from aligned
        // pointers (null ones included).
        unsafe { kernels[k].launch(stream, (grid, 1, 1), (128, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    use super::broadcast_index;

    #[test]
    fn layer_norm_scale_follows_the_reduced_axis() {
        let got = broadcast_index(&[96], &[2, 7, 96], 2, 3).unwrap();
        assert_eq!(got, [1, 1, 0, 1, 96, 1, 1, 1, 0]);
    }

    #[test]
    fn instance_norm_scale_follows_the_channel() {
        let got = broadcast_index(&[6, 1, 1], &[2, 6, 5, 7], 2, 4).unwrap();
        assert_eq!(got, [1, 6, 1, 1, 1, 0, 1, 1, 0]);
    }

    #[test]
    fn scale_spanning_parts_splits_its_strides() {
        let got = broadcast_index(&[2, 1, 8], &[2, 3, 8], 1, 2).unwrap();
        assert_eq!(got, [1, 2, 8, 1, 1, 0, 1, 8, 1]);
    }

    #[test]
    fn gapped_or_mismatched_operands_are_refused() {
        assert!(broadcast_index(&[2, 1, 8], &[2, 3, 8], 0, 3).is_none());
        assert!(broadcast_index(&[5], &[2, 3, 8], 2, 3).is_none());
        assert!(broadcast_index(&[1, 2, 3, 8], &[2, 3, 8], 2, 3).is_none());
    }
}
