//! Reductions over axes (ONNX `Reduce*`; empty axes reduce everything), vectorised along
//! whichever axis is consecutive in memory and spread over threads.

use torchtrt_core::layers::{Reduce, ReduceOp, int_vector};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

mod columns;
pub(crate) mod fold;
mod int;
mod plan;
mod rows;
pub(crate) mod short_rows;

use columns::reduce_columns;
use int::reduce_int;
pub(crate) use plan::ReducePlan;
use rows::reduce_rows;

use crate::dispatch::{with_float, with_int};
use crate::scalar::{FloatElem, Real};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

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

/// Float reductions: runs of consecutive elements or rows of columns.
fn reduce_real<C: Real>(plan: &ReducePlan, op: ReduceOp, x: &[C], out: &mut [C]) {
    if out.is_empty() {
        return;
    }
    if plan.inner == 1 {
        reduce_rows(plan, op, x, out);
    } else {
        reduce_columns(plan, op, x, out);
    }
}
