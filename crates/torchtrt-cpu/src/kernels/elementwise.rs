//! Binary element-wise operations with numpy broadcasting.

use torchtrt_core::layers::Elementwise;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::elementwise_ops::{
    Arith, BinOp, Operand, RowsWithRow, arith_apply, arith_int, arith_real, compare, logic, shift,
};
use crate::dispatch::{with_float, with_int};
use crate::parallel::{for_each_chunk, for_each_rows};
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

/// Scratch of one task of [`float_arith`]: its operands and result in the compute type.
type Bufs<C> = (Vec<C>, Vec<C>, Vec<C>);

fn float_arith<T: FloatElem>(op: Arith, walk: &Strided<2>, a: &[T], b: &[T], out: &mut [T]) {
    if let Some(rows) = RepeatedRows::of(walk) {
        let row_first = rows.row_first();
        for_each_rows(out, rows.len, rows.len, |first, chunk| {
            let mut bufs = Bufs::default();
            for (in_rows, one, out) in rows.segments(first, chunk, a, b) {
                let in_rows = T::view(in_rows, &mut bufs.0);
                let row = T::view(one, &mut bufs.1);
                T::write(out, &mut bufs.2, |out| {
                    let target = RowsWithRow {
                        rows: in_rows,
                        row,
                        row_first,
                        out,
                    };
                    arith_apply(op, target)
                });
            }
        });
        return;
    }
    drive::<T, T, Bufs<T::C>>(walk, a, b, out, |bufs, x, y, o| {
        float_run(op, bufs, x, y, o)
    });
}

/// One run of [`float_arith`], computed in `T::C`.
fn float_run<T: FloatElem>(
    op: Arith,
    bufs: &mut Bufs<T::C>,
    x: Operand<'_, T>,
    y: Operand<'_, T>,
    out: &mut [T],
) {
    let x = to_compute(x, &mut bufs.0);
    let y = to_compute(y, &mut bufs.1);
    T::write(out, &mut bufs.2, |o| arith_real(op, x, y, o));
}

/// A walk whose output is rows of `len` elements, of which one operand reads a row in place
/// (rows `len` apart) and the other repeats one row over `rows` rows: a channels-last
/// `[N, H·W, C]` tensor scaled by `[N, 1, C]`. The walk's runs are single short rows there;
/// this hands out whole rows without walking.
struct RepeatedRows {
    /// The dims outside the rows, outermost first, with each operand's strides.
    outer: Vec<(usize, [isize; 2])>,
    rows: usize,
    len: usize,
    /// Each operand's distance between rows: `len`, or 0 for the repeated row.
    row_strides: [isize; 2],
}

impl RepeatedRows {
    fn of(walk: &Strided<2>) -> Option<RepeatedRows> {
        let (dims, strides, base) = walk.dims();
        let rank = dims.len();
        if rank < 2 || base != [0, 0] || strides[rank - 1] != [1, 1] {
            return None;
        }
        let (rows, len, row_strides) = (dims[rank - 2], dims[rank - 1], strides[rank - 2]);
        let l = len as isize;
        if row_strides != [l, 0] && row_strides != [0, l] {
            return None;
        }
        let outer = dims[..rank - 2]
            .iter()
            .copied()
            .zip(strides[..rank - 2].iter().copied())
            .collect();
        Some(RepeatedRows {
            outer,
            rows,
            len,
            row_strides,
        })
    }

    /// `chunk` (output rows from `first` on) cut where the outer index changes, each piece
    /// with its operands: the rows read in place and the repeated row.
    fn segments<'s, 'o, T>(
        &'s self,
        first: usize,
        chunk: &'o mut [T],
        a: &'s [T],
        b: &'s [T],
    ) -> impl Iterator<Item = (&'s [T], &'s [T], &'o mut [T])> + use<'s, 'o, T> {
        let (rows, len) = (self.rows, self.len);
        let mut rest = chunk;
        let mut row = first;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let count = (rows - row % rows).min(rest.len() / len);
            let (out, tail) = std::mem::take(&mut rest).split_at_mut(count * len);
            let [ia, ib] = self.offsets(row);
            rest = tail;
            row += count;
            Some(if self.row_first() {
                (&b[ib..ib + count * len], &a[ia..ia + len], out)
            } else {
                (&a[ia..ia + count * len], &b[ib..ib + len], out)
            })
        })
    }

    /// True when the first operand is the repeated row.
    fn row_first(&self) -> bool {
        self.row_strides[0] == 0
    }

    /// Each operand's offset of output row `row`.
    fn offsets(&self, row: usize) -> [usize; 2] {
        let (mut outer, r) = (row / self.rows, row % self.rows);
        let mut at = self.row_strides.map(|s| s * r as isize);
        for &(d, s) in self.outer.iter().rev() {
            let i = (outer % d) as isize;
            outer /= d;
            at[0] += i * s[0];
            at[1] += i * s[1];
        }
        at.map(|o| o as usize)
    }
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
