//! Reductions over axes (ONNX `Reduce*`; empty axes reduce everything).

use torchtrt_core::layers::{Reduce, ReduceOp, int_vector};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::reduce_int::reduce_int;
use crate::dispatch::{with_float, with_int};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real, lane_sum};
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, elems, elems_mut,
};

const WHAT: &str = "Reduce";

struct ReduceKernel {
    layer: Reduce,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Reduce,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ReduceKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// The input seen as `[outer…, reduced…, inner]`: output element `(o, i)` reduces
/// `x[outer[o] + r + i]` over `r` in `reduced`.
pub(super) struct ReducePlan {
    /// Input offset of each output row.
    pub(super) outer: Vec<usize>,
    /// Input offsets of the reduced elements, relative to a row's offset.
    pub(super) reduced: Vec<usize>,
    /// Length of the trailing kept dims (1 when the last dim is reduced).
    pub(super) inner: usize,
}

impl ReducePlan {
    /// The plan for reducing `axes` (sorted, distinct) of `shape`.
    pub(super) fn new(shape: &[usize], axes: &[usize]) -> ReducePlan {
        let strides = contiguous_strides(shape);
        let mut groups: Vec<(bool, Vec<(usize, usize)>)> = Vec::new();
        for (d, (&size, &stride)) in shape.iter().zip(&strides).enumerate() {
            if size == 1 {
                continue;
            }
            let reduced = axes.contains(&d);
            match groups.last_mut() {
                Some((r, dims)) if *r == reduced => dims.push((size, stride)),
                _ => groups.push((reduced, vec![(size, stride)])),
            }
        }
        let inner = match groups.last() {
            Some((false, dims)) => dims.iter().map(|d| d.0).product(),
            _ => 1,
        };
        if inner > 1 {
            groups.pop();
        }
        let kept: Vec<(usize, usize)> = groups
            .iter()
            .filter(|g| !g.0)
            .flat_map(|g| g.1.clone())
            .collect();
        let reduced: Vec<(usize, usize)> = groups
            .iter()
            .filter(|g| g.0)
            .flat_map(|g| g.1.clone())
            .collect();
        ReducePlan {
            outer: offsets(&kept),
            reduced: offsets(&reduced),
            inner,
        }
    }

    /// True when the reduced elements of a row are consecutive.
    pub(super) fn reduced_is_contiguous(&self) -> bool {
        self.reduced.iter().enumerate().all(|(i, &r)| r == i)
    }
}

/// Offsets of every index of `dims` (size, stride), row-major.
fn offsets(dims: &[(usize, usize)]) -> Vec<usize> {
    let mut out = vec![0usize];
    for &(size, stride) in dims {
        out = out
            .iter()
            .flat_map(|&base| (0..size).map(move |i| base + i * stride))
            .collect();
    }
    out
}

impl Kernel for ReduceKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let axes = match inputs.get(1) {
            None => self.layer.resolved_axes(x.rank())?,
            Some(a) => Reduce::resolve_axes(&int_vector("the axes input of Reduce", a)?, x.rank())?,
        };
        let shape: Vec<usize> = x
            .shape()
            .iter()
            .enumerate()
            .filter_map(|(d, &n)| match (axes.contains(&d), self.layer.keep_dims) {
                (false, _) => Some(n),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let plan = ReducePlan::new(x.shape(), &axes);
        let op = self.layer.op;
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                let mut buf = Vec::new();
                let xc = T::view(elems::<T>(x)?, &mut buf);
                T::write(elems_mut(out)?, &mut Vec::new(), |oc| reduce_real(&plan, op, xc, oc));
                Ok(())
            }),
            d => with_int!(d, WHAT, T => {
                reduce_int::<T>(&plan, op, elems(x)?, elems_mut(out)?);
                Ok(())
            }),
        }
    }
}

fn reduce_real<C: Real>(plan: &ReducePlan, op: ReduceOp, x: &[C], out: &mut [C]) {
    let (inner, count) = (plan.inner, plan.reduced.len());
    let contiguous = plan.reduced_is_contiguous();
    for_each_row(
        out,
        inner,
        count * inner,
        Vec::new,
        |acc: &mut Vec<C>, o, dst| {
            let base = plan.outer[o];
            if inner == 1 {
                dst[0] = if contiguous {
                    fold_slice(op, &x[base..base + count])
                } else {
                    fold(op, plan.reduced.iter().map(|&r| x[base + r]), count)
                };
                return;
            }
            let rows = plan.reduced.iter().map(|&r| &x[base + r..base + r + inner]);
            fold_rows(op, rows, count, acc, dst);
        },
    );
}

