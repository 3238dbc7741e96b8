//! Range: `start + i·delta`, computed in f64 for floats and in i64 for integers.

use torchtrt_core::layers::{Range, range_len};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems_mut};

const WHAT: &str = "Range";

struct RangeKernel {
    dtype: DType,
}

pub(super) fn prepare(_: &Range, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    if !matches!(
        dtype,
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::I64 | DType::I32 | DType::I16
    ) {
        return Err(format!("{WHAT} has no CPU kernel for {dtype}"));
    }
    Ok(Box::new(RangeKernel { dtype }))
}

/// Writes `value(i)` to every element `i` of `out`, in parallel for long outputs.
fn generate<T: Send>(out: &mut [T], value: impl Fn(usize) -> T + Sync + Send) {
    for_each_chunk(out, |start, chunk| {
        for (k, o) in chunk.iter_mut().enumerate() {
            *o = value(start + k);
        }
    });
}

impl Kernel for RangeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 3..=3, 1)?;
        for t in inputs {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let n = range_len(inputs[0], inputs[1], inputs[2]).map_err(|e| format!("{WHAT}: {e}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &[n])?;
        let first = |t: &Tensor| t.to_f64_vec().first().copied().unwrap_or(0.0);
        let (s, d) = (first(inputs[0]), first(inputs[2]));
        let float = |i: usize| s + i as f64 * d;
        let int = |t: &Tensor| t.to_i64_vec().and_then(|v| v.first().copied()).unwrap_or(0);
        let (si, di) = (int(inputs[0]), int(inputs[2]));
        let whole = |i: usize| si.wrapping_add((i as i64).wrapping_mul(di));
        match self.dtype {
            DType::F32 => generate(elems_mut::<f32>(out)?, |i| float(i) as f32),
            DType::F16 => generate(elems_mut::<half::f16>(out)?, |i| {
                half::f16::from_f64(float(i))
            }),
            DType::BF16 => generate(elems_mut::<half::bf16>(out)?, |i| {
                half::bf16::from_f64(float(i))
            }),
            DType::F64 => generate(elems_mut::<f64>(out)?, float),
            DType::I64 => generate(elems_mut::<i64>(out)?, whole),
            DType::I32 => generate(elems_mut::<i32>(out)?, |i| whole(i) as i32),
            DType::I16 => generate(elems_mut::<i16>(out)?, |i| whole(i) as i16),
            other => return Err(format!("{WHAT} has no CPU kernel for {other}")),
        }
        Ok(())
    }
}
