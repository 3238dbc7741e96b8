//! Which converter wins: a library converter for an op with a built-in converter is refused
//! unless the caller asks to override, and two libraries claiming one op are refused; a
//! refused library leaves the plugin registry and the converter table as they were. (Its
//! own test binary: the override changes `Relu` for the whole process.)

mod common;
mod extension_support;

use std::sync::{Arc, Mutex, MutexGuard};

use common::examples::build_example;
use common::{assert_close, random_f32};
use extension_support::{compile, one_node_model, run};
use torchtrt::plugin_api::abi::{
    Extension, ExtensionCell, ExtensionParts, TtrtExtension, export_parts_entry,
};
use torchtrt::plugin_api::{
    Converter, ConverterNode, ConverterOp, FieldCollection, FieldSpec, NetworkBuilder, Plugin,
    PluginCreator, PluginError, PluginKey, PluginResult, TensorHandle, UnaryOp,
};
use torchtrt::{LoadOptions, registry};

/// Converts `domain::op` into `|x|`.
struct AbsConverter(&'static str, &'static str);

impl Converter for AbsConverter {
    fn op(&self) -> ConverterOp {
        ConverterOp::new(self.0, self.1)
    }

    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        Ok(vec![net.add_unary(UnaryOp::Abs, node.input(0)?)?])
    }
}

/// A creator that creates nothing, under any key.
struct Inert(PluginKey);

impl PluginCreator for Inert {
    fn key(&self) -> PluginKey {
        self.0.clone()
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Err(PluginError::Unsupported("inert".into()))
    }
}

fn inert(ns: &str, name: &str) -> Arc<dyn PluginCreator> {
    Arc::new(Inert(PluginKey::new(ns, name, "1")))
}

extern "C" fn relu_as_abs() -> *const TtrtExtension {
    static CELL: ExtensionCell = ExtensionCell::new();
    export_parts_entry(&CELL, "relu_as_abs 1", || ExtensionParts {
        plugins: vec![inert("test_override", "Inert")],
        converters: vec![Arc::new(AbsConverter("", "Relu"))],
        custom_ops: Vec::new(),
    })
}

extern "C" fn impostor() -> *const TtrtExtension {
    static CELL: ExtensionCell = ExtensionCell::new();
    export_parts_entry(&CELL, "impostor 1", || ExtensionParts {
        plugins: vec![inert("test_impostor", "Inert")],
        converters: vec![Arc::new(AbsConverter("com.example", "FusedScaleBias"))],
        custom_ops: Vec::new(),
    })
}

extern "C" fn gelu_thief() -> *const TtrtExtension {
    static CELL: ExtensionCell = ExtensionCell::new();
    export_parts_entry(&CELL, "gelu_thief 1", || ExtensionParts {
        plugins: vec![inert("", "CustomGeluPluginDynamic")],
        converters: vec![Arc::new(AbsConverter("com.test", "Fresh"))],
        custom_ops: Vec::new(),
    })
}

fn in_process(entry: extern "C" fn() -> *const TtrtExtension, label: &str) -> Extension {
    // SAFETY: the entry points above keep the ABI's contract.
    unsafe { Extension::from_entry(entry, label) }.expect("readable tables")
}

/// Holds the tests of this file apart: each compares process-wide state before and after.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The converter table and the registry's keys, to compare before and after.
fn state() -> (Vec<String>, Vec<PluginKey>) {
    let ops = torchtrt::onnx::extension_ops()
        .iter()
        .map(|o| format!("{}::{} {}", o.domain, o.op_type, o.provider))
        .collect();
    let keys = registry().creators().into_iter().map(|c| c.key).collect();
    (ops, keys)
}

#[test]
fn a_builtin_op_is_overridden_only_when_asked() {
    let _serial = serial();
    torchtrt::init_plugins().unwrap();
    let model = one_node_model("relu", "", "Relu", Vec::new());
    let x = random_f32(4 * 8, 11);
    let before = state();
    let ext = in_process(relu_as_abs, "relu-as-abs");
    let e = torchtrt::register_extension(&ext, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Relu")
            && e.contains("built-in converter")
            && e.contains("--override-converters"),
        "{e}"
    );
    assert_eq!(state(), before, "a refused library changes nothing");
    let relu: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
    assert_close(
        &run(&compile(&model).unwrap(), &x).unwrap(),
        &relu,
        0.0,
        0.0,
    );

    let options = LoadOptions {
        override_converters: true,
    };
    let info = torchtrt::register_extension(&ext, &options).unwrap();
    assert_eq!(
        info.plugins,
        [PluginKey::new("test_override", "Inert", "1")]
    );
    assert!(info.converters[0].overrides_builtin);
    let abs: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    assert_close(&run(&compile(&model).unwrap(), &x).unwrap(), &abs, 0.0, 0.0);
}

#[test]
fn two_libraries_claiming_one_op_are_refused_and_nothing_changes() {
    let _serial = serial();
    let lib = build_example("converter_rust", "torchtrt_example_converter_rust");
    torchtrt::load_extensions(&lib, &LoadOptions::default()).unwrap();
    let before = state();
    let options = LoadOptions {
        override_converters: true,
    };
    let e = torchtrt::register_extension(&in_process(impostor, "impostor"), &options)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("com.example::FusedScaleBias") && e.contains("torchtrt_example_converter_rust"),
        "{e}"
    );
    assert_eq!(state(), before);
}

#[test]
fn a_plugin_key_clash_adds_no_converter_either() {
    let _serial = serial();
    torchtrt::init_plugins().unwrap();
    let before = state();
    let e = torchtrt::register_extension(
        &in_process(gelu_thief, "gelu-thief"),
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("CustomGeluPluginDynamic"), "{e}");
    assert_eq!(state(), before);
    let model = one_node_model("fresh", "com.test", "Fresh", Vec::new());
    let e = compile(&model)
        .err()
        .expect("no converter for com.test::Fresh");
    assert!(e.contains("no converter"), "{e}");
}
