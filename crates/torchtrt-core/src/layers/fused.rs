//! A chain (or small tree) of element-wise layers run as one: the builder's element-wise
//! fusion (`builder/fuse_elementwise.rs`) groups `Elementwise`, `Unary`, `Activation` and
//! `Cast` layers whose intermediate results nothing else reads, so a GPU backend can
//! generate one kernel for the group instead of a launch and a memory round trip per layer.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerKind, LayerOp, TypeShape};
use crate::backend::Kernel;
use crate::runtime::{concrete, infer_concrete};
use crate::tensor::Tensor;

/// Where a fused step reads one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FusedOperand {
    /// The fused layer's input of this index.
    Input(u32),
    /// The result of an earlier step.
    Step(u32),
}

/// One layer of the group, with its operands.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FusedStep {
    /// An `Elementwise`, `Unary`, `Activation` or `Cast` layer.
    pub kind: LayerKind,
    /// Its inputs, in the layer's order.
    pub operands: Vec<FusedOperand>,
}

/// Element-wise layers computed as one; the output is the last step's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fused {
    /// How many inputs the fused layer takes.
    pub inputs: u32,
    /// The steps in evaluation order; each reads inputs and earlier steps only.
    pub steps: Vec<FusedStep>,
}

/// Whether `kind` may be a step of a fused layer.
pub fn fusible_kind(kind: &LayerKind) -> bool {
    match kind {
        LayerKind::Unary(_) | LayerKind::Activation(_) | LayerKind::Cast(_) => true,
        LayerKind::Elementwise(e) => !e.op.is_comparison() && !e.op.is_logical(),
        _ => false,
    }
}

impl Fused {
    /// Every step's dtype and shape for these inputs, in order (the last is the output);
    /// an error for a malformed group, naming the step.
    pub fn step_types(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        if inputs.len() != self.inputs as usize {
            return Err(format!(
                "Fused takes {} inputs, got {}",
                self.inputs,
                inputs.len()
            ));
        }
        if self.steps.is_empty() {
            return Err("Fused has no steps".into());
        }
        let mut types: Vec<TypeShape> = Vec::with_capacity(self.steps.len());
        for (s, step) in self.steps.iter().enumerate() {
            let what = |m: String| format!("Fused step {s} ({}): {m}", step.kind.op().kind());
            if !fusible_kind(&step.kind) {
                return Err(what("not an element-wise layer".into()));
            }
            let ins = step
                .operands
                .iter()
                .map(|&o| match o {
                    FusedOperand::Input(i) => inputs.get(i as usize).copied(),
                    FusedOperand::Step(k) => types.get(k as usize).map(|t| InferInput {
                        dtype: t.dtype,
                        shape: &t.shape,
                        value: None,
                    }),
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| what(format!("operand out of range in {:?}", step.operands)))?;
            let op = step.kind.op();
            let (min, max) = op.arity();
            if ins.len() < min || ins.len() > max {
                return Err(what(format!(
                    "takes {min} to {max} inputs, got {}",
                    ins.len()
                )));
            }
            let mut out = op.infer(&ins).map_err(what)?;
            if out.len() != 1 {
                return Err(what(format!("has {} outputs", out.len())));
            }
            types.push(out.remove(0));
        }
        Ok(types)
    }

    /// A kernel that runs the steps one after another with kernels from `prepare` (a host
    /// backend's preparer), keeping the intermediate results in host tensors.
    pub fn chain_kernel(
        &self,
        inputs: &[InferInput<'_>],
        prepare: impl Fn(&LayerKind, &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String>,
    ) -> Result<Box<dyn Kernel>, String> {
        let types = self.step_types(inputs)?;
        let kernels = self
            .steps
            .iter()
            .map(|step| {
                let ins: Vec<InferInput<'_>> = step
                    .operands
                    .iter()
                    .map(|&o| match o {
                        FusedOperand::Input(i) => inputs[i as usize],
                        FusedOperand::Step(k) => InferInput {
                            dtype: types[k as usize].dtype,
                            shape: &types[k as usize].shape,
                            value: None,
                        },
                    })
                    .collect();
                prepare(&step.kind, &ins)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Box::new(ChainKernel {
            fused: self.clone(),
            kernels,
        }))
    }
}

impl LayerOp for Fused {
    fn kind(&self) -> &'static str {
        "Fused"
    }

    fn arity(&self) -> (usize, usize) {
        (self.inputs as usize, self.inputs as usize)
    }

    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let mut types = self.step_types(inputs)?;
        Ok(types.pop().into_iter().collect())
    }
}

/// The steps of a fused layer run by separate host kernels.
struct ChainKernel {
    fused: Fused,
    kernels: Vec<Box<dyn Kernel>>,
}

impl Kernel for ChainKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let [out] = outputs else {
            return Err(format!("Fused writes 1 output, got {}", outputs.len()));
        };
        let mut results: Vec<Tensor> = Vec::with_capacity(self.fused.steps.len());
        let last = self.fused.steps.len() - 1;
        for (s, (step, kernel)) in self.fused.steps.iter().zip(&self.kernels).enumerate() {
            let ins = step
                .operands
                .iter()
                .map(|&o| match o {
                    FusedOperand::Input(i) => inputs.get(i as usize).copied(),
                    FusedOperand::Step(k) => results.get(k as usize),
                })
                .collect::<Option<Vec<&Tensor>>>()
                .ok_or_else(|| format!("Fused step {s}: operand out of range"))?;
            if s == last {
                return kernel.execute(&ins, std::slice::from_mut(out));
            }
            let (dtype, dims) = concrete_type(&step.kind, &ins)?;
            let mut next = [Tensor::zeros(dtype, &dims)];
            kernel.execute(&ins, &mut next)?;
            let [next] = next;
            results.push(next);
        }
        Ok(())
    }
}

/// The output dtype and shape of `kind` on these tensors.
fn concrete_type(kind: &LayerKind, ins: &[&Tensor]) -> Result<(DType, Vec<usize>), String> {
    let inputs: Vec<_> = ins.iter().map(|t| (t.dtype(), t.shape(), None)).collect();
    let ty = infer_concrete(kind, &inputs)?
        .pop()
        .ok_or("an element-wise step without an output")?;
    concrete(&ty)
}
