//! Runs one layer on the GPU through `kernels::prepare` and on the CPU backend, and
//! compares the outputs.

use std::cell::{Cell, RefCell};

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_core::plugin_api::{
    DType, DeviceTensor, DimExpr, TensorDesc, bf16, f16, shape_of_sizes,
};
use torchtrt_core::{Backend, Tensor};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::kernels::{self, ConvTactic, DeviceKernel, PrepareCtx, Programs};
use torchtrt_cuda::{CudaDevice, DeviceBuffer};

use crate::common::random_f32;

thread_local! {
    /// The convolution tactic layers prepared on this thread are forced to ([`forcing`]).
    static TACTIC: Cell<Option<ConvTactic>> = const { Cell::new(None) };
    /// The programs compiled on this thread and the device ordinal they are for, so that a
    /// test's checks compile each program once (NVRTC takes seconds for the convolution
    /// programs), not once per check.
    static PROGRAMS: RefCell<Option<(usize, Programs)>> = const { RefCell::new(None) };
}

/// This thread's program cache for `dev`: a new one when the cached one is another device's.
fn programs(dev: &CudaDevice) -> Programs {
    PROGRAMS.with(|p| {
        let mut cached = p.borrow_mut();
        match &*cached {
            Some((ordinal, programs)) if *ordinal == dev.ordinal() => programs.clone(),
            _ => {
                let programs = Programs::new(dev);
                *cached = Some((dev.ordinal(), programs.clone()));
                programs
            }
        }
    })
}

/// Runs `f` with convolutions prepared on this thread forced to `tactic`.
pub fn forcing<R>(tactic: ConvTactic, f: impl FnOnce() -> R) -> R {
    let before = TACTIC.with(|t| t.replace(Some(tactic)));
    let r = f();
    TACTIC.with(|t| t.set(before));
    r
}

/// A random tensor of `dtype` with values in [-2, 2).
pub fn rand(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    let v = random_f32(n, seed);
    let bytes: Vec<u8> = match dtype {
        DType::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => v
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect(),
        DType::BF16 => v
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect(),
        other => panic!("no random data for {other}"),
    };
    Tensor::from_bytes(dtype, shape, &bytes).expect("random tensor")
}

/// Relative tolerance of a dtype, per element; the absolute floor is this times the
/// reference's root-mean-square (sums that cancel to near zero keep the error of their terms).
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-5,
        DType::F16 => 5e-3,
        _ => 4e-2,
    }
}

/// An input: the tensor and whether it is a build-time constant.
pub type Input = (Tensor, bool);

fn infer_shapes(inputs: &[Input]) -> Vec<Vec<DimExpr>> {
    inputs
        .iter()
        .map(|(t, _)| shape_of_sizes(t.shape()))
        .collect()
}

/// The layer's outputs on the CPU backend.
pub fn cpu(layer: &LayerKind, inputs: &[Input]) -> Vec<Tensor> {
    let shapes = infer_shapes(inputs);
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|((t, c), s)| InferInput {
            dtype: t.dtype(),
            shape: s,
            value: c.then_some(t),
        })
        .collect();
    let types = layer.op().infer(&infer).expect("shape inference");
    let mut outs: Vec<Tensor> = types
        .iter()
        .map(|ts| {
            let shape: Vec<usize> = ts
                .shape
                .iter()
                .map(|d| d.as_const().expect("concrete output") as usize)
                .collect();
            torchtrt_testing::sentinel_tensor(ts.dtype, &shape)
        })
        .collect();
    let kernel = CpuBackend::new()
        .prepare(layer, &infer)
        .expect("CPU kernel");
    let refs: Vec<&Tensor> = inputs.iter().map(|(t, _)| t).collect();
    kernel.execute(&refs, &mut outs).expect("CPU run");
    outs
}

/// The GPU kernel for the layer on these inputs (constants marked), as the backend
/// prepares it; `None` when there is none.
fn prepare(
    dev: &CudaDevice,
    layer: &LayerKind,
    inputs: &[Input],
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let shapes = infer_shapes(inputs);
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|((t, c), s)| InferInput {
            dtype: t.dtype(),
            shape: s,
            value: c.then_some(t),
        })
        .collect();
    let programs = programs(dev);
    let ctx = PrepareCtx {
        device: dev,
        programs: &programs,
        tf32: false,
        conv_tactic: TACTIC.with(Cell::get),
    };
    kernels::prepare(layer, &infer, &ctx)
}

/// Whether the GPU has a kernel for the layer on these inputs.
pub fn supported(dev: &CudaDevice, layer: &LayerKind, inputs: &[Input]) -> bool {
    prepare(dev, layer, inputs).is_some()
}

