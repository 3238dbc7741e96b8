//! The C API (`torchtrt.h` / `torchtrt_runtime.h`) called in-process: compile an ONNX
//! model, query and run the engine, and compare with the Rust API; then bad input of every
//! kind — NULL handles, truncated engines, wrong buffers, unknown names, missing libraries,
//! bad compile options — each a status and a message, never a crash.

mod capi_support;

use std::ffi::{CStr, CString, c_void};
use std::ptr::{null, null_mut};

use capi_support::onnx_model::{CHANNELS, SIZE, seed_plugin_model};
use capi_support::{assert_close, host_tensor, random_f32, scratch_dir};
use torchtrt::Tensor;
use torchtrt::capi::*;
use torchtrt::plugin_api::abi::{
    TTRT_ERROR_INVALID_ARGUMENT, TTRT_ERROR_UNSUPPORTED, TTRT_MAX_DIMS, TTRT_OK,
};
use torchtrt::plugin_api::{DType, DeviceKind};

const TTRT_DTYPE_F32: i32 = DType::F32 as i32;
const TTRT_DTYPE_F16: i32 = DType::F16 as i32;
const TTRT_DTYPE_I64: i32 = DType::I64 as i32;
const TTRT_DEVICE_CUDA: i32 = DeviceKind::Cuda as i32;

