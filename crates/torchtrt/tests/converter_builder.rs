//! Every member of the network builder a custom converter sees, through the C ABI: a
//! converter linked into the test reads its input's symbolic shape and its weight's value,
//! then emits matmul, cast, concat, reshape, transpose and an activation; the compiled model
//! matches a plain reference.

mod common;
mod extension_support;

use std::sync::Arc;

use common::{assert_close, random_f32};
use extension_support::{compile, model_with_weight, run};
use torchtrt::LoadOptions;
use torchtrt::plugin_api::abi::{
    Extension, ExtensionCell, ExtensionParts, TtrtExtension, export_parts_entry,
};
use torchtrt::plugin_api::{
    Converter, ConverterNode, ConverterOp, DType, NetworkBuilder, PluginError, PluginResult,
    TensorHandle, UnaryOp,
};

/// `com.test::Mix(x[n, 8], w[8, 8])` → `tanh(interleave(x·wᵀ, x))` of shape `[n, 16]`, where
/// `interleave` puts column `j` of both halves next to each other.
struct Mix;

impl Converter for Mix {
    fn op(&self) -> ConverterOp {
        ConverterOp::new("com.test", "Mix")
    }

    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        let (x, w) = (node.input(0)?, node.input(1)?);
        let bad = |m: String| PluginError::InvalidInput(m);
        let shape = net.tensor_desc(x)?.shape;
        if shape != [-1, 8] {
            return Err(bad(format!("x has shape {shape:?}, expected [-1, 8]")));
        }
        let bytes = net
            .tensor_value(w)
            .ok_or_else(|| bad("w is not a constant".into()))?;
        if bytes.len() != 8 * 8 * 4 || net.tensor_value(x).is_some() {
            return Err(bad(
                "w must be a constant of 64 f32, x a run-time input".into()
            ));
        }
        let xw = net.add_matmul(x, w, false, true)?;
        let xw = net.add_cast(xw, DType::F32)?;
        let both = net.add_concat(&[xw, x], 1)?;
        let halves = net.add_reshape(both, &[0, 2, 8])?;
        let pairs = net.add_transpose(halves, &[0, 2, 1])?;
        let flat = net.add_reshape(pairs, &[0, -1])?;
        Ok(vec![net.add_unary(UnaryOp::Tanh, flat)?])
    }
}

extern "C" fn mix_extension() -> *const TtrtExtension {
    static CELL: ExtensionCell = ExtensionCell::new();
    export_parts_entry(&CELL, "mix 1", || ExtensionParts {
        converters: vec![Arc::new(Mix)],
        ..ExtensionParts::default()
    })
}

#[test]
fn a_converter_uses_every_builder_member() {
    // SAFETY: the entry point above keeps the ABI's contract.
    let ext = unsafe { Extension::from_entry(mix_extension, "mix") }.unwrap();
    torchtrt::register_extension(&ext, &LoadOptions::default()).unwrap();
    let w = random_f32(64, 31);
    let model = model_with_weight(
        "mix",
        "com.test",
        "Mix",
        Vec::new(),
        Some((&[8, 8], &w)),
        16,
    );
    let engine = compile(&model).unwrap();
    let n = 5;
    let x = random_f32(n * 8, 32);
    let mut want = vec![0f32; n * 16];
    for r in 0..n {
        for j in 0..8 {
            let dot: f32 = (0..8).map(|k| x[r * 8 + k] * w[j * 8 + k]).sum();
            want[r * 16 + 2 * j] = dot.tanh();
            want[r * 16 + 2 * j + 1] = x[r * 8 + j].tanh();
        }
    }
    assert_close(&run(&engine, &x).unwrap(), &want, 1e-5, 1e-5);
}

#[test]
fn a_converter_refusing_its_inputs_names_the_node() {
    // SAFETY: the entry point above keeps the ABI's contract.
    let ext = unsafe { Extension::from_entry(mix_extension, "mix") }.unwrap();
    torchtrt::register_extension(&ext, &LoadOptions::default()).unwrap();
    let model = model_with_weight("mix_no_weight", "com.test", "Mix", Vec::new(), None, 16);
    let e = compile(&model).err().expect("the weight is missing");
    assert!(
        e.contains("mix_no_weight") && e.contains("input 1 is required"),
        "{e}"
    );
}
