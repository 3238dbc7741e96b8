//! Softmax and log-softmax along one axis, stabilised by the row maximum, computed in f32.

use torchtrt_core::layers::{InferInput, LayerKind, normalize_axis};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{dims, expect_arity, expect_dtype};
use super::prelude::{Program, with_prelude};
use super::rows::{ROWS, RowKernels, entry_points, split};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Softmax";

static PROGRAM: Program = Program::new("core_softmax", || {
    let ep = entry_points(
        "softmax",
        "const void* x, void* y",
        "x, y",
        ", int lg",
        ", lg",
    );
    with_prelude(&format!("{ROWS}{BODY}{ep}"))
});

const BODY: &str = r#"
template <typename D, bool B>
__device__ __forceinline__ void softmax_rows(const void* x, void* y, i64 outer, int R, int lg) {
    typedef Grp<B> G;
    __shared__ float sh[32];
    for (i64 row = G::first(); row < outer; row += G::step()) {
        i64 base = row * R;
        float m = rinit(2);
        for (int r = G::lane(); r < R; r += G::size()) m = rcombine(2, m, LOAD(D, x, base + r));
        m = G::reduce(2, m, sh);
        float s = 0.0f;
        for (int r = G::lane(); r < R; r += G::size()) s += expf(LOAD(D, x, base + r) - m);
        s = G::reduce(0, s, sh);
        float shift = m + logf(s), inv = 1.0f / s;
        for (int r = G::lane(); r < R; r += G::size()) {
            float v = LOAD(D, x, base + r) - m;
            STORE(D, y, base + r, lg ? LOAD(D, x, base + r) - shift : expf(v) * inv);
        }
    }
}

template <typename D>
__device__ __forceinline__ void softmax_cols(const void* x, void* y, i64 outer, int R, int inner,
    int lg) {
    GRID_LOOP(i, outer * inner) {
        i64 base = (i / inner) * R * (i64)inner + i % inner;
        float m = rinit(2);
        for (int r = 0; r < R; ++r) m = rcombine(2, m, LOAD(D, x, base + (i64)r * inner));
        float s = 0.0f;
        for (int r = 0; r < R; ++r) s += expf(LOAD(D, x, base + (i64)r * inner) - m);
        float shift = m + logf(s), inv = 1.0f / s;
        for (int r = 0; r < R; ++r) {
            i64 at = base + (i64)r * inner;
            float v = LOAD(D, x, at);
            STORE(D, y, at, lg ? v - shift : expf(v - m) * inv);
        }
    }
}
"#;

struct SoftmaxKernel {
    dtype: DType,
    axis: i64,
    log: bool,
    rows: RowKernels,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Softmax(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let rows = RowKernels::load(ctx, &PROGRAM.source(), "softmax", x.dtype)?;
    Some(rows.map(|rows| {
        Box::new(SoftmaxKernel {
            dtype: x.dtype,
            axis: l.axis,
            log: l.log,
            rows,
        }) as Box<dyn DeviceKernel>
    }))
}

impl DeviceKernel for SoftmaxKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 1, 1)?;
        expect_dtype(WHAT, inputs, self.dtype)?;
        expect_dtype(WHAT, outputs, self.dtype)?;
        let x = dims(&inputs[0].desc)?;
        if dims(&outputs[0].desc)? != x {
            return Err(format!(
                "{WHAT}: output {:?} must have the input's shape {x:?}",
                outputs[0].desc.shape
            ));
        }
        let axis = normalize_axis(self.axis, x.len()).map_err(|e| format!("{WHAT}: {e}"))?;
        let lg = i32::from(self.log);
        self.rows.launch(
            stream,
            &[inputs[0].ptr, outputs[0].ptr],
            split(&x, axis, axis + 1),
            |a| a.i32(lg),
            WHAT,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }
}
