//! Dtype conversion (ONNX `Cast`): floats to integers truncate toward zero and saturate,
//! NaN becomes 0; integers narrow by wrapping; anything to bool is `x != 0`.

use bytemuck::{Pod, Zeroable};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use torchtrt_core::layers::Cast;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::copy_parallel;
use super::map::map;
use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_arity, check_output, words, words_mut};

const WHAT: &str = "Cast";

struct CastKernel {
    from: DType,
    to: DType,
}

pub(super) fn prepare(layer: &Cast, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(CastKernel {
        from: inputs[0].dtype,
        to: layer.to,
    }))
}

impl Kernel for CastKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        if x.dtype() != self.from {
            return Err(format!("{WHAT}: expected a {} input, got {x}", self.from));
        }
        let out = &mut outputs[0];
        check_output(WHAT, out, self.to, x.shape())?;
        match (self.from, self.to) {
            (a, b) if a == b => copy_parallel(x.bytes(), out.bytes_mut()),
            (DType::F16, DType::F32) => widen(words::<f16>(x)?, words_mut(out)?),
            (DType::BF16, DType::F32) => widen(words::<bf16>(x)?, words_mut(out)?),
            (DType::F32, DType::F16) => narrow(words(x)?, words_mut::<f16>(out)?),
            (DType::F32, DType::BF16) => narrow(words(x)?, words_mut::<bf16>(out)?),
            (from, to) => return with_elem!(from, S => cast_to::<S>(to, x, out)),
        }
        Ok(())
    }
}

/// Half-precision to f32, by SIMD slice conversion.
fn widen<H: Sync>(src: &[H], dst: &mut [f32])
where
    [H]: HalfFloatSliceExt,
{
    for_each_chunk(dst, |start, chunk| {
        src[start..start + chunk.len()].convert_to_f32_slice(chunk)
    });
}

/// f32 to half precision (round to nearest even), by SIMD slice conversion.
fn narrow<H: Send>(src: &[f32], dst: &mut [H])
where
    [H]: HalfFloatSliceExt,
{
    for_each_chunk(dst, |start, chunk| {
        chunk.convert_from_f32_slice(&src[start..start + chunk.len()])
    });
}

/// A bool element: one byte, non-zero is true.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(transparent)]
struct Bool8(u8);

/// A value on its way between two element types: every float widens exactly to f64, every
/// integer (u64 included) to i128.
#[derive(Clone, Copy)]
enum Wide {
    Float(f64),
    Int(i128),
}

/// An element type `Cast` reads and writes.
trait CastElem: Pod + Send + Sync {
    fn to_wide(self) -> Wide;
    fn from_wide(w: Wide) -> Self;
}

macro_rules! cast_float {
    ($($t:ty: |$v:ident| $from:expr, $to:expr);*) => {$(
        impl CastElem for $t {
            #[inline(always)]
            fn to_wide(self) -> Wide {
                let $v = self;
                Wide::Float($to)
            }
            #[inline(always)]
            fn from_wide(w: Wide) -> $t {
                let $v = match w {
                    Wide::Float(f) => f,
                    Wide::Int(i) => i as f64,
                };
                $from
            }
        }
    )*};
}
cast_float!(
    f32: |v| v as f32, v as f64;
    f64: |v| v, v;
    f16: |v| f16::from_f64(v), v.to_f64();
    bf16: |v| bf16::from_f64(v), v.to_f64()
);

macro_rules! cast_int {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            #[inline(always)]
            fn to_wide(self) -> Wide {
                Wide::Int(self as i128)
            }
            #[inline(always)]
            fn from_wide(w: Wide) -> $t {
                match w {
                    Wide::Float(f) => f as $t,
                    Wide::Int(i) => i as $t,
                }
            }
        }
    )*};
}
cast_int!(i64, i32, i16, i8, u8, u16, u32, u64);

impl CastElem for Bool8 {
    #[inline(always)]
    fn to_wide(self) -> Wide {
        Wide::Int(i128::from(self.0 != 0))
    }
    #[inline(always)]
    fn from_wide(w: Wide) -> Bool8 {
        Bool8(u8::from(match w {
            Wide::Float(f) => f != 0.0,
            Wide::Int(i) => i != 0,
        }))
    }
}

/// Runs `$body` with `$t` bound to the [`CastElem`] of a dtype.
macro_rules! with_elem {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F32 => with_elem!(@ f32, $t, $body),
            DType::F16 => with_elem!(@ f16, $t, $body),
            DType::BF16 => with_elem!(@ bf16, $t, $body),
            DType::F64 => with_elem!(@ f64, $t, $body),
            DType::I64 => with_elem!(@ i64, $t, $body),
            DType::I32 => with_elem!(@ i32, $t, $body),
            DType::I16 => with_elem!(@ i16, $t, $body),
            DType::I8 => with_elem!(@ i8, $t, $body),
            DType::U8 => with_elem!(@ u8, $t, $body),
            DType::U16 => with_elem!(@ u16, $t, $body),
            DType::U32 => with_elem!(@ u32, $t, $body),
            DType::U64 => with_elem!(@ u64, $t, $body),
            DType::Bool => with_elem!(@ Bool8, $t, $body),
        }
    };
    (@ $ty:ty, $t:ident, $body:expr) => {{
        type $t = $ty;
        $body
    }};
}
use with_elem;

fn cast_to<S: CastElem>(to: DType, x: &Tensor, out: &mut Tensor) -> Result<(), String> {
    let src = words::<S>(x)?;
    with_elem!(to, D => {
        map(src, words_mut::<D>(out)?, |v| D::from_wide(v.to_wide()));
        Ok(())
    })
}
