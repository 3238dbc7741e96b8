//! Every built-in plugin's CUDA kernel against its CPU kernel on random data, in f32, f16
//! and bf16, through `Plugin::enqueue` with a CUDA launch on a non-default stream. On a
//! machine without a CUDA device each test prints "skipped: no CUDA device" and passes.

#[path = "common/harness.rs"]
mod harness;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, result, sys};
use harness::{DTYPES, check_close, decode, encode, values};
use torchtrt_cuda::{CudaDevice, PluginPrograms, Stream};
use torchtrt_plugin_api::{
    CudaLaunch, DType, DeviceKind, DeviceTensor, FieldCollection, Launch, Plugin, PluginCreator,
    PluginResult, PortDesc, TensorDesc, const_shape, create_plugin, shape_values,
};
use torchtrt_plugins::gelu::GeluCreator;
use torchtrt_plugins::instance_norm::InstanceNormCreator;
use torchtrt_plugins::interpolate::InterpolateCreator;
use torchtrt_plugins::normalize::NormalizeCreator;

struct Gpu {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    device: CudaDevice,
    programs: Arc<PluginPrograms>,
}

impl Gpu {
    /// Enqueues `plugin` on the test's stream with the host's CUDA runtime for plugins.
    fn enqueue(
        &self,
        plugin: &dyn Plugin,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
    ) -> PluginResult<()> {
        // SAFETY: the test's live stream on cuda:0's primary context, outliving the wrapper.
        let stream = unsafe { Stream::from_raw(&self.device, self.stream.cu_stream().cast()) };
        let launcher = self.programs.launcher();
        let runtime = launcher.on(&stream);
        plugin.enqueue(Launch::Cuda(CudaLaunch {
            inputs,
            outputs,
            workspace: 0,
            device: 0,
            stream: stream.raw(),
            runtime: &runtime,
            shape_values: &[],
        }))
    }
}

fn gpu() -> Option<Gpu> {
    // SAFETY: only tries to dlopen the driver.
    let present = unsafe { sys::is_culib_present() };
    let count = present
        .then(|| {
            result::init()
                .and_then(|()| result::device::get_count())
                .ok()
        })
        .flatten()
        .unwrap_or(0);
    if count == 0 {
        println!("skipped: no CUDA device");
        return None;
    }
    let ctx = CudaContext::new(0).expect("cuda:0 opens");
    let stream = ctx.new_stream().expect("stream");
    let device = CudaDevice::open(0).expect("cuda:0 opens");
    let programs = Arc::new(PluginPrograms::new(&device));
    Some(Gpu {
        _ctx: ctx,
        stream,
        device,
        programs,
    })
}

struct DevBuf(u64);

impl DevBuf {
    fn upload(bytes: &[u8]) -> DevBuf {
        // SAFETY: a fresh allocation of the right size, filled synchronously. A copy from
        // pageable memory may return before its last chunk lands; the context synchronisation
        // orders it before kernels on non-blocking streams.
        unsafe {
            let p = result::malloc_sync(bytes.len().max(16)).expect("alloc");
            result::memcpy_htod_sync(p, bytes).expect("upload");
            result::ctx::synchronize().expect("upload lands");
            DevBuf(p)
        }
    }

    fn download(&self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        // SAFETY: the buffer holds at least `len` bytes.
        unsafe { result::memcpy_dtoh_sync(&mut out, self.0) }.expect("download");
        out
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by `upload`, freed once.
        unsafe { result::free_sync(self.0) }.expect("free");
    }
}

/// Runs `fields` on `shape` through the CPU and the CUDA kernel for every dtype and
/// compares; `lo..hi` is the input range.
fn compare(
    gpu: &Gpu,
    creator: &dyn PluginCreator,
    fields: &FieldCollection,
    shape: &[i64],
    (lo, hi): (f32, f32),
    seed: u64,
) {
    let n: i64 = shape.iter().product();
    compare_on(
        gpu,
        creator,
        fields,
        shape,
        &values(n as usize, seed, lo, hi),
    );
}

