//! Einsum: the equation resolved to per-label sizes and strides, then either a batched
//! gemm (two inputs whose labels each sit in both inputs or in the output) or a direct
//! contraction that sums products over the labels missing from the output.

use torchtrt_core::layers::{Einsum, EinsumPlan};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::einsum_matmul::BatchedMatMul;
use crate::dispatch::{with_float, with_int};
use crate::parallel::for_each_chunk;
use crate::scalar::{FloatElem, Int, Real};
use crate::tensor_access::{check_dtype, check_output, contiguous_strides, elems, elems_mut};

const WHAT: &str = "Einsum";

struct EinsumKernel {
    layer: Einsum,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Einsum,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(EinsumKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// An equation applied to concrete shapes.
pub(super) struct Geometry {
    /// Extent of each label.
    pub(super) sizes: Vec<usize>,
    /// Per input, the element stride of each label (0 where absent or broadcast).
    pub(super) strides: Vec<Vec<usize>>,
    /// Per input, its labels (a repeated label means a diagonal).
    pub(super) inputs: Vec<Vec<usize>>,
    /// The output's labels.
    pub(super) output: Vec<usize>,
}

impl Geometry {
    fn new(plan: &EinsumPlan, shapes: &[&[usize]]) -> Result<Geometry, String> {
        let mut sizes: Vec<Option<usize>> = vec![None; plan.labels];
        for (i, (labels, shape)) in plan.inputs.iter().zip(shapes).enumerate() {
            for (&l, &d) in labels.iter().zip(shape.iter()) {
                let broadcast = l < plan.ellipsis;
                sizes[l] = match sizes[l] {
                    None => Some(d),
                    Some(s) if s == d || (broadcast && d == 1) => Some(s),
                    Some(1) if broadcast => Some(d),
                    Some(s) => {
                        return Err(format!(
                            "{WHAT}: dim of size {d} in input {i} {shape:?} meets a size {s} under the same label"
                        ));
                    }
                };
            }
        }
        let sizes: Vec<usize> = sizes.into_iter().map(|s| s.unwrap_or(1)).collect();
        let strides = plan
            .inputs
            .iter()
            .zip(shapes)
            .map(|(labels, shape)| {
                let mut per_label = vec![0usize; plan.labels];
                for ((&l, &d), s) in labels
                    .iter()
                    .zip(shape.iter())
                    .zip(contiguous_strides(shape))
                {
                    if d == sizes[l] {
                        per_label[l] += s;
                    }
                }
                per_label
            })
            .collect();
        Ok(Geometry {
            sizes,
            strides,
            inputs: plan.inputs.clone(),
            output: plan.output.clone(),
        })
    }

    fn output_shape(&self) -> Vec<usize> {
        self.output.iter().map(|&l| self.sizes[l]).collect()
    }
}

impl Kernel for EinsumKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        if outputs.len() != 1 || inputs.is_empty() {
            return Err(format!(
                "{WHAT} expects inputs and 1 output, got {} and {}",
                inputs.len(),
                outputs.len()
            ));
        }
        for t in inputs {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let ranks: Vec<usize> = inputs.iter().map(|t| t.rank()).collect();
        let plan = self
            .layer
            .plan(&ranks)
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
        let geom = Geometry::new(&plan, &shapes)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &geom.output_shape())?;
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                let mut bufs: Vec<Vec<<T as FloatElem>::C>> = vec![Vec::new(); inputs.len()];
                let mut views = Vec::with_capacity(inputs.len());
                for (t, buf) in inputs.iter().zip(bufs.iter_mut()) {
                    views.push(T::view(elems::<T>(t)?, buf));
                }
                let mut result = Ok(());
                T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                    result = match BatchedMatMul::of(&geom) {
                        Some(mm) => mm.run(&views, oc),
                        None => {
                            contract(&geom, &views, oc, <<T as FloatElem>::C as Real>::ZERO, |a, b| a + b, |a, b| a * b);
                            Ok(())
                        }
                    };
                });
                result
            }),
            d => with_int!(d, WHAT, T => {
                let views: Vec<&[T]> = inputs.iter().map(|t| elems::<T>(t)).collect::<Result<_, _>>()?;
                contract(&geom, &views, elems_mut(out)?, T::ZERO, T::wadd, T::wmul);
                Ok(())
            }),
        }
    }
}

/// The direct contraction: each output element sums, over every combination of the
/// summed labels, the product of the inputs' elements. The last summed label runs in the
/// innermost loop, the others through an odometer.
fn contract<A: Copy + Send + Sync>(
    g: &Geometry,
    inputs: &[&[A]],
    out: &mut [A],
    zero: A,
    add: impl Fn(A, A) -> A + Sync + Send,
    mul: impl Fn(A, A) -> A + Sync + Send,
) {
    let summed: Vec<usize> = (0..g.sizes.len())
        .filter(|l| !g.output.contains(l))
        .collect();
    if summed.iter().any(|&l| g.sizes[l] == 0) {
        out.fill(zero);
        return;
    }
    let (outer, inner) = match summed.split_last() {
        Some((&last, rest)) => (rest.to_vec(), Some(last)),
        None => (Vec::new(), None),
    };
    let inner_len = inner.map_or(1, |l| g.sizes[l]);
    let inner_step: Vec<usize> = g
        .strides
        .iter()
        .map(|s| inner.map_or(0, |l| s[l]))
        .collect();
    let out_dims = g.output_shape();
    for_each_chunk(out, |start, chunk| {
        let n = inputs.len();
        let mut base = vec![0usize; n];
        let mut offsets = vec![0usize; n];
        let mut counter = vec![0usize; outer.len()];
        for (j, o) in chunk.iter_mut().enumerate() {
            let mut rest = start + j;
            base.fill(0);
            for (d, &l) in g.output.iter().enumerate().rev() {
                let i = rest % out_dims[d];
                rest /= out_dims[d];
                for (b, s) in base.iter_mut().zip(&g.strides) {
                    *b += i * s[l];
                }
            }
            offsets.copy_from_slice(&base);
            counter.fill(0);
            let mut acc = zero;
            loop {
                for t in 0..inner_len {
                    let mut p = inputs[0][offsets[0] + t * inner_step[0]];
                    for k in 1..n {
                        p = mul(p, inputs[k][offsets[k] + t * inner_step[k]]);
                    }
                    acc = add(acc, p);
                }
                if !advance(&mut counter, &mut offsets, &outer, g) {
                    break;
                }
            }
            *o = acc;
        }
    });
}

/// Steps the odometer over the `labels` (last fastest), keeping `offsets` in step; false
/// once it wraps around.
fn advance(counter: &mut [usize], offsets: &mut [usize], labels: &[usize], g: &Geometry) -> bool {
    for (c, &l) in counter.iter_mut().zip(labels).rev() {
        *c += 1;
        if *c < g.sizes[l] {
            for (o, s) in offsets.iter_mut().zip(&g.strides) {
                *o += s[l];
            }
            return true;
        }
        for (o, s) in offsets.iter_mut().zip(&g.strides) {
            *o -= (*c - 1) * s[l];
        }
        *c = 0;
    }
    false
}
