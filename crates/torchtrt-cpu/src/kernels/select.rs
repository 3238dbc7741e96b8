//! Select (ONNX `Where`): the condition, `x` and `y` read through one broadcast walk.

use torchtrt_core::layers::Select;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_width;
use crate::parallel::for_each_chunk;
use crate::strided::{Strided, broadcast_shape, broadcast_strides};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, words, words_mut};

const WHAT: &str = "Select";

struct SelectKernel {
    dtype: DType,
}

pub(super) fn prepare(_: &Select, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(SelectKernel {
        dtype: inputs[1].dtype,
    }))
}

impl Kernel for SelectKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 3..=3, 1)?;
        let (c, x, y) = (inputs[0], inputs[1], inputs[2]);
        check_dtype(WHAT, c, DType::Bool)?;
        check_dtype(WHAT, x, self.dtype)?;
        check_dtype(WHAT, y, self.dtype)?;
        let shape = broadcast_shape(&broadcast_shape(c.shape(), x.shape())?, y.shape())?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let sc = broadcast_strides(c.shape(), &shape)?;
        let sx = broadcast_strides(x.shape(), &shape)?;
        let sy = broadcast_strides(y.shape(), &shape)?;
        let strides: Vec<[isize; 3]> = (0..shape.len()).map(|d| [sc[d], sx[d], sy[d]]).collect();
        let walk = Strided::new(&shape, &strides, [0, 0, 0]);
        with_width!(self.dtype, W => {
            select::<W>(&walk, elems::<u8>(c)?, words(x)?, words(y)?, words_mut(out)?);
            Ok(())
        })
    }
}

fn select<W: Copy + Send + Sync>(walk: &Strided<3>, c: &[u8], x: &[W], y: &[W], out: &mut [W]) {
    let [sc, sx, sy] = walk.inner_strides();
    for_each_chunk(out, |start, chunk| {
        walk.for_each_run(start, start + chunk.len(), |o, [ic, ix, iy], len| {
            let dst = &mut chunk[o - start..o - start + len];
            if sc == 1 && sx == 1 && sy == 1 {
                let (c, x, y) = (&c[ic..ic + len], &x[ix..ix + len], &y[iy..iy + len]);
                for (((o, &c), &x), &y) in dst.iter_mut().zip(c).zip(x).zip(y) {
                    *o = if c != 0 { x } else { y };
                }
                return;
            }
            for (j, o) in dst.iter_mut().enumerate() {
                let at = |base: usize, step: isize| (base as isize + j as isize * step) as usize;
                *o = if c[at(ic, sc)] != 0 {
                    x[at(ix, sx)]
                } else {
                    y[at(iy, sy)]
                };
            }
        });
    });
}
