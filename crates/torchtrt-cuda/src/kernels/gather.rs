//! `Gather` layers on any data dtype with i32 or i64 indices: the data viewed as
//! `[outer, D, inner]`, the output as `[outer, M, inner]` with `M` the number of indices;
//! negative indices count from the end. Rows of `inner` elements move as 16-byte elements
//! when aligned. An index out of range yields zeros on the device (constant indices are
//! checked at prepare time).

use torchtrt_core::layers::{InferInput, LayerKind, normalize_axis};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::layout::{THREADS, blocks, fast_div, generated};
use super::operands::{dims, expect_arity};
use super::{DeviceKernel, PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Gather";

const BODY: &str = r#"
template <typename S> __device__ __forceinline__ S zero_of() {
    S z;
    u8* p = reinterpret_cast<u8*>(&z);
#pragma unroll
    for (int k = 0; k < (int)sizeof(S); ++k) p[k] = 0;
    return z;
}

template <typename S, typename X, typename I>
__device__ __forceinline__ void gather(const S* data, const X* idx, S* out, u64 n,
                                       FastDiv inner, FastDiv m, i64 d) {
    GRID_STRIDE(I, i, n) {
        I q = Index<I>::div(inner, i);
        I j = i - q * (I)inner.d;
        I o = Index<I>::div(m, q);
        I t = q - o * (I)m.d;
        i64 v = (i64)idx[t];
        if (v < 0) v += d;
        out[i] = (v >= 0 && v < d) ? data[((i64)o * d + v) * (i64)inner.d + (i64)j] : zero_of<S>();
    }
}

#define GATHER_ENTRY(NAME, S, X, I) \
extern "C" __global__ void NAME(const S* data, const X* idx, S* out, u64 n, u32 di, u32 mi, \
                                u32 si, u32 dm, u32 mm, u32 sm, i64 d) { \
    gather<S, X, I>(data, idx, out, n, FastDiv{di, mi, si}, FastDiv{dm, mm, sm}, d); \
}
#define GATHER_SIZE(E, S) \
    GATHER_ENTRY(gather32_##E##_i32, S, i32, u32) GATHER_ENTRY(gather64_##E##_i32, S, i32, u64) \
    GATHER_ENTRY(gather32_##E##_i64, S, i64, u32) GATHER_ENTRY(gather64_##E##_i64, S, i64, u64)
GATHER_SIZE(1, u8)
GATHER_SIZE(2, u16)
GATHER_SIZE(4, u32)
GATHER_SIZE(8, u64)
GATHER_SIZE(16, uint4)
"#;

/// The program, generated once per process.
pub(crate) fn program() -> Result<ProgramSource, String> {
    generated("core_gather".into(), || BODY.into())
}

/// Prepares a `Gather` layer; constant indices out of range are an error.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Gather(l) = layer else {
        return None;
    };
    let (data, idx) = (inputs.first()?, inputs.get(1)?);
    let index = match idx.dtype {
        DType::I32 => "i32",
        DType::I64 => "i64",
        _ => return None,
    };
    Some((|| {
        let axis = normalize_axis(l.axis, data.shape.len()).map_err(|e| format!("{WHAT}: {e}"))?;
        if let (Some(v), Some(d)) = (idx.value, data.shape[axis].as_const()) {
            let values = v.to_i64_vec().unwrap_or_default();
            if let Some(bad) = values.iter().find(|&&i| i < -d || i >= d) {
                return Err(format!(
                    "{WHAT}: index {bad} is out of range for a dim of {d}"
                ));
            }
        }
        let program = program()?;
        let entries = [1, 2, 4, 8, 16]
            .iter()
            .map(|e| {
                let load = |w: u32| {
                    ctx.programs
                        .function(&program, &format!("gather{w}_{e}_{index}"))
                        .map_err(|err| format!("{WHAT}: {err}"))
                };
                Ok([load(32)?, load(64)?])
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Box::new(GatherKernel {
            axis,
            index: idx.dtype,
            entries,
        }) as Box<dyn DeviceKernel>)
    })())
}

struct GatherKernel {
    axis: usize,
    /// The indices' dtype the entry points read.
    index: DType,
    /// `[gather32, gather64]` per element size 1, 2, 4, 8, 16.
    entries: Vec<[Function; 2]>,
}

impl DeviceKernel for GatherKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 2, 1)?;
        let (x, idx, o) = (&inputs[0], &inputs[1], &outputs[0]);
        if idx.desc.dtype != self.index {
            return Err(format!(
                "{WHAT}: prepared for {} indices, got {}",
                self.index, idx.desc.dtype
            ));
        }
        let shape = dims(&x.desc)?;
        let m: usize = dims(&idx.desc)?.iter().product();
        let Some(&d) = shape.get(self.axis) else {
            return Err(format!("{WHAT}: axis {} of {shape:?}", self.axis));
        };
        let outer: usize = shape[..self.axis].iter().product();
        let inner: usize = shape[self.axis + 1..].iter().product();
        let n = outer * m * inner;
        if n != dims(&o.desc)?.iter().product::<usize>() || x.desc.dtype != o.desc.dtype {
            return Err(format!(
                "{WHAT}: {}{shape:?} by {m} indices does not give {}{:?}",
                x.desc.dtype, o.desc.dtype, o.desc.shape
            ));
        }
        if n == 0 {
            return Ok(());
        }
        if d == 0 {
            return Err(format!("{WHAT}: gathering from an empty axis of {shape:?}"));
        }
        let (src, ix) = (x.ptr, idx.ptr);
        let mut elem = x.desc.dtype.size();
        let mut inner = inner;
        while elem < 16 && inner.is_multiple_of(2) && (src | o.ptr).is_multiple_of(2 * elem as u64)
        {
            elem *= 2;
            inner /= 2;
        }
        let slot = [1, 2, 4, 8, 16]
            .iter()
            .position(|&e| e == elem)
            .unwrap_or(0);
        let n = outer * m * inner;
        let span = outer * d * inner;
        let f = &self.entries[slot][usize::from(n.max(span) >= 1 << 31)];
        let word = |v: usize, what: &str| {
            u32::try_from(v).map_err(|_| format!("{WHAT}: {what} {v} exceeds 32 bits"))
        };
        let (di, dm) = (word(inner, "row length")?, word(m, "index count")?);
        let ((mi, si), (mm, sm)) = (fast_div(di), fast_div(dm));
        let mut args = KernelArgs::new()
            .ptr(src)
            .ptr(ix)
            .ptr(o.ptr)
            .i64(n as i64)
            .i32(di as i32)
            .i32(mi as i32)
            .i32(si as i32)
            .i32(dm as i32)
            .i32(mm as i32)
            .i32(sm as i32)
            .i64(d as i64);
        // SAFETY: the arguments match the entry point; data, indices and output hold the
        // elements addressed and outlive the queued work.
        unsafe { f.launch(stream, (blocks(n), 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}