/// [`compare`] on the given input values.
fn compare_on(
    gpu: &Gpu,
    creator: &dyn PluginCreator,
    fields: &FieldCollection,
    shape: &[i64],
    input: &[f32],
) {
    for dtype in DTYPES {
        let mut plugin = create_plugin(creator, "gpu_layer", fields).expect("creates");
        let io = [PortDesc::linear(dtype), PortDesc::linear(dtype)];
        assert!(plugin.supports(0, &io, 1, DeviceKind::Cuda));
        let out = plugin.output_shapes(&[const_shape(shape)]).expect("shapes");
        let out_shape = shape_values(&out[0]).expect("constant");
        let in_desc = TensorDesc::new(dtype, shape.to_vec());
        let out_desc = TensorDesc::new(dtype, out_shape.clone());
        plugin
            .configure(
                std::slice::from_ref(&in_desc),
                std::slice::from_ref(&out_desc),
            )
            .expect("configures");
        let x = encode(input, dtype);
        let want = harness::enqueue(plugin.as_ref(), &in_desc, &x, &out_desc, 2).expect("cpu");
        let got = run_cuda(gpu, plugin.as_ref(), &in_desc, &x, &out_desc);
        let want = decode(&want, dtype);
        let scale = want.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
        if let Err(e) = check_close(&decode(&got, dtype), &want, dtype, scale) {
            panic!("{fields:?} on {shape:?}: {e}");
        }
    }
}

fn run_cuda(
    gpu: &Gpu,
    plugin: &dyn Plugin,
    in_desc: &TensorDesc,
    x: &[u8],
    out_desc: &TensorDesc,
) -> Vec<u8> {
    let out_len = out_desc.byte_len().expect("concrete");
    let dx = DevBuf::upload(x);
    let dy = DevBuf::upload(&torchtrt_testing::sentinel::filled(out_len, true));
    gpu.enqueue(
        plugin,
        &[DeviceTensor {
            desc: in_desc.clone(),
            ptr: dx.0,
        }],
        &[DeviceTensor {
            desc: out_desc.clone(),
            ptr: dy.0,
        }],
    )
    .expect("cuda enqueue");
    gpu.stream.synchronize().expect("sync");
    dy.download(out_len)
}

#[test]
fn gelu_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    for (tanh, bias, shape) in [
        (false, None, vec![1000i64, 37]),
        (true, None, vec![3, 5, 129]),
        (false, Some(vec![0.5f32, -1.0, 0.25]), vec![17, 3]),
        (true, Some(values(64, 9, -1.0, 1.0)), vec![8, 64]),
    ] {
        let mut f = FieldCollection::new().with("approximate", if tanh { "tanh" } else { "none" });
        if let Some(b) = bias {
            f = f.with("bias", b);
        }
        compare(&gpu, &GeluCreator, &f, &shape, (-6.0, 6.0), 1);
    }
}

#[test]
fn instance_norm_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    for (relu, shape) in [
        (false, vec![2i64, 3, 17, 19]),
        (true, vec![1, 3, 64]),
        (true, vec![2, 3, 4, 8, 8]),
        (false, vec![1, 3, 128, 128]),
    ] {
        let f = FieldCollection::new()
            .with("epsilon", 1e-5f32)
            .with("scales", values(3, 4, 0.5, 2.0))
            .with("bias", values(3, 5, -1.0, 1.0))
            .with("relu", i32::from(relu))
            .with("alpha", 0.2f32);
        compare(&gpu, &InstanceNormCreator, &f, &shape, (-3.0, 5.0), 2);
    }
}

