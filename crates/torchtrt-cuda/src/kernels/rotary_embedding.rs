//! `RotaryEmbedding` layers in f32, f16 and bf16: a thread per output element reads its
//! pair partner and the angle of its position (from the position ids, i32 or i64, when
//! given). On the device a position id outside the caches leaves the row unrotated.

use torchtrt_core::layers::{InferInput, LayerKind, RotaryEmbedding};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::access::ACCESS;
use super::layout::{THREADS, blocks};
use super::operands::{dims, expect_inputs};
use super::prelude::{Program, dtype_suffix, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "RotaryEmbedding";

static PROGRAM: Program = Program::new("core_rotary_embedding", || {
    let mut entries = String::new();
    for (dt, d) in [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")] {
        for (p, x) in [("none", "i64"), ("i32", "i32"), ("i64", "i64")] {
            entries.push_str(&format!(
                "extern \"C\" __global__ void rotary_{dt}_{p}(const void* x, const void* cs, \
                 const void* sn, const {x}* pos, void* y, ROT_PARAMS) \
                 {{ rotate_rows<{d}, {x}>(x, cs, sn, pos, y, ROT_ARGS); }}\n"
            ));
        }
    }
    with_prelude(&format!("{ACCESS}{BODY}{entries}"))
});

const BODY: &str = r#"
#define ROT_PARAMS i64 n, int heads, int seq, int head, int rotary, int interleaved, \
    int heads_first, i64 cache_rows
#define ROT_ARGS n, heads, seq, head, rotary, interleaved, heads_first, cache_rows

template <typename D, typename X>
__device__ __forceinline__ void rotate_rows(const void* x, const void* cs, const void* sn,
    const X* pos, void* y, i64 n, int heads, int seq, int head, int rotary, int interleaved,
    int heads_first, i64 cache_rows) {
    int half = rotary / 2;
    GRID_STRIDE(i64, i, n) {
        i64 row = i / head;
        int f = (int)(i - row * head);
        float v = LOAD(D, x, i);
        if (f < rotary) {
            i64 s, b;
            if (heads_first) { s = row % seq; b = row / ((i64)seq * heads); }
            else { s = (row / heads) % seq; b = row / ((i64)seq * heads); }
            i64 at = b * seq + s;
            bool ok = true;
            if (pos) {
                at = (i64)pos[at];
                ok = at >= 0 && at < cache_rows;
            }
            if (ok) {
                int j = interleaved ? f / 2 : (f < half ? f : f - half);
                bool first = interleaved ? (f % 2 == 0) : (f < half);
                int partner = interleaved ? (first ? f + 1 : f - 1) : (first ? f + half : f - half);
                float c = LOAD(D, cs, at * half + j), sv = LOAD(D, sn, at * half + j);
                float o = LOAD(D, x, row * head + partner);
                v = first ? v * c - o * sv : o * sv + v * c;
            }
        }
        STORE(D, y, i, v);
    }
}
"#;

/// Prepares a `RotaryEmbedding` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::RotaryEmbedding(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let dt = dtype_suffix(x.dtype)?;
    let positions = match inputs.get(3).map(|p| p.dtype) {
        None => "none",
        Some(DType::I32) => "i32",
        Some(DType::I64) => "i64",
        Some(_) => return None,
    };
    let entry = format!("rotary_{dt}_{positions}");
    Some(
        ctx.programs
            .function(&PROGRAM.source(), &entry)
            .map_err(|e| format!("{WHAT}: {e}"))
            .map(|f| {
                Box::new(RotaryKernel {
                    layer: l.clone(),
                    dtype: x.dtype,
                    f,
                }) as Box<dyn DeviceKernel>
            }),
    )
}

struct RotaryKernel {
    layer: RotaryEmbedding,
    dtype: DType,
    f: Function,
}

impl DeviceKernel for RotaryKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_inputs(WHAT, inputs, outputs, 3..=4, 1)?;
        let shape = dims(&inputs[0].desc)?;
        let d = self
            .layer
            .dims(&shape)
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let half = d.rotary / 2;
        let cache = dims(&inputs[1].desc)?;
        let cache_rows = match (inputs.len(), cache.as_slice()) {
            (4, &[rows, h]) if h == half => rows,
            (3, &[b, s, h]) if [b, s, h] == [d.batch, d.seq, half] => b * s,
            _ => {
                return Err(format!(
                    "{WHAT}: caches {cache:?} do not fit input {shape:?}"
                ));
            }
        };
        if dims(&inputs[2].desc)? != cache
            || inputs[..3].iter().any(|t| t.desc.dtype != self.dtype)
            || outputs[0].desc.dtype != self.dtype
            || dims(&outputs[0].desc)? != shape
        {
            return Err(format!(
                "{WHAT}: inputs or output do not match the prepared {} layer",
                self.dtype
            ));
        }
        if let Some(p) = inputs.get(3)
            && dims(&p.desc)? != [d.batch, d.seq]
        {
            return Err(format!(
                "{WHAT}: position_ids {:?} must be [{}, {}]",
                p.desc.shape, d.batch, d.seq
            ));
        }
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(());
        }
        let word = |v: usize| {
            i32::try_from(v).map_err(|_| format!("{WHAT}: {v} exceeds a 32-bit argument"))
        };
        let mut args = KernelArgs::new()
            .ptr(inputs[0].ptr)
            .ptr(inputs[1].ptr)
            .ptr(inputs[2].ptr)
            .ptr(inputs.get(3).map_or(0, |p| p.ptr))
            .ptr(outputs[0].ptr)
            .i64(n as i64)
            .i32(word(d.heads)?)
            .i32(word(d.seq)?)
            .i32(word(d.head)?)
            .i32(word(d.rotary)?)
            .i32(i32::from(self.layer.interleaved))
            .i32(i32::from(self.layer.num_heads == 0))
            .i64(cache_rows as i64);
        // SAFETY: the arguments match `rotary_*`; the input and output hold `n` elements,
        // the caches `cache_rows · rotary / 2`, the position ids `batch · seq`.
        unsafe {
            self.f
                .launch(stream, (blocks(n), 1, 1), (THREADS, 1, 1), 0, &mut args)
        }
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
