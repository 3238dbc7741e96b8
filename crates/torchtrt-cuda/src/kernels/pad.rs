//! `Pad` layers on any dtype whose pads (and axes) are constants, in every mode: each output
//! element maps, dim by dim, to an input coordinate of the cropped input (negative pads crop
//! first, as onnxruntime does) or to the fill value, read on the device from the value
//! input (zero without one). Each thread writes 16 bytes of output per step when aligned.

use torchtrt_core::layers::{InferInput, LayerKind, PadMode, int_vector, resolve_pads};
use torchtrt_plugin_api::DeviceTensor;

use super::access::MAX_RANK;
use super::layout::{THREADS, Walk, blocks, contiguous_strides, generated};
use super::map::numel;
use super::operands::dims;
use super::{DeviceKernel, PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Pad";

const BODY: &str = r#"
/* The input coordinate along one dim for output coordinate c (relative to the cropped
   input), or inside = false for the fill value. */
template <typename SI>
__device__ __forceinline__ SI source_of(SI c, SI beg, SI len, int mode, bool& inside) {
    SI r = c - beg;
    if (r < 0 || r >= len) {
        if (mode == 0) {
            inside = false;
        } else if (mode == 1) {
            if (len == 1) {
                r = 0;
            } else {
                SI m = 2 * (len - 1);
                r %= m;
                if (r < 0) r += m;
                if (r >= len) r = m - r;
            }
        } else if (mode == 2) {
            r = r < 0 ? 0 : len - 1;
        } else {
            r %= len;
            if (r < 0) r += len;
        }
    }
    return r;
}

/* Output index i: its innermost coordinate c0, and the input offset and inside flag of its
   outer coordinates. */
template <typename I>
__device__ __forceinline__ void locate(I i, int mode, int rank, const FastDiv* dv,
                                       const i64 (*p)[MAX_RANK], I& c0,
                                       typename Index<I>::SI& outer, bool& inside) {
    typedef typename Index<I>::SI SI;
    I rest = Index<I>::div(dv[0], i);
    c0 = i - rest * (I)dv[0].d;
    outer = 0;
    inside = true;
#pragma unroll
    for (int k = 1; k < MAX_RANK; ++k) {
        if (k < rank) {
            I c = rest;
            if (k + 1 < rank) {
                I q = Index<I>::div(dv[k], rest);
                c = rest - q * (I)dv[k].d;
                rest = q;
            }
            SI r = source_of<SI>((SI)c, (SI)p[0][k], (SI)p[1][k], mode, inside);
            outer += ((SI)p[2][k] + r) * (SI)p[3][k];
        }
    }
}

/* V consecutive outputs per thread step, stored as one access: the outer coordinates are
   located once and the innermost one advanced, relocating when it wraps. */
template <typename S, typename I, int V>
__device__ __forceinline__ void pad(const S* src, S* dst, const S* fill, u64 n, int mode,
                                    int rank, const FastDiv* dv, const i64 (*p)[MAX_RANK]) {
    typedef typename Index<I>::SI SI;
    S fv;
    if (fill) {
        fv = *fill;
    } else {
        u8* b = reinterpret_cast<u8*>(&fv);
        for (int k = 0; k < (int)sizeof(S); ++k) b[k] = 0;
    }
    const SI beg = (SI)p[0][0], len = (SI)p[1][0], lo = (SI)p[2][0], st = (SI)p[3][0];
    const I d0 = (I)dv[0].d;
    I packs = (I)(n / V);
    GRID_STRIDE(I, q, packs) {
        I i = q * V, c0;
        SI outer;
        bool oin;
        locate<I>(i, mode, rank, dv, p, c0, outer, oin);
        Pack<S, V> w;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            if (c0 == d0) locate<I>(i + e, mode, rank, dv, p, c0, outer, oin);
            bool in = oin;
            SI r = source_of<SI>((SI)c0, beg, len, mode, in);
            w.e[e] = in ? src[outer + (lo + r) * st] : fv;
            ++c0;
        }
        st_pack<S, V>(dst + i, w);
    }
    GRID_STRIDE(I, t, n - (u64)packs * V) {
        I i = packs * V + t, c0;
        SI outer;
        bool in;
        locate<I>(i, mode, rank, dv, p, c0, outer, in);
        SI r = source_of<SI>((SI)c0, beg, len, mode, in);
        dst[i] = in ? src[outer + (lo + r) * st] : fv;
    }
}