#[test]
fn normalize_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    type Case = (f32, Vec<i32>, &'static str, i32, Vec<i64>);
    let cases: [Case; 9] = [
        (2.0, vec![1], "norm", 1, vec![2, 33, 5, 20]),
        (3.0, vec![0], "normalize", 0, vec![7, 50]),
        (2.0, vec![1], "normalize", 0, vec![2, 64, 8, 8]),
        (2.0, vec![1], "norm", 0, vec![3, 5, 7]),
        (1.0, vec![-1], "norm", 1, vec![4, 100]),
        (f32::INFINITY, vec![0, 2], "norm", 0, vec![3, 4, 5]),
        (3.0, vec![2, 3], "normalize", 0, vec![2, 3, 4, 40]),
        (2.0, vec![0, 2], "normalize", 0, vec![3, 4, 5, 6]),
        (2.0, vec![1], "normalize", 0, vec![2, 100, 9]),
    ];
    for (order, axes, mode, keep, shape) in cases {
        let f = FieldCollection::new()
            .with("order", order)
            .with("axes", axes)
            .with("mode", mode)
            .with("keep_dims", keep)
            .with("eps", 1e-12f32);
        compare(&gpu, &NormalizeCreator, &f, &shape, (-2.0, 2.0), 3);
    }
}

#[test]
fn interpolate_matches_cpu_in_every_mode() {
    let Some(gpu) = gpu() else { return };
    let sized = |mode: &str, size: &[i64], align: i32| {
        FieldCollection::new()
            .with("mode", mode)
            .with("out_size", size.to_vec())
            .with("align_corners", align)
    };
    let cases: Vec<(FieldCollection, Vec<i64>)> = vec![
        (sized("nearest", &[64, 64], 0), vec![2, 3, 32, 32]),
        (sized("nearest", &[7, 30], 0), vec![2, 3, 20, 11]),
        (sized("nearest", &[64, 64], 0), vec![300, 1, 32, 32]),
        (sized("bilinear", &[4, 4], 0), vec![70000, 1, 2, 2]),
        (sized("linear", &[50], 0), vec![2, 3, 21]),
        (sized("bilinear", &[64, 64], 0), vec![2, 3, 32, 32]),
        (sized("bilinear", &[17, 45], 1), vec![1, 2, 30, 20]),
        (sized("bicubic", &[40, 24], 0), vec![1, 2, 20, 12]),
        (sized("bicubic", &[10, 6], 1), vec![1, 2, 20, 12]),
        (sized("trilinear", &[16, 16, 16], 1), vec![1, 2, 8, 8, 8]),
        (sized("trilinear", &[7, 18, 64], 0), vec![2, 3, 5, 12, 40]),
        (sized("trilinear", &[4, 16, 24], 1), vec![1, 3, 9, 8, 8]),
        (
            sized("trilinear", &[6, 256, 256], 1),
            vec![1, 2, 3, 128, 128],
        ),
        (sized("trilinear", &[3, 20, 32], 0), vec![1, 2, 7, 50, 64]),
        (sized("bilinear", &[9, 24], 0), vec![1, 2, 20, 48]),
        (sized("bilinear", &[20, 8], 1), vec![1, 2, 300, 16]),
        (sized("bilinear", &[11, 20], 1), vec![1, 2, 6, 12]),
        (sized("bilinear", &[4, 1024], 0), vec![1, 2, 3, 512]),
        (sized("linear", &[64], 0), vec![2, 3, 40]),
        (sized("nearest", &[10, 24], 0), vec![1, 2, 7, 16]),
        (sized("adaptive_avg_pool1d", &[5], 0), vec![2, 3, 23]),
        (sized("adaptive_avg_pool2d", &[7, 7], 0), vec![2, 3, 32, 30]),
        (sized("adaptive_avg_pool2d", &[3, 5], 0), vec![2, 3, 64, 64]),
        (sized("adaptive_max_pool1d", &[3], 0), vec![2, 3, 200]),
        (
            sized("adaptive_avg_pool3d", &[2, 3, 4], 0),
            vec![1, 2, 9, 10, 11],
        ),
        (sized("adaptive_max_pool1d", &[4], 0), vec![2, 3, 19]),
        (
            sized("adaptive_max_pool2d", &[7, 7], 0),
            vec![2, 3, 128, 128],
        ),
        (sized("adaptive_max_pool2d", &[5, 3], 0), vec![2, 3, 11, 9]),
        (
            sized("adaptive_max_pool3d", &[2, 2, 2], 0),
            vec![1, 2, 9, 10, 11],
        ),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("scales", vec![0.5f64, 0.5])
                .with("use_scales", 1i32)
                .with("antialias", 1i32),
            vec![1, 2, 40, 40],
        ),
    ];
    for (i, (f, shape)) in cases.iter().enumerate() {
        compare(
            &gpu,
            &InterpolateCreator,
            f,
            shape,
            (-4.0, 4.0),
            10 + i as u64,
        );
    }
}

