//! `Select` layers (ONNX `Where`) on any dtype: `out = condition ? x : y` with numpy
//! broadcasting, one strided walk over the output with a stride set per operand. The values
//! are moved as bytes of their width, so one entry point serves every dtype of that size.

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::access::{ACCESS, MAX_RANK};
use super::layout::{THREADS, Walk, blocks, broadcast_strides};
use super::map::numel;
use super::operands::{dims, expect_arity};
use super::prelude::{Program, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Select";

static PROGRAM: Program = Program::new("core_select", || {
    let mut entries = String::new();
    for (bytes, ty) in [(1, "u8"), (2, "u16"), (4, "u32"), (8, "u64")] {
        for (bits, index) in [(32, "u32"), (64, "u64")] {
            entries.push_str(&format!("SELECT(select{bytes}_{bits}, {ty}, {index})\n"));
        }
    }
    with_prelude(&format!("{ACCESS}{BODY}{entries}"))
});

const BODY: &str = r#"
template <typename T, typename I>
__device__ __forceinline__ void select_walk(const u8* c, const T* a, const T* b, T* o, u64 n,
                                            const FastDiv* dv, int rank,
                                            const i64 (*st)[MAX_RANK]) {
    GRID_STRIDE(I, i, n) {
        typename Index<I>::SI off[3];
        walk<I, 3>(i, rank, dv, st, off);
        o[i] = c[off[0]] ? a[off[1]] : b[off[2]];
    }
}
#define SELECT(NAME, T, I) \
extern "C" __global__ void NAME(const u8* c, const T* a, const T* b, T* o, u64 n, int rank, \
                                DIMS_PARAMS, STRIDE_PARAMS(x), STRIDE_PARAMS(y), \
                                STRIDE_PARAMS(z)) { \
    DIMS_INIT(dv); \
    const i64 st[3][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y), STRIDES_INIT(z)}; \
    select_walk<T, I>(c, a, b, o, n, dv, rank, st); \
}
"#;

/// Prepares a `Select` layer whose value dtype is 1, 2, 4 or 8 bytes wide and whose output
/// rank the walk takes.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Select(_) = layer else {
        return None;
    };
    let dtype = inputs.get(1)?.dtype;
    let width = dtype.size();
    let rank = inputs.iter().map(|t| t.shape.len()).max()?;
    if !matches!(width, 1 | 2 | 4 | 8) || rank > MAX_RANK {
        return None;
    }
    let load = |bits: u32| {
        ctx.programs
            .function(&PROGRAM.source(), &format!("select{width}_{bits}"))
            .map_err(|e| format!("{WHAT}: {e}"))
    };
    let kernel = load(32).and_then(|walk32| {
        Ok(Box::new(SelectKernel {
            dtype,
            walk32,
            walk64: load(64)?,
        }) as Box<dyn DeviceKernel>)
    });
    Some(kernel)
}

struct SelectKernel {
    dtype: DType,
    walk32: Function,
    walk64: Function,
}

impl DeviceKernel for SelectKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 3, 1)?;
        let (c, a, b, o) = (&inputs[0], &inputs[1], &inputs[2], &outputs[0]);
        if c.desc.dtype != DType::Bool || [a, b, o].iter().any(|t| t.desc.dtype != self.dtype) {
            return Err(format!(
                "{WHAT}: prepared for a bool condition and {} values, got {}, {}, {} → {}",
                self.dtype, c.desc.dtype, a.desc.dtype, b.desc.dtype, o.desc.dtype
            ));
        }
        let shape = dims(&o.desc)?;
        let n = numel(&o.desc.shape);
        if n == 0 {
            return Ok(());
        }
        let stride = |t: &DeviceTensor| {
            broadcast_strides(&dims(&t.desc)?, &shape).map_err(|e| format!("{WHAT}: {e}"))
        };
        let (sc, sa, sb) = (stride(c)?, stride(a)?, stride(b)?);
        let strides = (0..shape.len()).map(|k| [sc[k], sa[k], sb[k]]).collect();
        let walk = Walk::new(shape, strides).merged();
        let f = if walk.fits_u32() {
            &self.walk32
        } else {
            &self.walk64
        };
        let args = KernelArgs::new()
            .ptr(c.ptr)
            .ptr(a.ptr)
            .ptr(b.ptr)
            .ptr(o.ptr)
            .i64(n as i64);
        let mut args = walk.push_args(args, WHAT)?;
        // SAFETY: the arguments match `select*`; each operand holds the elements its
        // broadcast strides reach, of the entry point's width, and outlives the queued work.
        unsafe { f.launch(stream, (blocks(n), 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }
}