fn upload(
    dev: &CudaDevice,
    stream: &torchtrt_cuda::Stream,
    t: &Tensor,
) -> (DeviceBuffer, DeviceTensor) {
    let buf = dev
        .allocator()
        .alloc(t.bytes().len().max(1))
        .expect("alloc");
    if !t.bytes().is_empty() {
        stream.upload(t.bytes(), &buf).expect("upload");
    }
    let desc = TensorDesc::new(
        t.dtype(),
        t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
    );
    let ptr = buf.ptr();
    (buf, DeviceTensor { desc, ptr })
}

/// Runs the layer on the GPU with outputs of `like`'s dtypes and shapes, each pre-filled with
/// the sentinel (never `like`'s values), so an element the kernel does not write fails;
/// `Err` from prepare or execute.
pub fn gpu(
    dev: &CudaDevice,
    layer: &LayerKind,
    inputs: &[Input],
    like: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    let kernel = prepare(dev, layer, inputs).ok_or("no CUDA kernel")??;
    let stream = dev.new_stream().map_err(|e| e.to_string())?;
    let ins: Vec<_> = inputs
        .iter()
        .map(|(t, _)| upload(dev, &stream, t))
        .collect();
    let outs: Vec<_> = like
        .iter()
        .map(|t| upload(dev, &stream, &torchtrt_testing::sentinel_like(t)))
        .collect();
    let in_t: Vec<DeviceTensor> = ins.iter().map(|(_, d)| d.clone()).collect();
    let out_t: Vec<DeviceTensor> = outs.iter().map(|(_, d)| d.clone()).collect();
    kernel.execute(&in_t, &out_t, &stream)?;
    stream.synchronize().map_err(|e| e.to_string())?;
    Ok(outs
        .iter()
        .zip(like)
        .map(|((buf, _), t)| {
            let mut bytes = vec![0u8; t.bytes().len()];
            if !bytes.is_empty() {
                stream.download(buf, &mut bytes).expect("download");
            }
            Tensor::from_bytes(t.dtype(), t.shape(), &bytes).expect("output tensor")
        })
        .collect())
}

/// The bound for outputs of `want`: [`tolerance`] relative to each element, with an absolute
/// floor of the same times the root-mean-square of `want`'s finite values (at least 1e-3).
pub fn bound(want: &Tensor) -> torchtrt_testing::Tol {
    bound_at(want, tolerance(want.dtype()))
}

/// [`bound`] with the relative tolerance `t`.
pub fn bound_at(want: &Tensor, t: f64) -> torchtrt_testing::Tol {
    let v = want.to_f64_vec();
    let finite: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
    let rms = (finite.iter().map(|x| x * x).sum::<f64>() / finite.len().max(1) as f64).sqrt();
    torchtrt_testing::Tol::new(t, t * rms.max(1e-3))
}

/// Runs `layer` on both backends and asserts the outputs agree under [`bound`] with the
/// shared comparison (integers and bools exactly); a failure names the worst element.
pub fn check(dev: &CudaDevice, what: &str, layer: &LayerKind, inputs: &[Input]) {
    let want = cpu(layer, inputs);
    let got = gpu(dev, layer, inputs, &want).unwrap_or_else(|e| panic!("{what}: {e}"));
    for (g, w) in got.iter().zip(&want) {
        if let Err(e) = torchtrt_testing::check_tensor(g, w, bound(w)) {
            panic!("{what}: the GPU against the CPU: {e}");
        }
    }
}

/// `t`'s values as an f32 tensor.
pub fn widened(t: &Tensor) -> Tensor {
    let values: Vec<f32> = t.to_f64_vec().into_iter().map(|v| v as f32).collect();
    Tensor::from_vec(t.shape(), values).expect("f32 tensor")
}

/// [`check`] for 16-bit layers whose GPU kernel rounds once, at the end, against the CPU
/// computing the same values in f32: the bound is the output dtype's [`tolerance`], with the
/// floor taken from the f32 result (a CPU run in the 16-bit dtype rounds intermediates too,
/// which can exceed that bound where an activation clips the output's spread).
pub fn check_against_f32(dev: &CudaDevice, what: &str, layer: &LayerKind, inputs: &[Input]) {
    let shapes = cpu(layer, inputs);
    let wide: Vec<Input> = inputs.iter().map(|(t, c)| (widened(t), *c)).collect();
    let want = cpu(layer, &wide);
    let got = gpu(dev, layer, inputs, &shapes).unwrap_or_else(|e| panic!("{what}: {e}"));
    for ((g, w), s) in got.iter().zip(&want).zip(&shapes) {
        let tol = bound_at(w, tolerance(s.dtype()));
        if let Err(e) = torchtrt_testing::check_tensor(&widened(g), w, tol) {
            panic!("{what}: the GPU against the CPU in f32: {e}");
        }
    }
}
