//! Batched matrix multiplication with numpy broadcasting, 1-D promotion and transposes.

use rayon::prelude::*;
use torchtrt_core::layers::MatMul;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::linalg::{Epilogue, Finish, GemmElem, MatRef, PackedRhs, gemm, via_f32};
use crate::strided::{Strided, broadcast_shape, broadcast_strides};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "MatMul";

/// Products smaller than this many multiply-adds run one per task, several at once.
const SMALL_PRODUCT: usize = 1 << 18;

struct MatMulKernel {
    transpose_a: bool,
    transpose_b: bool,
    dtype: DType,
    /// Constant f32 weights (a 2-D right operand), packed when the engine is prepared.
    packed: Option<PackedWeights>,
}

/// The packed right operand and the shape it came from.
struct PackedWeights {
    shape: Vec<usize>,
    rhs: PackedRhs,
}

pub(super) fn prepare(
    layer: &MatMul,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    let packed = match inputs.get(1).and_then(|i| i.value) {
        Some(b) if dtype == DType::F32 && !layer.transpose_a && b.rank() == 2 => {
            let (r, c) = (b.shape()[0], b.shape()[1]);
            let (depth, cols, rs, cs) = if layer.transpose_b {
                (c, r, 1, c)
            } else {
                (r, c, c, 1)
            };
            elems::<f32>(b)
                .ok()
                .and_then(|w| PackedRhs::new(w, depth, cols, rs, cs))
                .map(|rhs| PackedWeights {
                    shape: b.shape().to_vec(),
                    rhs,
                })
        }
        _ => None,
    };
    Ok(Box::new(MatMulKernel {
        transpose_a: layer.transpose_a,
        transpose_b: layer.transpose_b,
        dtype,
        packed,
    }))
}

/// One operand's matrices: batch dims, matrix size and element strides.
struct Operand<'s> {
    batch: &'s [usize],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'s> Operand<'s> {
    /// `shape` as a stack of matrices; a rank-1 `shape` is a row (`lhs`) or a column.
    fn new(shape: &'s [usize], transpose: bool, lhs: bool) -> Result<Operand<'s>, String> {
        let n = shape.len();
        let batch = &shape[..n.saturating_sub(2)];
        let (rows, cols, row_stride, col_stride) = match (n, transpose) {
            (0, _) => return Err(format!("{WHAT} operands must have rank ≥ 1")),
            (1, _) if lhs => (1, shape[0], shape[0], 1),
            (1, _) => (shape[0], 1, 1, 1),
            (_, false) => (shape[n - 2], shape[n - 1], shape[n - 1], 1),
            (_, true) => (shape[n - 1], shape[n - 2], 1, shape[n - 1]),
        };
        Ok(Operand {
            batch,
            rows,
            cols,
            row_stride,
            col_stride,
        })
    }

    fn matrix<'a, T>(&self, data: &'a [T], offset: usize) -> MatRef<'a, T> {
        MatRef {
            data: &data[offset.min(data.len())..],
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
        }
    }
}

/// Where each output matrix reads its operands.
struct Plan<'s> {
    a: Operand<'s>,
    b: Operand<'s>,
    /// Per output matrix: offsets of its `a` and `b` matrices.
    offsets: Vec<[usize; 2]>,
    /// `a` is one dense row-major block whose matrices all meet the same `b`.
    foldable: bool,
}

impl Kernel for MatMulKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=4, 1)?;
        let (a, b) = (inputs[0], inputs[1]);
        check_dtype(WHAT, a, self.dtype)?;
        check_dtype(WHAT, b, self.dtype)?;
        let oa = Operand::new(a.shape(), self.transpose_a, true)?;
        let ob = Operand::new(b.shape(), self.transpose_b, false)?;
        if oa.cols != ob.rows {
            return Err(format!(
                "{WHAT}: inner dimensions differ: {a} · {b} ({} vs {})",
                oa.cols, ob.rows
            ));
        }
        let batch = broadcast_shape(oa.batch, ob.batch)?;
        let mut shape = batch.clone();
        if a.rank() > 1 {
            shape.push(oa.rows);
        }
        if b.rank() > 1 {
            shape.push(ob.cols);
        }
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let bias = match inputs.get(2) {
            Some(&t) if t.dtype() == self.dtype && b.rank() > 1 && t.shape() == [ob.cols] => {
                Some(t)
            }
            Some(t) => {
                return Err(format!(
                    "{WHAT}: the bias {t} is not {} of B's {} columns",
                    self.dtype, ob.cols
                ));
            }
            None => None,
        };
        let residual = match inputs.get(3) {
            Some(&r) if r.dtype() == self.dtype && r.shape() == shape.as_slice() => Some(r),
            Some(r) => {
                return Err(format!(
                    "{WHAT}: the residual {r} is not the result's {}{shape:?}",
                    self.dtype
                ));
            }
            None => None,
        };
        if let Some(p) = &self.packed
            && b.shape() == p.shape.as_slice()
            && a.rank() >= 1
        {
            let depth = p.rhs.depth();
            let rows = a.numel() / depth.max(1);
            let finish = Finish {
                bias: bias.map(elems::<f32>).transpose()?,
                residual: residual.map(elems::<f32>).transpose()?,
                epilogue: Epilogue::Identity,
            };
            return p.rhs.product(
                elems(a)?,
                depth,
                rows,
                finish,
                elems_mut(out)?,
                rayon::current_num_threads(),
            );
        }
        let plan = Plan::new(oa, ob, &batch)?;
        match self.dtype {
            DType::F32 => plan.run::<f32>(elems(a)?, elems(b)?, elems_mut(out)?),
            DType::F64 => plan.run::<f64>(elems(a)?, elems(b)?, elems_mut(out)?),
            DType::F16 => plan.run::<half::f16>(elems(a)?, elems(b)?, elems_mut(out)?),
            DType::BF16 => via_f32([elems(a)?, elems(b)?], elems_mut(out)?, |[a, b], out| {
                plan.run::<f32>(a, b, out)
            }),
            other => Err(format!("{WHAT} has no CPU kernel for {other}")),
        }?;
        for t in [bias, residual].into_iter().flatten() {
            add_in_dtype(out, t)?;
        }
        Ok(())
    }
}

