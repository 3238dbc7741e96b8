//! Times the memory-bound core-layer kernels (element-wise, activation, cast, transpose,
//! concat, slice, gather, pad, expand) on large tensors with CUDA events (median of many
//! launches after warm-up) and prints, per case, the milliseconds, the GB/s moved (bytes
//! read + written once) and the fraction of a device-to-device copy of the same bytes.
//! One JSON object per line.
//!
//! `shuffle_bench [--iters N]`

use torchtrt_core::layers::*;
use torchtrt_core::plugin_api::{DType, DeviceTensor, DimExpr, TensorDesc, shape_of_sizes};
use torchtrt_core::{InferInput, LayerKind, Tensor};
use torchtrt_cuda::kernels::{DeviceKernel, PrepareCtx, Programs, prepare};
use torchtrt_cuda::{CudaDevice, DeviceBuffer, Event, Stream};

type AnyError = Box<dyn std::error::Error>;

struct Case {
    name: String,
    layer: LayerKind,
    /// Dtype and shape of each input; `Some` values are constants (value inputs).
    inputs: Vec<(DType, Vec<usize>, Option<Tensor>)>,
}

fn case(
    name: &str,
    layer: impl Into<LayerKind>,
    inputs: Vec<(DType, Vec<usize>, Option<Tensor>)>,
) -> Case {
    Case {
        name: name.into(),
        layer: layer.into(),
        inputs,
    }
}

fn ints(v: &[i64]) -> Option<Tensor> {
    Tensor::from_slice(&[v.len()], v).ok()
}

fn cases() -> Vec<Case> {
    use DType::{F16, F32, I64};
    let t = |d: DType, s: &[usize]| (d, s.to_vec(), None);
    let c = |v: &[i64]| (I64, vec![v.len()], ints(v));
    let big = [32usize, 256, 128, 128];
    let mut out = Vec::new();
    for dt in [F32, F16] {
        let n = format!("{dt}");
        out.push(case(
            &format!("add_same_{n}"),
            Elementwise::new(ElementwiseOp::Add),
            vec![t(dt, &big), t(dt, &big)],
        ));
        out.push(case(
            &format!("mul_bias_nchw_{n}"),
            Elementwise::new(ElementwiseOp::Mul),
            vec![t(dt, &big), t(dt, &[256, 1, 1])],
        ));
        out.push(case(
            &format!("add_row_{n}"),
            Elementwise::new(ElementwiseOp::Add),
            vec![t(dt, &[65536, 2048]), t(dt, &[2048])],
        ));
        out.push(case(
            &format!("relu_{n}"),
            Activation {
                kind: ActivationKind::Relu,
            },
            vec![t(dt, &big)],
        ));
        out.push(case(
            &format!("gelu_{n}"),
            Activation {
                kind: ActivationKind::Gelu { tanh: false },
            },
            vec![t(dt, &big)],
        ));
        out.push(case(
            &format!("transpose_nchw_nhwc_{n}"),
            Transpose {
                perm: vec![0, 2, 3, 1],
            },
            vec![t(dt, &big)],
        ));
        out.push(case(
            &format!("transpose_last2_{n}"),
            Transpose {
                perm: vec![0, 1, 3, 2],
            },
            vec![t(dt, &big)],
        ));
        out.push(case(
            &format!("transpose_heads_{n}"),
            Transpose {
                perm: vec![0, 2, 1, 3],
            },
            vec![t(dt, &[64, 512, 16, 64])],
        ));
        out.push(case(
            &format!("concat_channels_{n}"),
            Concat { axis: 1 },
            vec![t(dt, &[32, 128, 128, 128]), t(dt, &[32, 128, 128, 128])],
        ));
        out.push(case(
            &format!("slice_half_channels_{n}"),
            Slice {
                starts: vec![0],
                ends: vec![128],
                axes: vec![1],
                steps: vec![1],
            },
            vec![t(dt, &big)],
        ));
        out.push(case(
            &format!("expand_rows_{n}"),
            Expand,
            vec![t(dt, &[1, 4096]), c(&[32768, 4096])],
        ));
        out.push(case(
            &format!("pad_hw_{n}"),
            Pad {
                mode: PadMode::Constant,
            },
            vec![t(dt, &big), c(&[0, 0, 1, 1, 0, 0, 1, 1])],
        ));
        out.push(case(
            &format!("gather_rows_{n}"),
            Gather { axis: 0 },
            vec![t(dt, &[32768, 1024]), (I64, vec![32768], None)],
        ));
    }
    out.push(case("cast_f32_f16", Cast { to: F16 }, vec![t(F32, &big)]));
    out.push(case("cast_f16_f32", Cast { to: F32 }, vec![t(F16, &big)]));
    out
}