#define PAD_ENTRY(NAME, S, I, V) \
extern "C" __global__ void NAME(const S* src, S* dst, const S* fill, u64 n, int mode, int rank, \
                                DIMS_PARAMS, STRIDE_PARAMS(pb), STRIDE_PARAMS(pl), \
                                STRIDE_PARAMS(po), STRIDE_PARAMS(ps)) { \
    DIMS_INIT(dv); \
    const i64 p[4][MAX_RANK] = {STRIDES_INIT(pb), STRIDES_INIT(pl), STRIDES_INIT(po), \
                                STRIDES_INIT(ps)}; \
    pad<S, I, V>(src, dst, fill, n, mode, rank, dv, p); \
}
#define PAD_ENTRIES(E, S) \
    PAD_ENTRY(pad32_##E, S, u32, 1) PAD_ENTRY(pad64_##E, S, u64, 1) \
    PAD_ENTRY(padv32_##E, S, u32, 16 / E) PAD_ENTRY(padv64_##E, S, u64, 16 / E)
PAD_ENTRIES(1, u8)
PAD_ENTRIES(2, u16)
PAD_ENTRIES(4, u32)
PAD_ENTRIES(8, u64)
"#;

/// The program, generated once per process.
pub(crate) fn program() -> Result<ProgramSource, String> {
    generated("core_pad".into(), || BODY.into())
}

/// Prepares a `Pad` layer whose pads and axes are constants.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Pad(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let rank = x.shape.len();
    let pads = inputs.get(1)?.value?;
    let axes = match inputs.get(3) {
        Some(a) => Some(a.value?),
        None => None,
    };
    if rank > MAX_RANK || ![1, 2, 4, 8].contains(&x.dtype.size()) {
        return None;
    }
    Some((|| {
        let pads = int_vector("the pads input of Pad", pads)?;
        let axes = axes
            .map(|a| int_vector("the axes input of Pad", a))
            .transpose()?;
        let pads =
            resolve_pads(rank, &pads, axes.as_deref()).map_err(|e| format!("{WHAT}: {e}"))?;
        let program = program()?;
        let e = x.dtype.size();
        let load = |kind: &str| {
            ctx.programs
                .function(&program, &format!("{kind}_{e}"))
                .map_err(|err| format!("{WHAT}: {err}"))
        };
        let mode = match l.mode {
            PadMode::Constant => 0,
            PadMode::Reflect => 1,
            PadMode::Edge => 2,
            PadMode::Wrap => 3,
        };
        Ok(Box::new(PadKernel {
            mode,
            pads,
            entries: [load("pad32")?, load("pad64")?],
            packed: [load("padv32")?, load("padv64")?],
        }) as Box<dyn DeviceKernel>)
    })())
}

struct PadKernel {
    mode: i32,
    pads: Vec<(i64, i64)>,
    /// One output element per thread step, 32- and 64-bit indexing.
    entries: [Function; 2],
    /// 16 bytes of output per thread step.
    packed: [Function; 2],
}

impl DeviceKernel for PadKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let (Some(x), [o]) = (inputs.first(), outputs) else {
            return Err(format!("{WHAT} takes a data input and one output"));
        };
        let shape = dims(&x.desc)?;
        let out = dims(&o.desc)?;
        if shape.len() != self.pads.len()
            || out.len() != shape.len()
            || x.desc.dtype != o.desc.dtype
        {
            return Err(format!(
                "{WHAT}: {}{shape:?} with pads {:?} cannot give {}{out:?}",
                x.desc.dtype, self.pads, o.desc.dtype
            ));
        }
        let n = numel(&o.desc.shape);
        if n == 0 {
            return Ok(());
        }
        let src_strides = contiguous_strides(&shape);
        let mut params = Vec::with_capacity(shape.len());
        for (k, (&d, &(b, e))) in shape.iter().zip(&self.pads).enumerate() {
            let d = d as i64;
            let lo = b.saturating_neg().max(0);
            let kept = d - lo - e.saturating_neg().max(0);
            if kept < 0 || d + b + e != out[k] as i64 {
                return Err(format!(
                    "{WHAT}: pads ({b}, {e}) of dim {k} ({d}) do not give {}",
                    out[k]
                ));
            }
            if self.mode != 0 && kept == 0 {
                return Err(format!("{WHAT}: dim {k} has no elements left to repeat"));
            }
            params.push([b.max(0), kept, lo, src_strides[k]]);
        }
        let mut walk = merge_unpadded(Walk::new(out, params));
        if walk.dims.is_empty() {
            walk = Walk::new(vec![1], vec![[0, 1, 0, 0]]);
        }
        let wide = usize::from(n.max(numel(&x.desc.shape)) >= 1 << 31);
        let pack = 16 / x.desc.dtype.size();
        let (f, items) = if o.ptr.is_multiple_of(16) && n >= pack {
            (&self.packed[wide], n / pack)
        } else {
            (&self.entries[wide], n)
        };
        let fill = match inputs.get(2) {
            Some(c) if numel(&c.desc.shape) > 0 => c.ptr,
            _ => 0,
        };
        let args = KernelArgs::new()
            .ptr(x.ptr)
            .ptr(o.ptr)
            .ptr(fill)
            .i64(n as i64)
            .i32(self.mode);
        let mut args = walk.push_args(args, WHAT)?;
        // SAFETY: the arguments match the entry point; every offset stays inside the input,
        // which with the output and fill value outlives the queued work.
        unsafe { f.launch(stream, (blocks(items), 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}

/// Merges neighbouring dims that are neither padded nor cropped (`[begin, kept, lo,
/// stride]` = `[0, extent, 0, _]`) into one, and drops dims of extent 1 that are neither.
fn merge_unpadded(walk: Walk<4>) -> Walk<4> {
    let plain = |d: usize, p: &[i64; 4]| p[0] == 0 && p[2] == 0 && p[1] == d as i64;
    let mut out = Walk::new(Vec::new(), Vec::new());
    for (&d, p) in walk.dims.iter().zip(&walk.strides) {
        if d == 1 && plain(d, p) {
            continue;
        }
        match (out.dims.last_mut(), out.strides.last_mut()) {
            (Some(pd), Some(pp)) if plain(*pd, pp) && plain(d, p) => {
                *pd *= d;
                *pp = [0, *pd as i64, 0, p[3]];
            }
            _ => {
                out.dims.push(d);
                out.strides.push(*p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_only_untouched_neighbours() {
        let w = Walk::new(
            vec![2, 3, 1, 6, 9],
            vec![
                [0, 2, 0, 15],
                [0, 3, 0, 5],
                [0, 1, 0, 5],
                [1, 4, 0, 1],
                [0, 9, 0, 1],
            ],
        );
        let m = merge_unpadded(w);
        assert_eq!(m.dims, vec![6, 6, 9]);
        assert_eq!(m.strides, vec![[0, 6, 0, 5], [1, 4, 0, 1], [0, 9, 0, 1]]);
    }
}
