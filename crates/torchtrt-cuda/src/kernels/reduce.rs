//! Reductions (`Reduce` layers) over one run of consecutive axes, in f32 for f32, f16 and
//! bf16 like the CPU kernels (NaN-propagating max/min, log-sum-exp shifted by the maximum).
//! Other axis sets, an axes input known only at run time, and integer tensors run on the
//! host.

use torchtrt_core::layers::{InferInput, LayerKind, Reduce, ReduceOp};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{dims, expect_dtype, expect_inputs};
use super::prelude::{Program, with_prelude};
use super::rows::{ROWS, RowKernels, entry_points, split};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Reduce";

static PROGRAM: Program = Program::new("core_reduce", || {
    let ep = entry_points(
        "reduce",
        "const void* x, void* y",
        "x, y",
        ", int op",
        ", op",
    );
    with_prelude(&format!("{ROWS}{BODY}{ep}"))
});

const BODY: &str = r#"
template <typename D, bool B>
__device__ __forceinline__ void reduce_rows(const void* x, void* y, i64 outer, int R, int op) {
    typedef Grp<B> G;
    __shared__ float sh[32];
    int first = op == 8 ? 2 : op;
    for (i64 row = G::first(); row < outer; row += G::step()) {
        i64 base = row * R;
        float acc = rinit(first);
        for (int r = G::lane(); r < R; r += G::size()) acc = rstep(first, acc, LOAD(D, x, base + r));
        acc = G::reduce(first, acc, sh);
        if (op == 8) {
            float m = acc, s = 0.0f;
            for (int r = G::lane(); r < R; r += G::size()) s += expf(LOAD(D, x, base + r) - m);
            s = G::reduce(0, s, sh);
            acc = isinf(m) ? m : m + logf(s);
        }
        if (G::lane() == 0) STORE(D, y, row, rfinish(op, acc, R));
    }
}

template <typename D>
__device__ __forceinline__ void reduce_cols(const void* x, void* y, i64 outer, int R, int inner,
    int op) {
    int first = op == 8 ? 2 : op;
    GRID_LOOP(i, outer * inner) {
        i64 base = (i / inner) * R * (i64)inner + i % inner;
        float acc = rinit(first);
        for (int r = 0; r < R; ++r) acc = rstep(first, acc, LOAD(D, x, base + (i64)r * inner));
        if (op == 8) {
            float m = acc, s = 0.0f;
            for (int r = 0; r < R; ++r) s += expf(LOAD(D, x, base + (i64)r * inner) - m);
            acc = isinf(m) ? m : m + logf(s);
        }
        STORE(D, y, i, rfinish(op, acc, R));
    }
}
"#;

struct ReduceKernel {
    dtype: DType,
    axes: Vec<i64>,
    op: i32,
    rows: RowKernels,
}

fn code(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Mean => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::Prod => 4,
        ReduceOp::L1 => 5,
        ReduceOp::L2 => 6,
        ReduceOp::SumSquare => 7,
        ReduceOp::LogSumExp => 8,
    }
}

/// The first and one-past-last of `axes` (sorted, distinct) when they are consecutive.
pub(crate) fn axis_run(axes: &[usize]) -> Option<(usize, usize)> {
    match axes {
        [] => Some((0, 0)),
        [first, ..] => axes
            .windows(2)
            .all(|w| w[1] == w[0] + 1)
            .then(|| (*first, first + axes.len())),
    }
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Reduce(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let axes = match inputs.get(1) {
        None => l.axes.clone(),
        Some(a) => a.value?.to_i64_vec()?,
    };
    axis_run(&Reduce::resolve_axes(&axes, x.shape.len()).ok()?)?;
    let rows = RowKernels::load(ctx, &PROGRAM.source(), "reduce", x.dtype)?;
    Some(rows.map(|rows| {
        Box::new(ReduceKernel {
            dtype: x.dtype,
            axes,
            op: code(l.op),
            rows,
        }) as Box<dyn DeviceKernel>
    }))
}

impl DeviceKernel for ReduceKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_inputs(WHAT, inputs, outputs, 1..=2, 1)?;
        expect_dtype(WHAT, &inputs[..1], self.dtype)?;
        expect_dtype(WHAT, outputs, self.dtype)?;
        let x = dims(&inputs[0].desc)?;
        let axes = Reduce::resolve_axes(&self.axes, x.len()).map_err(|e| format!("{WHAT}: {e}"))?;
        let (first, last) =
            axis_run(&axes).ok_or_else(|| format!("{WHAT}: axes {axes:?} are not consecutive"))?;
        let [outer, r, inner] = split(&x, first, last);
        let y: usize = dims(&outputs[0].desc)?.iter().product();
        if y != outer * inner {
            return Err(format!(
                "{WHAT}: output {:?} does not hold the {} results of reducing {x:?} over {axes:?}",
                outputs[0].desc.shape,
                outer * inner
            ));
        }
        let op = self.op;
        self.rows.launch(
            stream,
            &[inputs[0].ptr, outputs[0].ptr],
            [outer, r, inner],
            |a| a.i32(op),
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

    use super::axis_run;

    #[test]
    fn only_consecutive_axes_form_a_run() {
        assert_eq!(axis_run(&[1, 2]), Some((1, 3)));
        assert_eq!(axis_run(&[3]), Some((3, 4)));
        assert_eq!(axis_run(&[]), Some((0, 0)));
        assert_eq!(axis_run(&[0, 2]), None);
    }
}