/// Adds `t` to `out` in their dtype: a bias (one value per column, repeated over the rows)
/// or a residual (of `out`'s size).
fn add_in_dtype(out: &mut Tensor, t: &Tensor) -> Result<(), String> {
    fn add<T: Copy + Send + Sync>(out: &mut [T], t: &[T], f: impl Fn(T, T) -> T + Sync) {
        if t.len() == out.len() {
            out.par_iter_mut().zip(t).for_each(|(y, &v)| *y = f(*y, v));
        } else {
            out.par_chunks_mut(t.len().max(1)).for_each(|row| {
                for (y, &v) in row.iter_mut().zip(t) {
                    *y = f(*y, v);
                }
            });
        }
    }
    match t.dtype() {
        DType::F32 => add(elems_mut::<f32>(out)?, elems(t)?, |y, v| y + v),
        DType::F64 => add(elems_mut::<f64>(out)?, elems(t)?, |y, v| y + v),
        DType::F16 => add(elems_mut::<half::f16>(out)?, elems(t)?, |y, v| {
            half::f16::from_f32(y.to_f32() + v.to_f32())
        }),
        DType::BF16 => add(elems_mut::<half::bf16>(out)?, elems(t)?, |y, v| {
            half::bf16::from_f32(y.to_f32() + v.to_f32())
        }),
        other => return Err(format!("{WHAT} has no CPU addition for {other}")),
    }
    Ok(())
}

impl<'s> Plan<'s> {
    fn new(a: Operand<'s>, b: Operand<'s>, batch: &[usize]) -> Result<Plan<'s>, String> {
        let (size_a, size_b) = (a.rows * a.cols, b.rows * b.cols);
        let sa = broadcast_strides(a.batch, batch)?;
        let sb = broadcast_strides(b.batch, batch)?;
        let strides: Vec<[isize; 2]> = sa
            .iter()
            .zip(&sb)
            .map(|(&x, &y)| [x * size_a as isize, y * size_b as isize])
            .collect();
        let count: usize = batch.iter().product();
        let mut offsets = Vec::with_capacity(count);
        let walk = Strided::new(batch, &strides, [0, 0]);
        let [step_a, step_b] = walk.inner_strides().map(|s| s as usize);
        walk.for_each_run(0, count, |_, [oa, ob], len| {
            offsets.extend((0..len).map(|j| [oa + j * step_a, ob + j * step_b]));
        });
        let foldable = a.row_stride == a.cols
            && a.col_stride == 1
            && offsets
                .iter()
                .enumerate()
                .all(|(i, o)| o[0] == i * size_a && o[1] == 0);
        Ok(Plan {
            a,
            b,
            offsets,
            foldable,
        })
    }

    fn run<G: GemmElem>(&self, a: &[G], b: &[G], out: &mut [G]) -> Result<(), String> {
        let (m, k, n) = (self.a.rows, self.a.cols, self.b.cols);
        let count = self.offsets.len();
        if m * n == 0 || count == 0 {
            return Ok(());
        }
        if self.foldable {
            let lhs = MatRef::row_major(a, count * m, k);
            return gemm(out, lhs, self.b.matrix(b, 0), false, true);
        }
        let product = |[oa, ob]: [usize; 2], dst: &mut [G], parallel: bool| {
            gemm(
                dst,
                self.a.matrix(a, oa),
                self.b.matrix(b, ob),
                false,
                parallel,
            )
        };
        if count > 1 && m * n * k < SMALL_PRODUCT {
            out.par_chunks_mut(m * n)
                .zip(&self.offsets)
                .try_for_each(|(dst, &o)| product(o, dst, false))
        } else {
            out.chunks_mut(m * n)
                .zip(&self.offsets)
                .try_for_each(|(dst, &o)| product(o, dst, true))
        }
    }
}
