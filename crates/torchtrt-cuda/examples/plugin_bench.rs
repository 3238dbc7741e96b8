//! Times the built-in plugins' CUDA kernels on the GPU with CUDA events (median of many
//! launches after warm-up) on the shapes of `bench/gpu_plugins_vs_pytorch.py`, next to a
//! device-to-device copy of the same bytes as the ceiling. Prints one JSON object per line.
//! With `--dump DIR` it also runs each case on a small shape and writes the input and
//! output bytes there, so the script can check them against PyTorch.
//!
//! `plugin_bench [--iters N] [--warmup N] [--dump DIR] [--only NAME]`

use half::{bf16, f16};
use std::sync::{Arc, OnceLock};

use torchtrt_cuda::{CudaDevice, DeviceBuffer, Event, PluginLauncher, PluginPrograms, Stream};
use torchtrt_plugin_api::{
    CudaLaunch, DType, DeviceTensor, FieldCollection, Launch, Plugin, PluginCreator, TensorDesc,
    const_shape, create_plugin, shape_values,
};
use torchtrt_plugins::gelu::GeluCreator;
use torchtrt_plugins::instance_norm::InstanceNormCreator;
use torchtrt_plugins::interpolate::InterpolateCreator;
use torchtrt_plugins::normalize::NormalizeCreator;

type AnyError = Box<dyn std::error::Error>;

struct Case {
    name: &'static str,
    creator: Box<dyn PluginCreator>,
    fields: FieldCollection,
    shape: Vec<i64>,
    small: Vec<i64>,
}

fn interp(mode: &str, scale: f64, align: i32) -> FieldCollection {
    let dims = match mode {
        "trilinear" => 3,
        _ => 2,
    };
    FieldCollection::new()
        .with("mode", mode)
        .with("scales", vec![scale; dims])
        .with("use_scales", 1i32)
        .with("align_corners", align)
}

fn cases() -> Vec<Case> {
    let big = vec![32i64, 64, 128, 128];
    let small = vec![2i64, 8, 16, 16];
    let case = |name, creator: Box<dyn PluginCreator>, fields, shape: &[i64], small: &[i64]| Case {
        name,
        creator,
        fields,
        shape: shape.to_vec(),
        small: small.to_vec(),
    };
    vec![
        case(
            "bilinear_x2",
            Box::new(InterpolateCreator),
            interp("bilinear", 2.0, 0),
            &big,
            &small,
        ),
        case(
            "nearest_x2",
            Box::new(InterpolateCreator),
            interp("nearest", 2.0, 0),
            &big,
            &small,
        ),
        case(
            "trilinear_x2_align",
            Box::new(InterpolateCreator),
            interp("trilinear", 2.0, 1),
            &[8, 32, 32, 64, 64],
            &[1, 4, 6, 8, 8],
        ),
        case(
            "normalize_p2_dim1",
            Box::new(NormalizeCreator),
            FieldCollection::new()
                .with("order", 2f32)
                .with("axes", vec![1i32])
                .with("mode", "normalize")
                .with("eps", 1e-12f32),
            &big,
            &small,
        ),
        case(
            "adaptive_max_pool_7x7",
            Box::new(InterpolateCreator),
            FieldCollection::new()
                .with("mode", "adaptive_max_pool2d")
                .with("out_size", vec![7i64, 7]),
            &big,
            &small,
        ),
        case(
            "gelu",
            Box::new(GeluCreator),
            FieldCollection::new(),
            &big,
            &small,
        ),
        case(
            "instance_norm",
            Box::new(InstanceNormCreator),
            FieldCollection::new()
                .with("epsilon", 1e-5f32)
                .with("scales", values(64, 7, 0.5, 1.5))
                .with("bias", values(64, 8, -0.5, 0.5)),
            &big,
            &[2, 64, 16, 16],
        ),
    ]
}

fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    torchtrt_testing::uniform(n, seed, lo, hi)
}

