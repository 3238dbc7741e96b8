//! The C runtime API on device buffers: a CUDA engine (conv → Interpolate → GELU) runs
//! through `ttrt_context_enqueue` on caller-owned device memory and a caller stream, and
//! through `ttrt_context_execute` on device and on host buffers, matching the CPU engine. A
//! CPU engine refuses device buffers and `ttrt_context_enqueue` with
//! `TTRT_ERROR_UNSUPPORTED`. GPU parts skip without a device.

#![cfg(feature = "builtin-plugins")]

use std::ffi::{CStr, c_void};
use std::ptr::null_mut;
use std::sync::Arc;

use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::abi::{TTRT_ERROR_UNSUPPORTED, TTRT_MAX_DIMS, TTRT_OK, TtrtStatus};
use torchtrt_core::plugin_api::{DType, DeviceKind, FieldCollection, PluginKey};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, NetworkDefinition, Tensor, build, registry,
};
use torchtrt_cpu::CpuBackend;
use torchtrt_runtime::*;

fn random(n: usize, seed: u64) -> Vec<f32> {
    torchtrt_testing::values(n, seed)
}

fn network() -> NetworkDefinition {
    torchtrt_plugins::init(registry()).expect("plugins");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), 3.into(), 8.into(), 8.into()],
        )
        .expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[4, 3, 3, 3], random(108, 1)).expect("w"),
        )
        .expect("w");
    let c = net
        .add_layer("conv", Convolution::new(2), &[x, w])
        .expect("conv")[0];
    let up = FieldCollection::new()
        .with("mode", "nearest")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net
        .add_plugin(
            "up",
            registry(),
            &PluginKey::new("torch_tensorrt", "Interpolate", "1"),
            &up,
            &[c],
        )
        .expect("up")[0];
    let g = net
        .add_plugin(
            "gelu",
            registry(),
            &PluginKey::new("", "CustomGeluPluginDynamic", "1"),
            &FieldCollection::new(),
            &[u],
        )
        .expect("gelu")[0];
    net.mark_output(g, "y").expect("y");
    net
}

fn engine_on(backend: Arc<dyn Backend>, device: DeviceKind) -> Engine {
    let config = BuildConfig {
        device,
        ..BuildConfig::default()
    };
    build(&network(), &config, &[backend, Arc::new(CpuBackend::new())]).expect("builds")
}

fn ok(status: TtrtStatus) {
    assert_eq!(status, TTRT_OK, "{}", last_error());
}