/// The vectorised paths (exact ×2 upsampling, row pooling, register normalisation, the
/// plane-in-registers instance norm) and their fallbacks: widths that are and are not whole
/// 16-byte vectors, odd heights, scales that are ×2 and ones that are not.
#[test]
fn vector_fast_paths_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let scaled = |mode: &str, scale: f64, dims: usize, align: i32| {
        FieldCollection::new()
            .with("mode", mode)
            .with("scales", vec![scale; dims])
            .with("use_scales", 1i32)
            .with("align_corners", align)
    };
    let pool = |mode: &str, size: &[i64]| {
        FieldCollection::new()
            .with("mode", mode)
            .with("out_size", size.to_vec())
    };
    let cases: Vec<(FieldCollection, Vec<i64>)> = vec![
        (scaled("nearest", 2.0, 2, 0), vec![2, 3, 5, 16]),
        (scaled("nearest", 2.0, 2, 0), vec![1, 2, 3, 12]),
        (scaled("bilinear", 2.0, 2, 0), vec![2, 3, 5, 16]),
        (scaled("bilinear", 2.0, 2, 0), vec![1, 2, 1, 8]),
        (scaled("bilinear", 2.0, 2, 0), vec![1, 2, 7, 12]),
        (scaled("bilinear", 2.0, 2, 1), vec![1, 2, 6, 16]),
        (scaled("bilinear", 3.0, 2, 0), vec![1, 2, 6, 16]),
        (scaled("trilinear", 2.0, 3, 0), vec![1, 2, 3, 4, 16]),
        (scaled("trilinear", 2.0, 3, 1), vec![2, 3, 3, 4, 8]),
        (scaled("trilinear", 2.0, 3, 1), vec![1, 2, 4, 8, 32]),
        (scaled("bilinear", 0.5, 2, 0), vec![1, 2, 16, 64]),
        (scaled("linear", 1.5, 1, 0), vec![1, 2, 9000]),
        (scaled("nearest", 2.0, 1, 0), vec![2, 2, 24]),
        (pool("adaptive_max_pool2d", &[7, 7]), vec![3, 2, 40, 32]),
        (pool("adaptive_max_pool2d", &[3, 5]), vec![1, 2, 9, 24]),
        (pool("adaptive_avg_pool2d", &[7, 7]), vec![2, 3, 30, 64]),
        (pool("adaptive_avg_pool2d", &[2, 9]), vec![1, 3, 5, 520]),
        (pool("adaptive_max_pool2d", &[7, 7]), vec![2, 3, 128, 128]),
        (pool("adaptive_avg_pool2d", &[5, 3]), vec![1, 2, 37, 40]),
        (pool("adaptive_avg_pool2d", &[9, 4]), vec![1, 2, 6, 16]),
        (pool("adaptive_max_pool2d", &[1, 4]), vec![1, 1, 300, 160]),
        (pool("adaptive_max_pool2d", &[5, 9]), vec![1, 2, 50, 256]),
        (pool("adaptive_max_pool2d", &[9, 3]), vec![3, 2, 9, 16]),
        (pool("adaptive_max_pool2d", &[7, 7]), vec![1, 5, 128, 64]),
        (pool("adaptive_max_pool2d", &[3, 11]), vec![1, 3, 16, 64]),
        (pool("adaptive_max_pool2d", &[1, 1]), vec![1, 2, 320, 8]),
        (pool("adaptive_max_pool2d", &[2, 2]), vec![1, 2, 321, 8]),
    ];
    for (i, (f, shape)) in cases.iter().enumerate() {
        compare(
            &gpu,
            &InterpolateCreator,
            f,
            shape,
            (-4.0, 4.0),
            40 + i as u64,
        );
    }
    for (order, shape) in [
        (2.0f32, vec![2i64, 13, 5, 8]),
        (1.0, vec![3, 64, 2, 80]),
        (f32::INFINITY, vec![1, 9, 264]),
        (3.0, vec![2, 40, 16]),
        (2.0, vec![2, 64, 3, 12]),
        (2.0, vec![2, 33, 5, 40]),
        (f32::INFINITY, vec![3, 48, 64]),
    ] {
        let f = FieldCollection::new()
            .with("order", order)
            .with("axes", vec![1i32])
            .with("mode", "normalize")
            .with("eps", 1e-12f32);
        compare(&gpu, &NormalizeCreator, &f, &shape, (-2.0, 2.0), 60);
    }
    for shape in [
        vec![1i64, 2, 256, 256],
        vec![2, 3, 24, 40],
        vec![1, 2, 3, 5, 7],
    ] {
        let f = FieldCollection::new()
            .with("epsilon", 1e-5f32)
            .with("scales", values(shape[1] as usize, 4, 0.5, 2.0))
            .with("bias", values(shape[1] as usize, 5, -1.0, 1.0));
        compare(&gpu, &InstanceNormCreator, &f, &shape, (-3.0, 5.0), 70);
    }
    let gelu = FieldCollection::new();
    for shape in [vec![3i64, 1027], vec![1, 8 * 1024 * 33 + 5]] {
        compare(&gpu, &GeluCreator, &gelu, &shape, (-9.0, 9.0), 80);
    }
}