fn encode(v: &[f32], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F16 => v
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect(),
        DType::BF16 => v
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

struct Prepared {
    plugin: Box<dyn Plugin>,
    launcher: PluginLauncher,
    input: DeviceTensor,
    output: DeviceTensor,
    _buffers: (DeviceBuffer, DeviceBuffer),
    bytes: usize,
    host_input: Vec<u8>,
}

fn prepare(
    dev: &CudaDevice,
    stream: &Stream,
    case: &Case,
    shape: &[i64],
    dtype: DType,
) -> Result<Prepared, AnyError> {
    let mut plugin = create_plugin(case.creator.as_ref(), case.name, &case.fields)?;
    let out = plugin.output_shapes(&[const_shape(shape)])?;
    let out_shape = shape_values(&out[0]).ok_or("output shape is not constant")?;
    let (din, dout) = (
        TensorDesc::new(dtype, shape.to_vec()),
        TensorDesc::new(dtype, out_shape),
    );
    plugin.configure(std::slice::from_ref(&din), std::slice::from_ref(&dout))?;
    let n = din.numel().ok_or("input shape")?;
    let host_input = encode(&values(n, 42, -3.0, 3.0), dtype);
    let (bx, by) = (
        DeviceBuffer::alloc(dev, host_input.len())?,
        DeviceBuffer::alloc(dev, dout.byte_len().ok_or("output shape")?)?,
    );
    stream.upload(&host_input, &bx)?;
    let bytes = bx.len() + by.len();
    Ok(Prepared {
        plugin,
        launcher: plugin_programs(dev).launcher(),
        input: DeviceTensor {
            desc: din,
            ptr: bx.ptr(),
        },
        output: DeviceTensor {
            desc: dout,
            ptr: by.ptr(),
        },
        _buffers: (bx, by),
        bytes,
        host_input,
    })
}

/// The plugins' programs, compiled once for every case.
fn plugin_programs(dev: &CudaDevice) -> &'static Arc<PluginPrograms> {
    static PROGRAMS: OnceLock<Arc<PluginPrograms>> = OnceLock::new();
    PROGRAMS.get_or_init(|| Arc::new(PluginPrograms::new(dev)))
}

fn launch(p: &Prepared, stream: &Stream) -> Result<(), AnyError> {
    p.plugin.enqueue(Launch::Cuda(CudaLaunch {
        inputs: std::slice::from_ref(&p.input),
        outputs: std::slice::from_ref(&p.output),
        workspace: 0,
        device: 0,
        stream: stream.raw(),
        runtime: &p.launcher.on(stream),
        shape_values: &[],
    }))?;
    Ok(())
}

fn median_ms(
    dev: &CudaDevice,
    stream: &Stream,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut() -> Result<(), AnyError>,
) -> Result<f64, AnyError> {
    for _ in 0..warmup {
        f()?;
    }
    let events: Vec<(Event, Event)> = (0..iters)
        .map(|_| Ok((Event::new(dev)?, Event::new(dev)?)))
        .collect::<Result<_, torchtrt_cuda::CudaError>>()?;
    for (a, b) in &events {
        a.record(stream)?;
        f()?;
        b.record(stream)?;
    }
    stream.synchronize()?;
    let mut t: Vec<f64> = events
        .iter()
        .map(|(a, b)| a.elapsed_ms(b).map(f64::from))
        .collect::<Result<_, _>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

fn main() -> Result<(), AnyError> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let iters: usize = flag("--iters").map_or(Ok(50), |v| v.parse())?;
    let warmup: usize = flag("--warmup").map_or(Ok(10), |v| v.parse())?;
    let dump = flag("--dump");
    let only = flag("--only");
    let dev = CudaDevice::open(0)?;
    let stream = dev.new_stream()?;
    for case in cases() {
        if only.is_some_and(|o| o != case.name) {
            continue;
        }
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let p = prepare(&dev, &stream, &case, &case.shape, dtype)?;
            let ms = median_ms(&dev, &stream, warmup, iters, || launch(&p, &stream))?;
            let copy_src = DeviceBuffer::alloc(&dev, p.bytes / 2)?;
            let copy_dst = DeviceBuffer::alloc(&dev, p.bytes / 2)?;
            let copy_ms = median_ms(&dev, &stream, warmup, iters, || {
                Ok(stream.copy(&copy_src, &copy_dst, p.bytes / 2)?)
            })?;
            println!(
                "{{\"case\":\"{}\",\"dtype\":\"{dtype}\",\"shape\":{:?},\"median_ms\":{ms:.5},\"bytes\":{},\"gbps\":{:.1},\"copy_ms\":{copy_ms:.5},\"of_copy\":{:.3}}}",
                case.name,
                case.shape,
                p.bytes,
                p.bytes as f64 / ms / 1e6,
                copy_ms / ms
            );
            if let Some(dir) = dump {
                let s = prepare(&dev, &stream, &case, &case.small, dtype)?;
                launch(&s, &stream)?;
                let mut out = vec![0u8; s.output.desc.byte_len().unwrap_or(0)];
                stream.download(&s._buffers.1, &mut out)?;
                let stem = format!("{dir}/{}_{dtype}", case.name);
                std::fs::write(format!("{stem}.in"), &s.host_input)?;
                std::fs::write(format!("{stem}.out"), &out)?;
                std::fs::write(
                    format!("{stem}.json"),
                    format!(
                        "{{\"in\":{:?},\"out\":{:?}}}",
                        s.input.desc.shape, s.output.desc.shape
                    ),
                )?;
            }
        }
    }
    Ok(())
}
