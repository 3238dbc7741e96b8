//! The builder's optimisation passes, by name and in the order they run: layer passes see
//! each layer as it is added (after inference and plugin negotiation) and may replace it;
//! graph passes rewrite the whole graph once every layer is in.

use torchtrt_plugin_api::DeviceKind;

use super::{
    BuildConfig, Work, attention_heads, fold, fold_transpose, fuse, fuse_attention,
    fuse_elementwise, fuse_linear_late, fuse_matmul_scale, layouts, quantize, reshaped_transpose,
    split_products,
};
use crate::backend::Backend;
use crate::error::Result;
use crate::layers::{LayerKind, TypeShape};
use crate::network::{Layer, TensorId};

/// One layer as a layer pass sees it.
pub(super) struct Step<'a> {
    pub layer: &'a Layer,
    pub kind: &'a LayerKind,
    pub inputs: &'a [TensorId],
    pub types: &'a [TypeShape],
    /// How many live layers (and outputs) read each tensor of the network.
    pub uses: &'a [usize],
    pub device: DeviceKind,
    /// The CPU backend, which evaluates constant sub-graphs.
    pub cpu: Option<&'a dyn Backend>,
    pub config: &'a BuildConfig,
}

/// A pass over each layer as it is added; `true` when it has replaced the layer.
struct LayerPass {
    name: &'static str,
    enabled: fn(&BuildConfig) -> bool,
    run: fn(&mut Work, &Step<'_>) -> Result<bool>,
}

const LAYER_PASSES: &[LayerPass] = &[
    LayerPass {
        name: "fold_constants",
        enabled: |c| c.fold_constants,
        run: |w, s| match s.cpu {
            Some(cpu) => fold::try_fold(w, cpu, s.layer, s.kind, s.inputs, s.types, s.config),
            None => Ok(false),
        },
    },
    LayerPass {
        name: "reshaped_transpose",
        enabled: |_| true,
        run: |w, s| reshaped_transpose::run(w, s.layer, s.kind, s.inputs, s.device),
    },
    LayerPass {
        name: "fold_into_conv",
        enabled: |c| c.fold_constants,
        run: |w, s| fuse::fold_into_conv(w, s.layer, s.kind, s.inputs, s.types, s.uses),
    },
    LayerPass {
        name: "affine_as_conv",
        enabled: |c| c.fold_constants,
        run: |w, s| fuse::affine_as_conv(w, s.layer, s.kind, s.inputs, s.types, s.device),
    },
    LayerPass {
        name: "fuse_residual",
        enabled: |_| true,
        run: |w, s| fuse::fuse_residual(w, s.layer, s.kind, s.inputs, s.types, s.uses),
    },
    LayerPass {
        name: "fuse_matmul_bias",
        enabled: |_| true,
        run: |w, s| fuse::fuse_matmul_bias(w, s.layer, s.kind, s.inputs, s.types, s.uses),
    },
    LayerPass {
        name: "fold_scale_into_matmul",
        enabled: |c| c.fold_constants,
        run: |w, s| {
            fuse_matmul_scale::fold_scale_into_matmul(w, s.layer, s.kind, s.inputs, s.types, s.uses)
        },
    },
    LayerPass {
        name: "fuse_matmul_residual",
        enabled: |_| true,
        run: |w, s| fuse::fuse_matmul_residual(w, s.layer, s.kind, s.inputs, s.types, s.uses),
    },
    LayerPass {
        name: "fuse_silu",
        enabled: |_| true,
        run: |w, s| {
            Ok(fuse::fuse_silu(
                w, s.layer, s.kind, s.inputs, s.types, s.uses,
            ))
        },
    },
    LayerPass {
        name: "fuse_activation",
        enabled: |_| true,
        run: |w, s| {
            Ok(fuse::fuse_activation(
                w, s.layer, s.kind, s.inputs, s.types, s.uses,
            ))
        },
    },
];

/// How a graph pass runs: on the graph, given the network's outputs, the target backend and
/// the build configuration.
type GraphRun = fn(&mut Work, &[(String, TensorId)], &dyn Backend, &BuildConfig);

/// A pass over the whole graph.
struct GraphPass {
    name: &'static str,
    enabled: fn(&BuildConfig, &dyn Backend) -> bool,
    run: GraphRun,
}

const GRAPH_PASSES: &[GraphPass] = &[
    GraphPass {
        name: "quantize",
        enabled: |_, _| true,
        run: quantize::run,
    },
    GraphPass {
        name: "split_products",
        enabled: |c, b| c.fold_constants && b.splits_sliced_products(),
        run: |w, outputs, _, _| split_products::run(w, outputs),
    },
    GraphPass {
        name: "fuse_attention",
        enabled: |c, _| c.fuse_attention,
        run: |w, outputs, _, _| fuse_attention::run(w, outputs),
    },
    GraphPass {
        name: "attention_heads",
        enabled: |c, _| c.fuse_attention,
        run: |w, outputs, _, _| attention_heads::run(w, outputs),
    },
    GraphPass {
        name: "layouts",
        enabled: |c, _| c.layouts,
        run: |w, outputs, b, _| layouts::run(w, outputs, b),
    },
    GraphPass {
        name: "fuse_linear_late",
        enabled: |_, _| true,
        run: |w, outputs, _, c| fuse_linear_late::run(w, outputs, c.fold_constants),
    },
    GraphPass {
        name: "fold_transpose",
        enabled: |c, b| c.fuse_elementwise && b.fuses_elementwise(),
        run: |w, outputs, _, _| fold_transpose::run(w, outputs),
    },
    GraphPass {
        name: "fuse_elementwise",
        enabled: |c, b| c.fuse_elementwise && b.fuses_elementwise(),
        run: |w, outputs, b, _| fuse_elementwise::run(w, outputs, b),
    },
];

/// Runs the enabled layer passes in order until one replaces the layer; `true` if one did.
pub(super) fn run_layer_passes(work: &mut Work, step: &Step<'_>) -> Result<bool> {
    for pass in LAYER_PASSES.iter().filter(|p| (p.enabled)(step.config)) {
        if (pass.run)(work, step)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Runs the enabled graph passes in order.
pub(super) fn run_graph_passes(
    work: &mut Work,
    outputs: &[(String, TensorId)],
    config: &BuildConfig,
    backend: &dyn Backend,
) {
    for pass in GRAPH_PASSES.iter().filter(|p| (p.enabled)(config, backend)) {
        (pass.run)(work, outputs, backend, config);
    }
}

/// The builder's passes in the order they run: the layer passes, then the graph passes.
pub fn passes() -> Vec<&'static str> {
    LAYER_PASSES
        .iter()
        .map(|p| p.name)
        .chain(GRAPH_PASSES.iter().map(|p| p.name))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn passes_run_in_their_listed_order() {
        assert_eq!(
            super::passes(),
            [
                "fold_constants",
                "reshaped_transpose",
                "fold_into_conv",
                "affine_as_conv",
                "fuse_residual",
                "fuse_matmul_bias",
                "fold_scale_into_matmul",
                "fuse_matmul_residual",
                "fuse_silu",
                "fuse_activation",
                "quantize",
                "split_products",
                "fuse_attention",
                "attention_heads",
                "layouts",
                "fuse_linear_late",
                "fold_transpose",
                "fuse_elementwise",
            ]
        );
    }
}