/// The reduction of one sequence of `count` values.
fn fold<C: Real>(op: ReduceOp, values: impl Iterator<Item = C> + Clone, count: usize) -> C {
    match op {
        ReduceOp::Sum => values.fold(C::ZERO, |a, v| a + v),
        ReduceOp::Mean => values.fold(C::ZERO, |a, v| a + v) / C::from_f64(count as f64),
        ReduceOp::Max => values.fold(C::NEG_INFINITY, max_nan),
        ReduceOp::Min => values.fold(C::INFINITY, min_nan),
        ReduceOp::Prod => values.fold(C::ONE, |a, v| a * v),
        ReduceOp::L1 => values.fold(C::ZERO, |a, v| a + v.abs()),
        ReduceOp::L2 => values.fold(C::ZERO, |a, v| a + v * v).sqrt(),
        ReduceOp::SumSquare => values.fold(C::ZERO, |a, v| a + v * v),
        ReduceOp::LogSumExp => {
            let m = values.clone().fold(C::NEG_INFINITY, max_nan);
            log_sum_exp(m, values.fold(C::ZERO, |a, v| a + (v - m).exp()))
        }
    }
}

/// [`fold`] of consecutive values, the sums with independent lanes.
fn fold_slice<C: Real>(op: ReduceOp, x: &[C]) -> C {
    match op {
        ReduceOp::Sum => lane_sum(x),
        ReduceOp::Mean => lane_sum(x) / C::from_f64(x.len() as f64),
        _ => fold(op, x.iter().copied(), x.len()),
    }
}

/// `m + ln s` for a maximum `m` and a sum of `e^(x − m)`; infinite maxima pass through.
fn log_sum_exp<C: Real>(m: C, s: C) -> C {
    if m == C::INFINITY || m == C::NEG_INFINITY {
        m
    } else {
        m + s.ln()
    }
}

/// The reduction of `count` rows into `dst`, element by element, with `acc` as scratch.
fn fold_rows<'a, C: Real>(
    op: ReduceOp,
    rows: impl Iterator<Item = &'a [C]> + Clone,
    count: usize,
    acc: &mut Vec<C>,
    dst: &mut [C],
) {
    let n = dst.len();
    match op {
        ReduceOp::Sum | ReduceOp::Mean => accumulate(acc, n, C::ZERO, rows, |a, v| a + v),
        ReduceOp::Max => accumulate(acc, n, C::NEG_INFINITY, rows, max_nan),
        ReduceOp::Min => accumulate(acc, n, C::INFINITY, rows, min_nan),
        ReduceOp::Prod => accumulate(acc, n, C::ONE, rows, |a, v| a * v),
        ReduceOp::L1 => accumulate(acc, n, C::ZERO, rows, |a, v| a + v.abs()),
        ReduceOp::L2 | ReduceOp::SumSquare => accumulate(acc, n, C::ZERO, rows, |a, v| a + v * v),
        ReduceOp::LogSumExp => {
            accumulate(acc, n, C::NEG_INFINITY, rows.clone(), max_nan);
            dst.fill(C::ZERO);
            for row in rows {
                for ((s, &m), &v) in dst.iter_mut().zip(acc.iter()).zip(row) {
                    *s = *s + (v - m).exp();
                }
            }
            for (d, &m) in dst.iter_mut().zip(acc.iter()) {
                *d = log_sum_exp(m, *d);
            }
            return;
        }
    }
    let count = C::from_f64(count as f64);
    for (d, &a) in dst.iter_mut().zip(acc.iter()) {
        *d = match op {
            ReduceOp::Mean => a / count,
            ReduceOp::L2 => a.sqrt(),
            _ => a,
        };
    }
}

/// `acc[i] = step(… step(init, rows[0][i]) …, rows[last][i])`.
fn accumulate<'a, C: Real>(
    acc: &mut Vec<C>,
    len: usize,
    init: C,
    rows: impl Iterator<Item = &'a [C]>,
    step: impl Fn(C, C) -> C,
) {
    acc.clear();
    acc.resize(len, init);
    for row in rows {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = step(*a, v);
        }
    }
}

fn max_nan<C: Real>(a: C, v: C) -> C {
    if v > a || v.is_nan() { v } else { a }
}

fn min_nan<C: Real>(a: C, v: C) -> C {
    if v < a || v.is_nan() { v } else { a }
}