/// Max pools on the GPU let a NaN win, as the CPU kernels and PyTorch do: every path (the
/// warp-per-window kernel, staged bands, pooled rows, the general kernels) on inputs with a
/// few NaNs, one window of nothing but NaN among them.
#[test]
fn max_pools_let_nan_win() {
    let Some(gpu) = gpu() else { return };
    let pool = |size: &[i64]| {
        FieldCollection::new()
            .with("mode", "adaptive_max_pool2d")
            .with("out_size", size.to_vec())
    };
    let cases: Vec<(&[i64], Vec<i64>)> = vec![
        (&[7, 7], vec![2, 3, 128, 128]),
        (&[7, 7], vec![3, 2, 40, 32]),
        (&[3, 5], vec![1, 2, 9, 24]),
        (&[5, 3], vec![2, 3, 11, 9]),
        (&[1, 4], vec![1, 1, 300, 160]),
    ];
    for (i, (size, shape)) in cases.iter().enumerate() {
        let n = shape.iter().product::<i64>() as usize;
        let mut x = values(n, 90 + i as u64, -4.0, 4.0);
        for k in (n / 7..n).step_by(n / 5) {
            x[k] = f32::NAN;
        }
        let (h, w) = (shape[2] as usize, shape[3] as usize);
        let cols = w.div_ceil(size[1] as usize);
        for r in 0..h.div_ceil(size[0] as usize) {
            x[r * w..r * w + cols].fill(f32::NAN);
        }
        compare_on(&gpu, &InterpolateCreator, &pool(size), shape, &x);
    }
}

#[test]
fn bad_cuda_launches_are_errors() {
    let Some(gpu) = gpu() else { return };
    let plugin = create_plugin(&GeluCreator, "g", &FieldCollection::new()).expect("creates");
    let desc = TensorDesc::new(DType::F32, vec![4, 4]);
    let wrong = TensorDesc::new(DType::F32, vec![4, 5]);
    let x = DevBuf::upload(&[0u8; 64]);
    let launch = |out: &TensorDesc, ptr: u64| {
        gpu.enqueue(
            plugin.as_ref(),
            &[DeviceTensor {
                desc: desc.clone(),
                ptr,
            }],
            &[DeviceTensor {
                desc: out.clone(),
                ptr: x.0,
            }],
        )
    };
    assert!(launch(&wrong, x.0).is_err());
    assert!(launch(&desc, 0).is_err());
    assert!(launch(&desc, x.0).is_ok());
}
