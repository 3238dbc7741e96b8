//! Linear quantization: `QuantizeLinear` and `DequantizeLinear` (opsets 10–23) to and from
//! 8- and 16-bit integers, per tensor or per axis. A convolution reading a `DequantizeLinear` with
//! weights from a `DequantizeLinear` of constants (a Q/DQ model) becomes an integer
//! convolution when the engine is built. Blocked quantization (`block_size`) and the
//! 2- and 4-bit and float8 types are refused with their names.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Dequantize, Quantize};
use torchtrt_core::plugin_api::DType;

use super::util::cast_to;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;
use crate::tensor::dtype_from_onnx;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("QuantizeLinear", quantize);
    r.add("DequantizeLinear", dequantize);
}

/// The per-axis `axis` (default 1; opset 10 has none) after refusing `block_size`.
fn axis(node: &Node<'_>) -> Result<i64> {
    if node.int_or("block_size", 0)? != 0 {
        return Err(node.err("blocked quantization (block_size ≠ 0) is not supported"));
    }
    node.int_or("axis", 1)
}

/// The zero point input, when it is given (an empty name is absent).
fn zero_point(ctx: &Ctx<'_>, node: &Node<'_>) -> Result<Option<TensorId>> {
    ctx.opt_input(node, 2)
}

fn quantize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let axis = axis(node)?;
    let (x, scale) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let zp = zero_point(ctx, node)?;
    let declared = match node.int("output_dtype")? {
        None | Some(0) => None,
        Some(code) => Some(
            i32::try_from(code)
                .ok()
                .and_then(|c| dtype_from_onnx(c).ok())
                .ok_or_else(|| node.err(format!("output_dtype {code} is not supported")))?,
        ),
    };
    let to = match (zp, declared) {
        (Some(z), Some(d)) if ctx.ty(z).dtype != d => {
            return Err(node.err(format!(
                "output_dtype {d} differs from the zero point's {}",
                ctx.ty(z).dtype
            )));
        }
        (Some(z), _) => ctx.ty(z).dtype,
        (None, Some(d)) => d,
        (None, None) => DType::U8,
    };
    if !matches!(to, DType::I8 | DType::U8 | DType::I16 | DType::U16) {
        return Err(node.err(format!(
            "quantizing to {to} is not supported (int8, uint8, int16 and uint16 are)"
        )));
    }
    let x = match ctx.ty(x).dtype {
        d if d.is_float() => x,
        DType::I32 => cast_to(ctx, node, x, DType::F32)?,
        d => return Err(node.err(format!("cannot quantize {d} values"))),
    };
    let mut inputs = vec![x, scale];
    inputs.extend(zp);
    Ok(vec![ctx.add(node, Quantize { axis, to }, &inputs)?])
}

fn dequantize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let axis = axis(node)?;
    let (x, scale) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let dtype = ctx.ty(x).dtype;
    if !matches!(
        dtype,
        DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
    ) {
        return Err(node.err(format!(
            "dequantizing {dtype} is not supported (int8, uint8, int16, uint16 and int32 are)"
        )));
    }
    let mut inputs = vec![x, scale];
    inputs.extend(zero_point(ctx, node)?);
    let y = ctx.add(node, Dequantize { axis }, &inputs)?;
    match node.int("output_dtype")? {
        None | Some(0) => Ok(vec![y]),
        Some(code) => {
            let to = i32::try_from(code)
                .ok()
                .and_then(|c| dtype_from_onnx(c).ok())
                .filter(|d| d.is_float())
                .ok_or_else(|| node.err(format!("output_dtype {code} is not a float type")))?;
            Ok(vec![cast_to(ctx, node, y, to)?])
        }
    }
}