fn last_error() -> String {
    // SAFETY: ttrt_last_error returns a NUL-terminated string valid until the next failure.
    unsafe { CStr::from_ptr(ttrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn ok(status: TtrtStatus) {
    assert_eq!(status, TTRT_OK, "{}", last_error());
}

/// Asserts a failure with `status` whose message contains every one of `parts`.
fn fails(got: TtrtStatus, status: TtrtStatus, parts: &[&str]) {
    let message = last_error();
    assert_eq!(got, status, "status; message: {message}");
    for p in parts {
        assert!(message.contains(p), "`{p}` missing from: {message}");
    }
}

fn runtime() -> *mut TtrtRuntime {
    let mut rt = null_mut();
    // SAFETY: a valid out-pointer.
    ok(unsafe { ttrt_runtime_create(&mut rt) });
    rt
}

fn options_with_batch(
    spec: &mut TtrtInputSpec,
    min: i64,
    opt: i64,
    max: i64,
) -> TtrtCompileOptions {
    let mut options = TtrtCompileOptions::default();
    // SAFETY: a valid out-pointer.
    ok(unsafe { ttrt_compile_options_init(&mut options) });
    let rest = [CHANNELS as i64, SIZE as i64, SIZE as i64];
    spec.nb_dims = 4;
    for (i, (lo, mid, hi)) in [(min, opt, max)]
        .into_iter()
        .chain(rest.map(|d| (d, d, d)))
        .enumerate()
    {
        spec.min[i] = lo;
        spec.opt[i] = mid;
        spec.max[i] = hi;
    }
    options.inputs = spec;
    options.nb_inputs = 1;
    options
}

fn input_spec(name: &CStr) -> TtrtInputSpec {
    TtrtInputSpec {
        name: name.as_ptr(),
        nb_dims: 0,
        reserved: 0,
        min: [0; TTRT_MAX_DIMS],
        opt: [0; TTRT_MAX_DIMS],
        max: [0; TTRT_MAX_DIMS],
    }
}

/// The seed-plugin model compiled through `ttrt_compile_onnx` with batch in [1, 4].
fn compiled(rt: *mut TtrtRuntime) -> *mut TtrtEngine {
    let bytes = seed_plugin_model();
    let name = c"image";
    let mut spec = input_spec(name);
    let options = options_with_batch(&mut spec, 1, 2, 4);
    let mut engine = null_mut();
    // SAFETY: valid buffers and pointers.
    ok(unsafe {
        ttrt_compile_onnx(
            rt,
            bytes.as_ptr().cast(),
            bytes.len(),
            &options,
            &mut engine,
        )
    });
    engine
}

fn serialized(engine: *const TtrtEngine) -> Vec<u8> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: valid out-pointers; the buffer is freed below with its size.
    unsafe {
        ok(ttrt_engine_serialize(engine, &mut data, &mut size));
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec();
        ttrt_bytes_free(data, size);
        bytes
    }
}

fn run_c(engine: *const TtrtEngine, batch: usize, x: &mut [f32], by_index: bool) -> Vec<f32> {
    let side = 2 * SIZE;
    let mut y = vec![f32::NAN; batch * CHANNELS * side * side];
    let dims = [batch as i64, CHANNELS as i64, SIZE as i64, SIZE as i64];
    let (iname, oname) = if by_index {
        (None, None)
    } else {
        (Some(c"image"), Some(c"y"))
    };
    let inputs = [host_tensor(iname, 0, &dims, x)];
    let mut outputs = [host_tensor(oname, 0, &[], &mut y)];
    let mut ctx = null_mut();
    // SAFETY: valid handles, buffers sized as declared.
    unsafe {
        ok(ttrt_context_create(engine, &mut ctx));
        ok(ttrt_context_execute(
            ctx,
            inputs.as_ptr(),
            1,
            outputs.as_mut_ptr(),
            1,
            null_mut(),
        ));
        ttrt_context_destroy(ctx);
    }
    let out = &outputs[0];
    assert_eq!(
        &out.dims[..out.nb_dims as usize],
        &[batch as i64, CHANNELS as i64, side as i64, side as i64]
    );
    y
}

#[test]
fn library_identity() {
    // SAFETY: static strings.
    let version = unsafe { CStr::from_ptr(ttrt_version()) }.to_str().unwrap();
    assert!(version.starts_with("torchtrt-runtime "), "{version}");
    assert_eq!(ttrt_runtime_api_version(), TTRT_RUNTIME_API_VERSION);
    assert_eq!(ttrt_has_builtin_plugins(), 1);
}

#[test]
fn compiled_engine_describes_its_io_and_runs_like_the_rust_api() {
    let rt = runtime();
    let engine = compiled(rt);
    let (mut n_in, mut n_out) = (0, 0);
    let (mut in_name, mut out_name) = (null(), null());
    let mut desc = TtrtTensorDesc {
        dtype: -1,
        format: -1,
        nb_dims: -1,
        reserved: 0,
        dims: [0; TTRT_MAX_DIMS],
    };
    let (mut min, mut opt, mut max) = (desc, desc, desc);
    let mut index = -1;
    // SAFETY: valid handles and out-pointers.
    unsafe {
        ok(ttrt_engine_num_inputs(engine, &mut n_in));
        ok(ttrt_engine_num_outputs(engine, &mut n_out));
        assert_eq!((n_in, n_out), (1, 1));
        ok(ttrt_engine_input_name(engine, 0, &mut in_name));
        ok(ttrt_engine_output_name(engine, 0, &mut out_name));
        assert_eq!(CStr::from_ptr(in_name), c"image");
        assert_eq!(CStr::from_ptr(out_name), c"y");
        ok(ttrt_engine_output_index(engine, c"y".as_ptr(), &mut index));
        assert_eq!(index, 0);
        ok(ttrt_engine_input_desc(engine, 0, &mut desc));
        assert_eq!((desc.dtype, desc.nb_dims), (TTRT_DTYPE_F32, 4));
        assert_eq!(&desc.dims[..4], &[-1, 3, 5, 5]);
        ok(ttrt_engine_output_desc(engine, 0, &mut desc));
        assert_eq!(&desc.dims[..4], &[-1, 3, 10, 10]);
        ok(ttrt_engine_input_profile(
            engine, 0, &mut min, &mut opt, &mut max,
        ));
        assert_eq!(&min.dims[..4], &[1, 3, 5, 5]);
        assert_eq!(&opt.dims[..4], &[2, 3, 5, 5]);
        assert_eq!(&max.dims[..4], &[4, 3, 5, 5]);
        ok(ttrt_engine_input_profile(
            engine,
            0,
            null_mut(),
            null_mut(),
            &mut max,
        ));
    }

    let mut ctx = null_mut();
    // SAFETY: valid handles and out-pointers.
    unsafe {
        ok(ttrt_context_create(engine, &mut ctx));
        ok(ttrt_context_output_desc(ctx, c"y".as_ptr(), &mut desc));
        assert_eq!(&desc.dims[..4], &[-1, 3, 10, 10], "batch not set yet");
        ok(ttrt_context_set_input_shape(
            ctx,
            c"image".as_ptr(),
            [3, 3, 5, 5].as_ptr(),
            4,
        ));
        ok(ttrt_context_output_desc(ctx, c"y".as_ptr(), &mut desc));
        assert_eq!(&desc.dims[..4], &[3, 3, 10, 10]);
        ttrt_context_destroy(ctx);
    }

    let batch = 3;
    let x = random_f32(batch * CHANNELS * SIZE * SIZE, 11);
    let by_name = run_c(engine, batch, &mut x.clone(), false);
    let by_index = run_c(engine, batch, &mut x.clone(), true);
    assert_eq!(by_name, by_index);

    let rust = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&serialized(engine))
        .unwrap();
    let input = Tensor::from_vec(&[batch, CHANNELS, SIZE, SIZE], x).unwrap();
    let want = rust
        .create_context()
        .unwrap()
        .execute_named(&[("image", &input)])
        .unwrap();
    assert_eq!(want[0].0, "y");
    assert_close(&by_name, want[0].1.as_slice::<f32>().unwrap(), 1e-6, 1e-6);
    assert!(by_name.iter().all(|v| v.is_finite()));
    // SAFETY: handles from this test, destroyed once.
    unsafe {
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn engines_round_trip_through_memory_and_files_and_outlive_nothing() {
    let rt = runtime();
    let engine = compiled(rt);
    let bytes = serialized(engine);
    let path = scratch_dir("roundtrip").join("seed.engine");
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let (mut from_memory, mut from_file, mut ctx) = (null_mut(), null_mut(), null_mut());
    // SAFETY: valid handles, buffers and paths.
    unsafe {
        ok(ttrt_engine_save(engine, c_path.as_ptr()));
        ok(ttrt_engine_deserialize(
            rt,
            bytes.as_ptr().cast(),
            bytes.len(),
            &mut from_memory,
        ));
        ok(ttrt_engine_deserialize_file(
            rt,
            c_path.as_ptr(),
            &mut from_file,
        ));
        ok(ttrt_context_create(from_file, &mut ctx));
        ttrt_engine_destroy(from_file);
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let x = random_f32(CHANNELS * SIZE * SIZE, 5);
    let want = run_c(engine, 1, &mut x.clone(), false);
    assert_eq!(run_c(from_memory, 1, &mut x.clone(), false), want);
    let mut y = vec![0f32; want.len()];
    let mut xs = x;
    let inputs = [host_tensor(Some(c"image"), 0, &[1, 3, 5, 5], &mut xs)];
    let mut outputs = [host_tensor(Some(c"y"), 0, &[], &mut y)];
    // SAFETY: the context keeps its destroyed engine's data alive.
    unsafe {
        ok(ttrt_context_execute(
            ctx,
            inputs.as_ptr(),
            1,
            outputs.as_mut_ptr(),
            1,
            null_mut(),
        ));
        ttrt_context_destroy(ctx);
        ttrt_engine_destroy(from_memory);
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
    assert_eq!(y, want);
}

#[test]
fn null_handles_and_pointers_are_refused() {
    let rt = runtime();
    let engine = compiled(rt);
    let (mut e, mut ctx, mut n) = (null_mut(), null_mut(), 0);
    let mut desc = TtrtTensorDesc {
        dtype: 0,
        format: 0,
        nb_dims: 0,
        reserved: 0,
        dims: [0; TTRT_MAX_DIMS],
    };
    let bad = TTRT_ERROR_INVALID_ARGUMENT;
    // SAFETY: every call gets NULL where the API must refuse it; the rest is valid.
    unsafe {
        fails(
            ttrt_runtime_create(null_mut()),
            bad,
            &["ttrt_runtime_create", "`out` is NULL"],
        );
        fails(
            ttrt_runtime_load_library(null_mut(), c"x.so".as_ptr()),
            bad,
            &["ttrt_runtime_load_library", "`runtime` is NULL"],
        );
        fails(
            ttrt_runtime_load_library(rt, null()),
            bad,
            &["`path` is NULL"],
        );
        fails(
            ttrt_runtime_has_plugin(rt, null(), c"a".as_ptr(), c"1".as_ptr(), &mut n),
            bad,
            &["`plugin_namespace` is NULL"],
        );
        fails(
            ttrt_engine_deserialize(null_mut(), [0u8].as_ptr().cast(), 1, &mut e),
            bad,
            &["ttrt_engine_deserialize", "`runtime` is NULL"],
        );
        fails(
            ttrt_engine_deserialize(rt, null(), 10, &mut e),
            bad,
            &["`data` is NULL"],
        );
        fails(
            ttrt_engine_deserialize(rt, [0u8].as_ptr().cast(), 1, null_mut()),
            bad,
            &["`out` is NULL"],
        );
        fails(
            ttrt_engine_deserialize_file(rt, null(), &mut e),
            bad,
            &["`path` is NULL"],
        );
        fails(
            ttrt_engine_num_inputs(null(), &mut n),
            bad,
            &["`engine` is NULL"],
        );
        fails(
            ttrt_engine_num_outputs(engine, null_mut()),
            bad,
            &["`count` is NULL"],
        );
        fails(
            ttrt_engine_input_name(engine, 0, null_mut()),
            bad,
            &["`name` is NULL"],
        );
        fails(
            ttrt_engine_output_desc(null(), 0, &mut desc),
            bad,
            &["`engine` is NULL"],
        );
        fails(
            ttrt_engine_input_index(engine, null(), &mut n),
            bad,
            &["`name` is NULL"],
        );
        fails(ttrt_engine_save(engine, null()), bad, &["`path` is NULL"]);
        fails(
            ttrt_context_create(null(), &mut ctx),
            bad,
            &["`engine` is NULL"],
        );
        fails(
            ttrt_context_execute(null_mut(), null(), 0, null_mut(), 0, null_mut()),
            bad,
            &["ttrt_context_execute", "`context` is NULL"],
        );
        fails(
            ttrt_context_set_input_shape(null_mut(), c"image".as_ptr(), null(), 0),
            bad,
            &["`context` is NULL"],
        );
        ok(ttrt_context_create(engine, &mut ctx));
        fails(
            ttrt_context_execute(ctx, null(), 1, null_mut(), 0, null_mut()),
            bad,
            &["`inputs` is NULL but `nb_inputs` is 1"],
        );
        fails(
            ttrt_context_set_input_shape(ctx, c"image".as_ptr(), null(), 4),
            bad,
            &["`dims` is NULL"],
        );
        fails(
            ttrt_context_output_desc(ctx, c"y".as_ptr(), null_mut()),
            bad,
            &["`desc`"],
        );
        ttrt_runtime_destroy(null_mut());
        ttrt_engine_destroy(null_mut());
        ttrt_context_destroy(null_mut());
        ttrt_bytes_free(null_mut(), 3);
        ttrt_context_destroy(ctx);
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn truncated_and_corrupted_engines_are_refused() {
    let rt = runtime();
    let engine = compiled(rt);
    let bytes = serialized(engine);
    let mut e = null_mut();
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    // SAFETY: valid buffers of the given sizes.
    unsafe {
        for cut in [0, 3, 16, bytes.len() / 2, bytes.len() - 1] {
            fails(
                ttrt_engine_deserialize(rt, bytes.as_ptr().cast(), cut, &mut e),
                TTRT_ERROR_INVALID_ENGINE,
                &["ttrt_engine_deserialize", "invalid engine"],
            );
            assert!(e.is_null(), "no engine is handed out on failure");
        }
        fails(
            ttrt_engine_deserialize(rt, flipped.as_ptr().cast(), flipped.len(), &mut e),
            TTRT_ERROR_INVALID_ENGINE,
            &["invalid engine"],
        );
        let text = b"this is not an engine at all, just some bytes";
        fails(
            ttrt_engine_deserialize(rt, text.as_ptr().cast(), text.len(), &mut e),
            TTRT_ERROR_INVALID_ENGINE,
            &["invalid engine"],
        );
        let missing = c"/nonexistent/dir/model.engine";
        fails(
            ttrt_engine_deserialize_file(rt, missing.as_ptr(), &mut e),
            TTRT_ERROR_IO,
            &["/nonexistent/dir/model.engine"],
        );
        let cut_path = scratch_dir("truncated").join("cut.engine");
        std::fs::write(&cut_path, &bytes[..bytes.len() - 7]).unwrap();
        let c_cut = CString::new(cut_path.to_str().unwrap()).unwrap();
        fails(
            ttrt_engine_deserialize_file(rt, c_cut.as_ptr(), &mut e),
            TTRT_ERROR_INVALID_ENGINE,
            &["cut.engine", "invalid engine"],
        );
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn wrong_buffers_names_shapes_and_devices_are_refused() {
    let rt = runtime();
    let engine = compiled(rt);
    let mut ctx = null_mut();
    // SAFETY: valid handles.
    ok(unsafe { ttrt_context_create(engine, &mut ctx) });
    let n = CHANNELS * SIZE * SIZE;
    let mut x = random_f32(2 * n, 3);
    let mut y = vec![0f32; 2 * n * 4];
    let dims = [2, 3, 5, 5];
    let exec = |inputs: &[TtrtTensor], outputs: &mut [TtrtTensor]| {
        // SAFETY: `ctx` is live; the tensors' buffers are as large as their sizes say.
        unsafe {
            ttrt_context_execute(
                ctx,
                inputs.as_ptr(),
                inputs.len() as i32,
                outputs.as_mut_ptr(),
                outputs.len() as i32,
                null_mut(),
            )
        }
    };
    let bad = TTRT_ERROR_INVALID_ARGUMENT;
    let good_in = host_tensor(Some(c"image"), 0, &dims, &mut x);
    let good_out = host_tensor(Some(c"y"), 0, &[], &mut y);

    let mut short = good_in;
    short.size -= 4;
    fails(
        exec(&[short], &mut [good_out]),
        bad,
        &["input `image`", "bytes", "needs 600"],
    );
    let mut wrong_dtype = good_in;
    wrong_dtype.dtype = TTRT_DTYPE_F16;
    fails(
        exec(&[wrong_dtype], &mut [good_out]),
        bad,
        &["input `image` is f16", "f32"],
    );
    wrong_dtype.dtype = 99;
    fails(exec(&[wrong_dtype], &mut [good_out]), bad, &["dtype 99"]);
    let mut unknown = good_in;
    unknown.name = c"imagee".as_ptr();
    fails(
        exec(&[unknown], &mut [good_out]),
        bad,
        &["inputs[0]", "no input `imagee`", "inputs: image"],
    );
    let mut out_of_range = good_in;
    out_of_range.name = null();
    out_of_range.index = 1;
    fails(
        exec(&[out_of_range], &mut [good_out]),
        bad,
        &["index 1 is out of range"],
    );
    fails(
        exec(&[], &mut [good_out]),
        bad,
        &["input `image` is not given"],
    );
    fails(
        exec(&[good_in, good_in], &mut [good_out]),
        bad,
        &["given twice"],
    );
    let mut too_big = good_in;
    too_big.dims[0] = 5;
    fails(
        exec(&[too_big], &mut [good_out]),
        bad,
        &["dimension 0 is 5", "[1, 4]"],
    );
    let mut rank = good_in;
    rank.nb_dims = 9;
    fails(exec(&[rank], &mut [good_out]), bad, &["nb_dims 9"]);
    let mut cuda = good_in;
    cuda.device = TTRT_DEVICE_CUDA;
    fails(
        exec(&[cuda], &mut [good_out]),
        TTRT_ERROR_UNSUPPORTED,
        &["CUDA memory"],
    );
    let mut out_dtype = good_out;
    out_dtype.dtype = TTRT_DTYPE_I64;
    fails(
        exec(&[good_in], &mut [out_dtype]),
        bad,
        &["output `y` is i64"],
    );
    let mut unknown_out = good_out;
    unknown_out.name = c"z".as_ptr();
    fails(
        exec(&[good_in], &mut [unknown_out]),
        bad,
        &["outputs[0]", "no output `z`"],
    );
    // SAFETY: as above, with a non-NULL stream the CPU runtime refuses.
    let with_stream = unsafe {
        ttrt_context_execute(
            ctx,
            &good_in,
            1,
            &mut { good_out },
            1,
            8usize as *mut c_void,
        )
    };
    fails(with_stream, TTRT_ERROR_UNSUPPORTED, &["stream"]);

    let mut small = good_out;
    small.size = 16;
    let mut outs = [small];
    fails(
        exec(&[good_in], &mut outs),
        TTRT_ERROR_BUFFER_TOO_SMALL,
        &["output `y`", "needs 2400 bytes", "has 16"],
    );
    assert_eq!(&outs[0].dims[..outs[0].nb_dims as usize], &[2, 3, 10, 10]);
    let mut discard: [TtrtTensor; 0] = [];
    ok(exec(&[good_in], &mut discard));
    ok(exec(&[good_in], &mut [good_out]));

    // SAFETY: valid handles; shapes refused by the engine's range.
    unsafe {
        fails(
            ttrt_context_set_input_shape(ctx, c"image".as_ptr(), [1, 3, 5].as_ptr(), 3),
            bad,
            &["input `image` has rank 4"],
        );
        fails(
            ttrt_context_set_input_shape(ctx, c"x".as_ptr(), dims.as_ptr(), 4),
            bad,
            &["no input `x`"],
        );
        let mut desc = TtrtTensorDesc {
            dtype: 0,
            format: 0,
            nb_dims: 0,
            reserved: 0,
            dims: [0; TTRT_MAX_DIMS],
        };
        fails(
            ttrt_context_output_desc(ctx, c"image".as_ptr(), &mut desc),
            bad,
            &["no output"],
        );
        fails(
            ttrt_engine_input_desc(engine, 1, &mut desc),
            bad,
            &["input index 1"],
        );
        fails(
            ttrt_engine_output_desc(engine, -1, &mut desc),
            bad,
            &["output index -1"],
        );
        ttrt_context_destroy(ctx);
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn missing_and_foreign_libraries_are_refused() {
    let rt = runtime();
    let not_a_library = scratch_dir("libs").join("model.onnx");
    std::fs::write(&not_a_library, seed_plugin_model()).unwrap();
    let c_not = CString::new(not_a_library.to_str().unwrap()).unwrap();
    let mut found = -1;
    // SAFETY: valid handles and strings.
    unsafe {
        fails(
            ttrt_runtime_load_library(rt, c"/nonexistent/libnothing.so".as_ptr()),
            TTRT_ERROR_LIBRARY,
            &[
                "ttrt_runtime_load_library",
                "/nonexistent/libnothing.so",
                "does not exist",
            ],
        );
        fails(
            ttrt_runtime_load_library(rt, c_not.as_ptr()),
            TTRT_ERROR_LIBRARY,
            &["model.onnx"],
        );
        ok(ttrt_runtime_has_plugin(
            rt,
            c"torch_tensorrt".as_ptr(),
            c"Interpolate".as_ptr(),
            c"1".as_ptr(),
            &mut found,
        ));
        assert_eq!(found, 1);
        ok(ttrt_runtime_has_plugin(
            rt,
            c"".as_ptr(),
            c"NoSuchPlugin".as_ptr(),
            c"1".as_ptr(),
            &mut found,
        ));
        assert_eq!(found, 0);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn bad_models_and_compile_options_are_refused() {
    let rt = runtime();
    let bytes = seed_plugin_model();
    let mut e = null_mut();
    let compile = |data: &[u8], options: *const TtrtCompileOptions, e: &mut *mut TtrtEngine| {
        // SAFETY: valid buffers; `options` NULL or valid.
        unsafe { ttrt_compile_onnx(rt, data.as_ptr().cast(), data.len(), options, e) }
    };
    fails(
        compile(b"\x08\x07garbage", null(), &mut e),
        TTRT_ERROR_MODEL,
        &["ttrt_compile_onnx", "<memory>", "not an ONNX model"],
    );
    fails(
        compile(&bytes[..bytes.len() / 3], null(), &mut e),
        TTRT_ERROR_MODEL,
        &["not an ONNX model"],
    );
    let options = TtrtCompileOptions {
        precision: TTRT_DTYPE_I64,
        ..TtrtCompileOptions::default()
    };
    fails(
        compile(&bytes, &options, &mut e),
        TTRT_ERROR_INVALID_ARGUMENT,
        &["options.precision"],
    );
    let options = TtrtCompileOptions {
        device: TTRT_DEVICE_CUDA,
        ..TtrtCompileOptions::default()
    };
    if torchtrt::cuda::probe::available() {
        ok(compile(&bytes, &options, &mut e));
        // SAFETY: the engine just compiled, destroyed once.
        unsafe { ttrt_engine_destroy(e) };
        e = null_mut();
    } else {
        fails(
            compile(&bytes, &options, &mut e),
            TTRT_ERROR_UNSUPPORTED,
            &["options.device is TTRT_DEVICE_CUDA", "no CUDA device"],
        );
    }
    let mut spec = input_spec(c"image");
    let options = options_with_batch(&mut spec, 4, 2, 8);
    fails(
        compile(&bytes, &options, &mut e),
        TTRT_ERROR_INVALID_ARGUMENT,
        &["input `image`", "min <= opt <= max", "4, 2, 8"],
    );
    let mut spec = input_spec(c"image");
    let mut options = options_with_batch(&mut spec, 1, 1, 2);
    options.nb_inputs = -1;
    fails(
        compile(&bytes, &options, &mut e),
        TTRT_ERROR_INVALID_ARGUMENT,
        &["nb_inputs"],
    );
    assert!(e.is_null());
    // SAFETY: valid handles and strings.
    unsafe {
        fails(
            ttrt_compile_onnx_file(rt, c"/nonexistent/model.onnx".as_ptr(), null(), &mut e),
            TTRT_ERROR_IO,
            &["ttrt_compile_onnx_file", "/nonexistent/model.onnx"],
        );
        let path = scratch_dir("compile").join("model.onnx");
        std::fs::write(&path, &bytes).unwrap();
        let c_path = CString::new(path.to_str().unwrap()).unwrap();
        ok(ttrt_compile_onnx_file(rt, c_path.as_ptr(), null(), &mut e));
        let mut desc = TtrtTensorDesc {
            dtype: 0,
            format: 0,
            nb_dims: 0,
            reserved: 0,
            dims: [0; TTRT_MAX_DIMS],
        };
        ok(ttrt_engine_input_desc(e, 0, &mut desc));
        assert_eq!(
            &desc.dims[..4],
            &[-1, 3, 5, 5],
            "the model's own dynamic batch"
        );
        ttrt_engine_destroy(e);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn the_last_error_belongs_to_the_calling_thread() {
    let mut n = 0;
    // SAFETY: NULL engine, refused.
    let status = unsafe { ttrt_engine_num_inputs(null(), &mut n) };
    fails(status, TTRT_ERROR_INVALID_ARGUMENT, &["`engine` is NULL"]);
    let other = std::thread::spawn(last_error).join().unwrap();
    assert_eq!(other, "");
    let rt = runtime();
    assert!(
        last_error().contains("`engine` is NULL"),
        "success keeps it"
    );
    // SAFETY: a handle from this test.
    unsafe { ttrt_runtime_destroy(rt) };
}

#[test]
fn one_engine_runs_on_many_threads_each_with_its_own_context() {
    let rt = runtime();
    let engine = compiled(rt);
    let rust = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&serialized(engine))
        .unwrap();
    let shared = engine as usize;
    std::thread::scope(|s| {
        for batch in 1..=4usize {
            let rust = rust.clone();
            s.spawn(move || {
                let x = random_f32(batch * CHANNELS * SIZE * SIZE, 40 + batch as u64);
                let engine = shared as *const TtrtEngine;
                for _ in 0..3 {
                    let got = run_c(engine, batch, &mut x.clone(), batch % 2 == 0);
                    let input = Tensor::from_vec(&[batch, CHANNELS, SIZE, SIZE], x.clone());
                    let want = rust
                        .create_context()
                        .unwrap()
                        .execute(&[&input.unwrap()])
                        .unwrap();
                    assert_close(&got, want[0].as_slice::<f32>().unwrap(), 1e-6, 1e-6);
                }
            });
        }
    });
    // SAFETY: handles from this test, destroyed once after every thread ended.
    unsafe {
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn reduced_precision_compiles_and_stays_close_to_f32() {
    let rt = runtime();
    let bytes = seed_plugin_model();
    let f32_engine = compiled(rt);
    let x = random_f32(2 * CHANNELS * SIZE * SIZE, 77);
    let want = run_c(f32_engine, 2, &mut x.clone(), false);
    for precision in [DType::F16, DType::BF16] {
        let mut spec = input_spec(c"image");
        let mut options = options_with_batch(&mut spec, 1, 2, 4);
        options.precision = precision as i32;
        let mut engine = null_mut();
        // SAFETY: valid buffers and pointers.
        ok(unsafe {
            ttrt_compile_onnx(
                rt,
                bytes.as_ptr().cast(),
                bytes.len(),
                &options,
                &mut engine,
            )
        });
        let got = run_c(engine, 2, &mut x.clone(), false);
        let tol = if precision == DType::F16 { 2e-2 } else { 8e-2 };
        assert_close(&got, &want, tol, tol);
        assert_ne!(got, want, "{precision} computes in reduced precision");
        // SAFETY: a handle from this test.
        unsafe { ttrt_engine_destroy(engine) };
    }
    // SAFETY: handles from this test, destroyed once.
    unsafe {
        ttrt_engine_destroy(f32_engine);
        ttrt_runtime_destroy(rt);
    }
}
