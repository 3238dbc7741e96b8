//! `include/torchtrt_plugin.h` and the Rust definitions agree: the header compiles as
//! strict C11, and every structure's size, alignment and member offsets, and every
//! constant, match.

mod common;

use std::collections::BTreeMap;
use std::mem::offset_of;
use std::process::Command;

use torchtrt_plugin_api::abi::*;
use torchtrt_plugin_api::{
    BinaryOp, CAPABILITY_ALIASED_OUTPUTS, CAPABILITY_SHAPE_INPUTS, CAPABILITY_SIZED_OUTPUTS,
    CAPABILITY_TACTICS, DType, DeviceKind, DimOp, FieldType, TensorFormat, UnaryOp,
};

macro_rules! layout {
    ($out:ident; $($t:ident { $($f:ident),* })*) => {$(
        $out.insert(stringify!($t).to_string(), size_of::<$t>().to_string());
        $out.insert(format!("{}.align", stringify!($t)), align_of::<$t>().to_string());
        $(
            let member = stringify!($f).trim_end_matches('_');
            $out.insert(format!("{}.{member}", stringify!($t)), offset_of!($t, $f).to_string());
        )*
    )*};
}

fn rust_view() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    layout!(v;
        TtrtErrorBuf { data, capacity }
        TtrtTensorDesc { dtype, format, nb_dims, reserved, dims }
        TtrtPortDesc { dtype, format }
        TtrtField { name, field_type, reserved, length, data }
        TtrtFieldSpec { name, field_type, required, min_len, max_len, default_value, doc }
        TtrtShapeExpr { nb_dims, reserved, dims }
        TtrtExprBuilder { ctx, constant, operation, constant_value, unknown }
        TtrtShapeValues { kind, count, ints, floats }
        TtrtLaunch { device, device_ordinal, nb_inputs, nb_outputs, input_descs, output_descs,
            inputs, outputs, workspace, workspace_size, stream, threads, reserved, cuda,
            shape_values }
        TtrtKernelLaunch { program, program_len, source, source_len, kernel, kernel_len, grid,
            block, shared_bytes, nb_args, args, arg_sizes }
        TtrtCudaRuntime { self_, launch, resident_blocks, constant }
        TtrtPlugin { self_, num_outputs, output_dtypes, output_shapes, supports, configure,
            workspace_size, enqueue, serialize_fields, clone, destroy, shape_inputs,
            output_shapes_of, sized_outputs, tactics, set_tactic, aliased_input }
        TtrtSizedOutput { output, axis, count }
        TtrtTactic { id, name }
        TtrtCreator { self_, plugin_namespace, name, version, fields, nb_fields, capabilities,
            create }
        TtrtNode { name, op_type, domain, opset, attributes, nb_attributes, nb_inputs, inputs,
            nb_outputs, reserved }
        TtrtNetworkBuilder { abi_version, size, ctx, tensor_desc, tensor_value, add_constant,
            add_binary, add_unary, add_matmul, add_reshape, add_transpose, add_concat, add_cast,
            add_plugin, set_output }
        TtrtConverter { abi_version, reserved, self_, domain, op_type, since_opset, until_opset,
            convert }
        TtrtCustomOp { abi_version, reserved, self_, domain, op_type, nb_inputs, nb_outputs,
            attributes, nb_attributes, reserved1, output_dtypes, output_shapes, supports,
            cpu_kernel, cuda_kernel }
        TtrtExtension { abi_version, nb_creators, provider, creators, nb_converters, reserved0,
            converters, nb_custom_ops, reserved1, custom_ops }
    );
    let mut c = |name: &str, value: i64| v.insert(name.to_string(), value.to_string());
    c("TTRT_ABI_VERSION", TTRT_ABI_VERSION.into());
    c("TTRT_ABI_VERSION_MIN", TTRT_ABI_VERSION_MIN.into());
    c(
        "TTRT_SHAPE_VALUES_UNKNOWN",
        TTRT_SHAPE_VALUES_UNKNOWN.into(),
    );
    c("TTRT_SHAPE_VALUES_INTS", TTRT_SHAPE_VALUES_INTS.into());
    c("TTRT_SHAPE_VALUES_FLOATS", TTRT_SHAPE_VALUES_FLOATS.into());
    c("TTRT_MAX_DIMS", TTRT_MAX_DIMS as i64);
    c("TTRT_TACTIC_NAME_LEN", TTRT_TACTIC_NAME_LEN as i64);
    for (name, bit) in [
        ("SHAPE_INPUTS", CAPABILITY_SHAPE_INPUTS),
        ("SIZED_OUTPUTS", CAPABILITY_SIZED_OUTPUTS),
        ("TACTICS", CAPABILITY_TACTICS),
        ("ALIASED_OUTPUTS", CAPABILITY_ALIASED_OUTPUTS),
    ] {
        c(&format!("TTRT_CAPABILITY_{name}"), bit.into());
    }
    c("TTRT_DIM_INVALID", TTRT_DIM_INVALID);
    c("TTRT_OK", TTRT_OK.into());
    c(
        "TTRT_ERROR_INVALID_ARGUMENT",
        TTRT_ERROR_INVALID_ARGUMENT.into(),
    );
    c("TTRT_ERROR_UNSUPPORTED", TTRT_ERROR_UNSUPPORTED.into());
    c("TTRT_ERROR_EXECUTION", TTRT_ERROR_EXECUTION.into());
    c("TTRT_ERROR_PANIC", TTRT_ERROR_PANIC.into());
    for d in DType::ALL {
        c(&format!("TTRT_DTYPE_{}", d.name().to_uppercase()), d as i64);
    }
    c("TTRT_FORMAT_LINEAR", TensorFormat::Linear as i64);
    c("TTRT_DEVICE_CPU", DeviceKind::Cpu as i64);
    c("TTRT_DEVICE_CUDA", DeviceKind::Cuda as i64);
    for t in FieldType::ALL {
        let name = match t {
            FieldType::Char => "CHAR".to_string(),
            other => other.name().to_uppercase(),
        };
        c(&format!("TTRT_FIELD_{name}"), t as i64);
    }
    for op in DimOp::ALL {
        let name = match op {
            DimOp::Add => "ADD",
            DimOp::Sub => "SUB",
            DimOp::Mul => "MUL",
            DimOp::FloorDiv => "FLOOR_DIV",
            DimOp::CeilDiv => "CEIL_DIV",
            DimOp::Min => "MIN",
            DimOp::Max => "MAX",
        };
        c(&format!("TTRT_DIM_{name}"), op as i64);
    }
    c(
        "TTRT_CONVERTER_ABI_VERSION",
        TTRT_CONVERTER_ABI_VERSION.into(),
    );
    c(
        "TTRT_CUSTOM_OP_ABI_VERSION",
        TTRT_CUSTOM_OP_ABI_VERSION.into(),
    );
    c("TTRT_TENSOR_NONE", TTRT_TENSOR_NONE);
    for op in BinaryOp::ALL {
        c(
            &format!("TTRT_BINARY_{}", format!("{op:?}").to_uppercase()),
            op as i64,
        );
    }
    let unary = [
        ("ABS", UnaryOp::Abs),
        ("NEG", UnaryOp::Neg),
        ("EXP", UnaryOp::Exp),
        ("LOG", UnaryOp::Log),
        ("SQRT", UnaryOp::Sqrt),
        ("RECIPROCAL", UnaryOp::Reciprocal),
        ("ERF", UnaryOp::Erf),
        ("RELU", UnaryOp::Relu),
        ("SIGMOID", UnaryOp::Sigmoid),
        ("TANH", UnaryOp::Tanh),
        ("LEAKY_RELU", UnaryOp::LeakyRelu { alpha: 0.0 }),
        ("CLIP", UnaryOp::Clip { min: 0.0, max: 0.0 }),
        (
            "HARD_SIGMOID",
            UnaryOp::HardSigmoid {
                alpha: 0.0,
                beta: 0.0,
            },
        ),
        ("HARD_SWISH", UnaryOp::HardSwish),
        ("SOFTPLUS", UnaryOp::Softplus),
        ("GELU", UnaryOp::Gelu),
    ];
    for (name, op) in unary {
        c(&format!("TTRT_UNARY_{name}"), op.to_raw().0.into());
    }
    v.insert("TTRT_ENTRY_POINT".to_string(), TTRT_ENTRY_POINT.to_string());
    v
}

#[test]
fn c_and_rust_layouts_and_constants_agree() {
    let exe = common::executable("layout");
    let out = Command::new(&exe)
        .output()
        .expect("the layout program runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("ASCII output");
    let c_view: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let rust = rust_view();
    for (name, value) in &rust {
        assert_eq!(
            c_view.get(name),
            Some(value),
            "`{name}` differs between C and Rust"
        );
    }
    let unchecked: Vec<&String> = c_view.keys().filter(|k| !rust.contains_key(*k)).collect();
    assert!(
        unchecked.is_empty(),
        "C entries without a Rust counterpart: {unchecked:?}"
    );
}

#[test]
fn example_plugins_compile_as_strict_c11() {
    for name in ["scale_shift", "failing", "not_extension", "malformed"] {
        let lib = common::shared_library(name, &[]);
        assert!(lib.exists(), "{name} was built");
    }
}
