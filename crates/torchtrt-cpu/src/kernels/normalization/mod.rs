//! Mean/variance normalization over axes with an optional broadcast scale and bias.
//!
//! Over the trailing axes with a scale and bias that are per normalized element or per
//! row (LayerNormalization, GroupNormalization, InstanceNormalization) each row is
//! normalized in one task while it is in cache ([`rows`]); anything else takes the
//! statistics first and then one broadcast pass ([`general`]).

mod general;
mod rows;

use torchtrt_core::layers::{Normalization, RmsNormalization};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::reduce::ReducePlan;
use crate::dispatch::with_float;
use crate::scalar::FloatElem;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Normalization";

struct NormKernel {
    layer: Normalization,
    /// Root mean square only: no mean subtracted, no bias.
    rms: bool,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Normalization,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(NormKernel {
        layer: layer.clone(),
        rms: false,
        dtype: inputs[0].dtype,
    }))
}

/// The kernel of `RmsNormalization`: the normalization kernel without the mean.
pub(super) fn prepare_rms(
    layer: &RmsNormalization,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(NormKernel {
        layer: Normalization {
            axes: layer.axes.clone(),
            epsilon: layer.epsilon,
        },
        rms: true,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for NormKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=3 - usize::from(self.rms), 1)?;
        for t in inputs {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let x = inputs[0];
        let axes = self
            .layer
            .resolved_axes(x.rank())
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let plan = ReducePlan::new(x.shape(), &axes);
        let params: Vec<&[usize]> = inputs[1..].iter().map(|t| t.shape()).collect();
        let layouts = rows::layouts(x.shape(), &axes, &plan, &params);
        let eps = f64::from(self.layer.epsilon);
        with_float!(self.dtype, WHAT, T => {
            let mut bufs: [Vec<<T as FloatElem>::C>; 3] = Default::default();
            let [xb, sb, bb] = &mut bufs;
            let xc = T::view(elems::<T>(x)?, xb);
            let scale = inputs.get(1).map(|t| elems::<T>(t)).transpose()?.map(|s| T::view(s, sb));
            let bias = inputs.get(2).map(|t| elems::<T>(t)).transpose()?.map(|s| T::view(s, bb));
            match layouts {
                Some(layouts) => T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                    rows::normalize(&plan, xc, [scale, bias], &layouts, eps, self.rms, oc)
                }),
                None => {
                    let walk = general::walk(x.shape(), &axes, &params)?;
                    let (mean, inv) = general::statistics(&plan, xc, eps, self.rms);
                    T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                        general::apply(&walk, [xc, &mean, scale.unwrap_or(&[]), bias.unwrap_or(&[])], &inv, oc)
                    });
                }
            }
            Ok(())
        })
    }
}
