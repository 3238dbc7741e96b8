//! Checked views of tensors for kernels: typed slices, and arity / dtype / shape checks
//! whose errors say what was expected.

use bytemuck::Pod;
use torchtrt_core::Tensor;
use torchtrt_core::plugin_api::{DType, Element};

/// The elements of `t` as `T`.
pub(crate) fn elems<T: Element>(t: &Tensor) -> Result<&[T], String> {
    t.as_slice::<T>().map_err(|e| e.to_string())
}

/// The elements of `t` as `T`, mutably.
pub(crate) fn elems_mut<T: Element>(t: &mut Tensor) -> Result<&mut [T], String> {
    t.as_mut_slice::<T>().map_err(|e| e.to_string())
}

/// The bytes of `t` viewed as `W`, a plain type as wide as one element.
pub(crate) fn words<W: Pod>(t: &Tensor) -> Result<&[W], String> {
    check_width::<W>(t.dtype())?;
    bytemuck::try_cast_slice(t.bytes()).map_err(|e| format!("{t}: {e}"))
}

/// The bytes of `t` viewed as `W`, mutably.
pub(crate) fn words_mut<W: Pod>(t: &mut Tensor) -> Result<&mut [W], String> {
    check_width::<W>(t.dtype())?;
    let name = t.to_string();
    bytemuck::try_cast_slice_mut(t.bytes_mut()).map_err(|e| format!("{name}: {e}"))
}

fn check_width<W>(dtype: DType) -> Result<(), String> {
    if std::mem::size_of::<W>() == dtype.size() {
        Ok(())
    } else {
        Err(format!(
            "{dtype} elements viewed as {}-byte words",
            std::mem::size_of::<W>()
        ))
    }
}

/// Checks the number of inputs and outputs.
pub(crate) fn check_arity(
    what: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    n_in: std::ops::RangeInclusive<usize>,
    n_out: usize,
) -> Result<(), String> {
    if !n_in.contains(&inputs.len()) || outputs.len() != n_out {
        return Err(format!(
            "{what} expects {}..={} inputs and {n_out} outputs, got {} and {}",
            n_in.start(),
            n_in.end(),
            inputs.len(),
            outputs.len()
        ));
    }
    Ok(())
}

/// Checks that `t` has dtype `dtype`.
pub(crate) fn check_dtype(what: &str, t: &Tensor, dtype: DType) -> Result<(), String> {
    if t.dtype() == dtype {
        Ok(())
    } else {
        Err(format!("{what}: expected a {dtype} tensor, got {t}"))
    }
}

/// The operands of a (de)convolution: `x`, `w` and an optional bias, all of `dtype`, with one
/// output.
pub(crate) fn weighted_inputs<'a>(
    what: &str,
    inputs: &[&'a Tensor],
    outputs: &[Tensor],
    dtype: DType,
) -> Result<(&'a Tensor, &'a Tensor, Option<&'a Tensor>), String> {
    check_arity(what, inputs, outputs, 2..=3, 1)?;
    for t in inputs {
        check_dtype(what, t, dtype)?;
    }
    Ok((inputs[0], inputs[1], inputs.get(2).copied()))
}

/// Checks that a bias, when given, is `[channels]`.
pub(crate) fn check_bias(what: &str, bias: Option<&Tensor>, channels: usize) -> Result<(), String> {
    match bias {
        Some(b) if b.shape() != [channels] => {
            Err(format!("{what}: bias must be [{channels}], got {b}"))
        }
        _ => Ok(()),
    }
}

/// Checks that the output `t` has the dtype and shape the kernel computed.
pub(crate) fn check_output(
    what: &str,
    t: &Tensor,
    dtype: DType,
    shape: &[usize],
) -> Result<(), String> {
    if t.dtype() == dtype && t.shape() == shape {
        Ok(())
    } else {
        Err(format!(
            "{what}: the output is {t} but the inputs give {dtype}{shape:?}"
        ))
    }
}

/// Row-major strides of a shape, in elements.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}