struct Timer {
    start: Event,
    end: Event,
}

impl Timer {
    fn median_ms(
        &self,
        stream: &Stream,
        iters: usize,
        mut f: impl FnMut() -> Result<(), AnyError>,
    ) -> Result<f64, AnyError> {
        for _ in 0..5 {
            f()?;
        }
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters {
            self.start.record(stream)?;
            f()?;
            self.end.record(stream)?;
            self.end.synchronize()?;
            times.push(f64::from(self.start.elapsed_ms(&self.end)?));
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }
}

fn run(device: &CudaDevice, iters: usize) -> Result<(), AnyError> {
    let programs = Programs::new(device);
    let ctx = PrepareCtx {
        device,
        programs: &programs,
        tf32: false,
        conv_tactic: None,
    };
    let stream = device.new_stream()?;
    let timer = Timer {
        start: Event::new(device)?,
        end: Event::new(device)?,
    };
    for c in cases() {
        let shapes: Vec<Vec<DimExpr>> =
            c.inputs.iter().map(|(_, s, _)| shape_of_sizes(s)).collect();
        let infer: Vec<InferInput<'_>> = c
            .inputs
            .iter()
            .zip(&shapes)
            .map(|((d, _, v), s)| InferInput {
                dtype: *d,
                shape: s,
                value: v.as_ref(),
            })
            .collect();
        let out = c
            .layer
            .op()
            .infer(&infer)
            .map_err(|e| format!("{}: {e}", c.name))?;
        let out_shape: Vec<usize> = out[0]
            .shape
            .iter()
            .map(|d| d.as_const().unwrap_or(0) as usize)
            .collect();
        let kernel: Box<dyn DeviceKernel> =
            prepare(&c.layer, &infer, &ctx).ok_or(format!("{}: no kernel", c.name))??;
        let mut bufs = Vec::new();
        let mut ins = Vec::new();
        let mut moved = 0usize;
        for (d, s, v) in &c.inputs {
            let bytes = s.iter().product::<usize>() * d.size();
            let b = DeviceBuffer::alloc(device, bytes.max(1))?;
            match v {
                Some(t) => stream.upload(t.bytes(), &b)?,
                None if *d == DType::I64 => {
                    let idx: Vec<u8> = (0..bytes / 8)
                        .flat_map(|i| ((i * 7919) % 32768).to_le_bytes())
                        .collect();
                    stream.upload(&idx, &b)?;
                    moved += bytes;
                }
                None => {
                    stream.memset(&b, 0x3c, bytes)?;
                    moved += bytes;
                }
            }
            ins.push(DeviceTensor {
                desc: TensorDesc::new(*d, s.iter().map(|&x| x as i64).collect::<Vec<_>>()),
                ptr: b.ptr(),
            });
            bufs.push(b);
        }
        let out_bytes = out_shape.iter().product::<usize>() * out[0].dtype.size();
        moved += out_bytes;
        let o = DeviceBuffer::alloc(device, out_bytes.max(1))?;
        let outs = [DeviceTensor {
            desc: TensorDesc::new(
                out[0].dtype,
                out_shape.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            ),
            ptr: o.ptr(),
        }];
        let ms = timer.median_ms(&stream, iters, || Ok(kernel.execute(&ins, &outs, &stream)?))?;
        let half = moved / 2;
        let (a, b) = (
            DeviceBuffer::alloc(device, half)?,
            DeviceBuffer::alloc(device, half)?,
        );
        let copy_ms = timer.median_ms(&stream, iters, || Ok(stream.copy(&a, &b, half)?))?;
        println!(
            "{{\"case\": \"{}\", \"ms\": {ms:.4}, \"gb_per_s\": {:.1}, \"copy_ms\": {copy_ms:.4}, \"of_copy\": {:.2}}}",
            c.name,
            moved as f64 / ms / 1e6,
            copy_ms / ms
        );
    }
    Ok(())
}

fn main() {
    let mut iters = 50;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--iters") {
        iters = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(iters);
    }
    let device = match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("shuffle_bench: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = run(&device, iters) {
        eprintln!("shuffle_bench: {e}");
        std::process::exit(1);
    }
}