fn last_error() -> String {
    // SAFETY: a NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(ttrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// A context of `engine` through the C API (runtime, engine and context leak: test only).
fn context(engine: &Engine) -> *mut TtrtContext {
    let bytes = engine.serialize();
    let (mut rt, mut e, mut ctx) = (null_mut(), null_mut(), null_mut());
    // SAFETY: valid out-pointers and bytes.
    unsafe {
        ok(ttrt_runtime_create(&mut rt));
        ok(ttrt_engine_deserialize(
            rt,
            bytes.as_ptr().cast(),
            bytes.len(),
            &mut e,
        ));
        ok(ttrt_context_create(e, &mut ctx));
    }
    ctx
}

fn tensor(
    name: &CStr,
    device: DeviceKind,
    shape: &[usize],
    data: *mut c_void,
    size: usize,
) -> TtrtTensor {
    let mut dims = [0i64; TTRT_MAX_DIMS];
    for (d, &s) in dims.iter_mut().zip(shape) {
        *d = s as i64;
    }
    TtrtTensor {
        name: name.as_ptr(),
        index: 0,
        dtype: DType::F32 as i32,
        device: device as i32,
        device_ordinal: 0,
        nb_dims: shape.len() as i32,
        reserved: 0,
        dims,
        data,
        size,
    }
}

#[test]
fn cpu_engines_refuse_device_buffers_and_enqueue() {
    let ctx = context(&engine_on(Arc::new(CpuBackend::new()), DeviceKind::Cpu));
    let x = random(2 * 3 * 64, 2);
    let input = tensor(
        c"x",
        DeviceKind::Cuda,
        &[2, 3, 8, 8],
        x.as_ptr() as *mut c_void,
        x.len() * 4,
    );
    let mut y = vec![0f32; 2 * 4 * 144];
    let mut output = tensor(
        c"y",
        DeviceKind::Cpu,
        &[],
        y.as_mut_ptr().cast(),
        y.len() * 4,
    );
    // SAFETY: valid tensors; the call is refused before any buffer is touched.
    let status = unsafe { ttrt_context_enqueue(ctx, &input, 1, &mut output, 1, null_mut()) };
    assert_eq!(status, TTRT_ERROR_UNSUPPORTED);
    assert!(
        last_error().contains("the engine runs on the CPU"),
        "{}",
        last_error()
    );
    // SAFETY: as above.
    let status = unsafe { ttrt_context_execute(ctx, &input, 1, &mut output, 1, null_mut()) };
    assert_eq!(status, TTRT_ERROR_UNSUPPORTED);
    assert!(last_error().contains("CUDA memory"), "{}", last_error());
}

#[test]
fn cuda_engine_enqueues_on_device_buffers_and_executes_on_host_buffers() {
    let backend = match torchtrt_cuda::backend(0) {
        Ok(b) => b,
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = backend.cuda_device().clone();
    let gpu = engine_on(backend.clone(), DeviceKind::Cuda);
    let cpu = engine_on(Arc::new(CpuBackend::new()), DeviceKind::Cpu);
    let ctx = context(&gpu);
    let x = Tensor::from_vec(&[3, 3, 8, 8], random(3 * 3 * 64, 3)).expect("x");
    let want = cpu.create_context().unwrap().execute(&[&x]).expect("cpu")[0].clone();
    let want = want.as_slice::<f32>().expect("f32").to_vec();
    let y_bytes = want.len() * 4;

    let stream = device.new_stream().expect("stream");
    let x_dev = device.allocator().alloc(x.bytes().len()).expect("alloc");
    stream.upload(x.bytes(), &x_dev).expect("upload");
    let y_dev = device.allocator().alloc(y_bytes).expect("alloc");
    let input = tensor(
        c"x",
        DeviceKind::Cuda,
        &[3, 3, 8, 8],
        x_dev.ptr() as *mut c_void,
        x.bytes().len(),
    );
    let compare = |got: &[u8], what: &str| {
        let got: Vec<f32> = got
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        torchtrt_testing::check_floats(&got, &want, torchtrt_testing::Tol::new(1e-4, 1e-4))
            .unwrap_or_else(|m| panic!("{what}: {m}"));
    };

    for (enqueue, what) in [(true, "enqueue"), (false, "execute on device buffers")] {
        stream
            .memset(&y_dev, torchtrt_testing::sentinel::FLOAT_BYTE, y_bytes)
            .expect("sentinel");
        let mut output = tensor(
            c"y",
            DeviceKind::Cuda,
            &[],
            y_dev.ptr() as *mut c_void,
            y_bytes,
        );
        // SAFETY: device buffers of the stated sizes on the context's device, a live stream.
        let status = unsafe {
            if enqueue {
                ttrt_context_enqueue(ctx, &input, 1, &mut output, 1, stream.raw())
            } else {
                ttrt_context_execute(ctx, &input, 1, &mut output, 1, stream.raw())
            }
        };
        ok(status);
        assert_eq!(&output.dims[..4], &[3, 4, 12, 12], "{what}");
        stream.synchronize().expect("sync");
        let mut got = vec![0u8; y_bytes];
        stream.download(&y_dev, &mut got).expect("download");
        compare(&got, what);
    }

    let mut short = tensor(
        c"y",
        DeviceKind::Cuda,
        &[],
        y_dev.ptr() as *mut c_void,
        y_bytes - 4,
    );
    // SAFETY: as above; refused before anything is queued.
    let status = unsafe { ttrt_context_enqueue(ctx, &input, 1, &mut short, 1, stream.raw()) };
    assert_ne!(status, TTRT_OK);
    assert!(last_error().contains("needs"), "{}", last_error());

    let host_in = tensor(
        c"x",
        DeviceKind::Cpu,
        &[3, 3, 8, 8],
        x.bytes().as_ptr() as *mut c_void,
        x.bytes().len(),
    );
    let mut host_y = torchtrt_testing::sentinel::filled(y_bytes, true);
    let mut host_out = tensor(
        c"y",
        DeviceKind::Cpu,
        &[],
        host_y.as_mut_ptr().cast(),
        y_bytes,
    );
    // SAFETY: host buffers of the stated sizes.
    ok(unsafe { ttrt_context_execute(ctx, &host_in, 1, &mut host_out, 1, null_mut()) });
    compare(&host_y, "execute on host buffers");
}
