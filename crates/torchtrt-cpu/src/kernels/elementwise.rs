//! Binary element-wise operations with numpy broadcasting.

use torchtrt_core::layers::Elementwise;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::elementwise_ops::{Arith, BinOp, Operand, arith_int, arith_real, compare, logic, shift};
use crate::dispatch::{with_float, with_int};
use crate::parallel::for_each_chunk;
use crate::scalar::{FloatElem, Int};
use crate::strided::{Strided, broadcast_shape, broadcast_strides};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Elementwise";

struct ElementwiseKernel {
    op: BinOp,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Elementwise,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    let op = BinOp::new(layer.op, layer.fmod);
    let ok = match op {
        BinOp::Logic(_) => dtype == DType::Bool,
        BinOp::Arith(Arith::PRelu) => dtype.is_float(),
        BinOp::Arith(_) | BinOp::Compare(_) => dtype.is_float() || dtype.is_integer(),
        BinOp::Shift(_) => dtype.is_integer(),
    };
    if !ok {
        return Err(format!("{:?} has no CPU kernel for {dtype}", layer.op));
    }
    Ok(Box::new(ElementwiseKernel { op, dtype }))
}

impl Kernel for ElementwiseKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let (a, b) = (inputs[0], inputs[1]);
        check_dtype(WHAT, a, self.dtype)?;
        check_dtype(WHAT, b, self.dtype)?;
        let shape = broadcast_shape(a.shape(), b.shape())?;
        let out_dtype = match self.op {
            BinOp::Compare(_) => DType::Bool,
            _ => self.dtype,
        };
        let out = &mut outputs[0];
        check_output(WHAT, out, out_dtype, &shape)?;
        let sa = broadcast_strides(a.shape(), &shape)?;
        let sb = broadcast_strides(b.shape(), &shape)?;
        let strides: Vec<[isize; 2]> = sa.into_iter().zip(sb).map(|(x, y)| [x, y]).collect();
        let walk = Strided::new(&shape, &strides, [0, 0]);
        let dtype = self.dtype;
        match self.op {
            BinOp::Arith(op) if dtype.is_float() => with_float!(dtype, WHAT, T => {
                float_arith::<T>(op, &walk, elems(a)?, elems(b)?, elems_mut(out)?);
                Ok(())
            }),
            BinOp::Arith(op) => with_int!(dtype, WHAT, T => {
                int_arith::<T>(op, &walk, elems(a)?, elems(b)?, elems_mut(out)?)
            }),
            BinOp::Compare(op) if dtype.is_float() => with_float!(dtype, WHAT, T => {
                drive::<T, u8, ()>(&walk, elems(a)?, elems(b)?, elems_mut(out)?, |_, x, y, o| {
                    compare(op, x, y, o)
                });
                Ok(())
            }),
            BinOp::Compare(op) => with_int!(dtype, WHAT, T => {
                drive::<T, u8, ()>(&walk, elems(a)?, elems(b)?, elems_mut(out)?, |_, x, y, o| {
                    compare(op, x, y, o)
                });
                Ok(())
            }),
            BinOp::Shift(op) => with_int!(dtype, WHAT, T => {
                drive::<T, T, ()>(&walk, elems(a)?, elems(b)?, elems_mut(out)?, |_, x, y, o| {
                    shift(op, x, y, o)
                });
                Ok(())
            }),
            BinOp::Logic(op) => {
                drive::<u8, u8, ()>(
                    &walk,
                    elems(a)?,
                    elems(b)?,
                    elems_mut(out)?,
                    |_, x, y, o| logic(op, x, y, o),
                );
                Ok(())
            }
        }
    }
}

fn float_arith<T: FloatElem>(op: Arith, walk: &Strided<2>, a: &[T], b: &[T], out: &mut [T]) {
    type Bufs<C> = (Vec<C>, Vec<C>, Vec<C>);
    drive::<T, T, Bufs<T::C>>(walk, a, b, out, |bufs, x, y, o| {
        let x = to_compute(x, &mut bufs.0);
        let y = to_compute(y, &mut bufs.1);
        T::write(o, &mut bufs.2, |o| arith_real(op, x, y, o));
    });
}

fn to_compute<'a, T: FloatElem>(x: Operand<'a, T>, buf: &'a mut Vec<T::C>) -> Operand<'a, T::C> {
    match x {
        Operand::Slice(s) => Operand::Slice(T::view(s, buf)),
        Operand::Scalar(v) => Operand::Scalar(v.to_c()),
    }
}

fn int_arith<T: Int>(
    op: Arith,
    walk: &Strided<2>,
    a: &[T],
    b: &[T],
    out: &mut [T],
) -> Result<(), String> {
    if matches!(op, Arith::Div | Arith::Mod { .. })
        && !out.is_empty()
        && let Some(i) = b.iter().position(|&v| v == T::ZERO)
    {
        return Err(format!(
            "{op:?}: integer division by zero (element {i} of the divisor)"
        ));
    }
    drive::<T, T, ()>(walk, a, b, out, |_, x, y, o| arith_int(op, x, y, o));
    Ok(())
}

/// Walks the output in parallel chunks, handing each run of the innermost dim to `run`
/// with a per-chunk scratch value.
fn drive<A: Copy + Sync, O: Send, S: Default>(
    walk: &Strided<2>,
    a: &[A],
    b: &[A],
    out: &mut [O],
    run: impl Fn(&mut S, Operand<'_, A>, Operand<'_, A>, &mut [O]) + Sync + Send,
) {
    let [sa, sb] = walk.inner_strides();
    for_each_chunk(out, |start, chunk| {
        let mut scratch = S::default();
        walk.for_each_run(start, start + chunk.len(), |o, [ia, ib], len| {
            let dst = &mut chunk[o - start..o - start + len];
            run(
                &mut scratch,
                operand(a, sa, ia, len),
                operand(b, sb, ib, len),
                dst,
            );
        });
    });
}

/// A run of `len` elements of `src` from `at`, or one repeated element when `stride` is 0.
fn operand<A: Copy>(src: &[A], stride: isize, at: usize, len: usize) -> Operand<'_, A> {
    if stride == 0 {
        Operand::Scalar(src[at])
    } else {
        Operand::Slice(&src[at..at + len])
    }
}
