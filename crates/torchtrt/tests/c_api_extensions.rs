//! `ttrt_load_extension` (torchtrt.h): a custom-converter library loaded through the C API
//! makes a model with its op compile and run through the C API; before loading, the op is
//! unknown, and a missing library is an error naming it. (Its own test binary: loading
//! changes the process-wide converter registry.)

mod capi_support;
#[path = "common/examples.rs"]
mod examples;

use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};

use capi_support::onnx_model::{custom_node, float_attr, model_bytes, value};
use capi_support::{assert_close, host_tensor, random_f32};
use examples::build_example;
use torchtrt::capi::*;
use torchtrt::plugin_api::abi::TTRT_OK;

fn last_error() -> String {
    // SAFETY: a NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(ttrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn converter_library_loaded_through_the_c_api_compiles_its_op() {
    let model = model_bytes(
        vec![custom_node(
            "com.example",
            "FusedScaleBias",
            &["x"],
            "y",
            vec![float_attr("scale", 1.5), float_attr("bias", -0.25)],
        )],
        vec![],
        value("x", &[Some(3), Some(8)]),
        value("y", &[Some(3), Some(8)]),
        &[("com.example", 1)],
    );
    let lib = build_example("converter_rust", "torchtrt_example_converter_rust");
    let c_lib = CString::new(lib.to_str().unwrap()).unwrap();
    let (mut rt, mut engine, mut ctx) = (null_mut(), null_mut(), null_mut());
    let mut x = random_f32(24, 8);
    let want: Vec<f32> = x.iter().map(|&v| v * 1.5 - 0.25).collect();
    let mut y = vec![0f32; 24];
    let input = host_tensor(Some(c"x"), 0, &[3, 8], &mut x);
    let mut output = host_tensor(Some(c"y"), 0, &[], &mut y);
    // SAFETY: valid handles, strings and buffers of the sizes given; handles destroyed once.
    unsafe {
        assert_eq!(ttrt_runtime_create(&mut rt), TTRT_OK);
        let compile = |engine: &mut *mut TtrtEngine| {
            ttrt_compile_onnx(rt, model.as_ptr().cast(), model.len(), null(), engine)
        };
        assert_eq!(compile(&mut engine), TTRT_ERROR_MODEL);
        assert!(last_error().contains("FusedScaleBias"), "{}", last_error());
        assert_eq!(
            ttrt_load_extension(rt, c"/nonexistent/libconverters.so".as_ptr(), 0),
            TTRT_ERROR_LIBRARY
        );
        assert!(
            last_error().contains("ttrt_load_extension")
                && last_error().contains("/nonexistent/libconverters.so"),
            "{}",
            last_error()
        );
        assert_eq!(ttrt_load_extension(null_mut(), c_lib.as_ptr(), 0), 1);
        assert_eq!(
            ttrt_load_extension(rt, c_lib.as_ptr(), 0),
            TTRT_OK,
            "{}",
            last_error()
        );
        assert_eq!(compile(&mut engine), TTRT_OK, "{}", last_error());
        assert_eq!(ttrt_context_create(engine, &mut ctx), TTRT_OK);
        let status = ttrt_context_execute(ctx, &input, 1, &mut output, 1, null_mut());
        assert_eq!(status, TTRT_OK, "{}", last_error());
        ttrt_context_destroy(ctx);
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
    assert_close(&y, &want, 1e-6, 1e-6);
}
