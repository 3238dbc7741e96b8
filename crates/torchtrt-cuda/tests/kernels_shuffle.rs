//! The memory-bound core layers on the GPU against the CPU backend: element-wise binary ops
//! with broadcasting, unary math, activations, casts, and the shuffles (transpose, concat,
//! slice, gather, pad, expand, reshape-likes) on random data in f32, f16, bf16 and integer
//! dtypes, odd shapes and negative axes. Skips without a device.

mod common;

use common::{device_or_skip, random_f32};
use half::{bf16, f16};
use torchtrt_core::layers::*;
use torchtrt_core::plugin_api::{DType, DeviceTensor, DimExpr, TensorDesc, shape_of_sizes};
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::kernels::{PrepareCtx, Programs, prepare};
use torchtrt_cuda::{CudaDevice, DeviceBuffer};
use torchtrt_testing::Tol;

/// A random tensor of `dtype` (floats in [-2, 2), integers in [-20, 20), bools).
fn random(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
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
        DType::F64 => v.iter().flat_map(|&x| f64::from(x).to_le_bytes()).collect(),
        DType::I64 => v
            .iter()
            .flat_map(|&x| ((x * 10.0) as i64).to_le_bytes())
            .collect(),
        DType::I32 => v
            .iter()
            .flat_map(|&x| ((x * 10.0) as i32).to_le_bytes())
            .collect(),
        DType::I16 => v
            .iter()
            .flat_map(|&x| ((x * 10.0) as i16).to_le_bytes())
            .collect(),
        DType::I8 => v.iter().map(|&x| (x * 10.0) as i8 as u8).collect(),
        DType::U8 => v.iter().map(|&x| ((x + 2.0) * 60.0) as u8).collect(),
        DType::U16 => v
            .iter()
            .flat_map(|&x| (((x + 2.0) * 60.0) as u16).to_le_bytes())
            .collect(),
        DType::U32 => v
            .iter()
            .flat_map(|&x| (((x + 2.0) * 60.0) as u32).to_le_bytes())
            .collect(),
        DType::U64 => v
            .iter()
            .flat_map(|&x| (((x + 2.0) * 60.0) as u64).to_le_bytes())
            .collect(),
        DType::Bool => v.iter().map(|&x| u8::from(x > 0.0)).collect(),
    };
    Tensor::from_bytes(dtype, shape, &bytes).expect("random tensor")
}

fn ints(values: &[i64]) -> Tensor {
    Tensor::from_slice(&[values.len()], values).expect("int tensor")
}

/// Tolerances `(atol, rtol)` for an output of `dtype`.
fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (2e-6, 2e-5),
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (2e-2, 1e-2),
        _ => (0.0, 0.0),
    }
}

struct Gpu {
    device: CudaDevice,
    programs: Programs,
}

impl Gpu {
    fn new() -> Option<Gpu> {
        let device = device_or_skip()?;
        let programs = Programs::new(&device);
        Some(Gpu { device, programs })
    }

    fn ctx(&self) -> PrepareCtx<'_> {
        PrepareCtx {
            device: &self.device,
            programs: &self.programs,
            tf32: false,
            conv_tactic: None,
        }
    }

    /// Runs `layer` on `inputs` on both backends and compares; `constant[i]` makes input `i`
    /// a prepare-time constant for the GPU kernel (value inputs always are).
    fn check(&self, layer: impl Into<LayerKind>, inputs: impl AsRef<[Tensor]>, constant: &[usize]) {
        let layer = layer.into();
        let inputs = inputs.as_ref();
        let shapes: Vec<Vec<DimExpr>> = inputs.iter().map(|t| shape_of_sizes(t.shape())).collect();
        let values = layer.op().value_inputs();
        let infer = |all: bool| -> Vec<InferInput<'_>> {
            inputs
                .iter()
                .zip(&shapes)
                .enumerate()
                .map(|(i, (t, s))| InferInput {
                    dtype: t.dtype(),
                    shape: s,
                    value: (all || values.contains(&i) || constant.contains(&i)).then_some(t),
                })
                .collect()
        };
        let full = infer(true);
        let outs = layer.op().infer(&full).expect("shape rule");
        let out_shapes: Vec<Vec<usize>> = outs
            .iter()
            .map(|o| {
                o.shape
                    .iter()
                    .map(|d| d.as_const().expect("concrete") as usize)
                    .collect()
            })
            .collect();
        let name = format!(
            "{layer:?} on {:?}",
            inputs
                .iter()
                .map(|t| (t.dtype(), t.shape().to_vec()))
                .collect::<Vec<_>>()
        );

        let cpu = CpuBackend::new()
            .prepare(&layer, &full)
            .expect("cpu kernel");
        let mut want: Vec<Tensor> = outs
            .iter()
            .zip(&out_shapes)
            .map(|(o, s)| torchtrt_testing::sentinel_tensor(o.dtype, s))
            .collect();
        let refs: Vec<&Tensor> = inputs.iter().collect();
        cpu.execute(&refs, &mut want).expect("cpu run");

        let kernel = prepare(&layer, &infer(false), &self.ctx())
            .unwrap_or_else(|| panic!("no CUDA kernel for {name}"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let stream = self.device.new_stream().expect("stream");
        let alloc = |bytes: &[u8]| {
            let b = self
                .device
                .allocator()
                .alloc(bytes.len().max(1))
                .expect("alloc");
            if !bytes.is_empty() {
                stream.upload(bytes, &b).expect("upload");
            }
            b
        };
        let in_bufs: Vec<DeviceBuffer> = inputs.iter().map(|t| alloc(t.bytes())).collect();
        let out_bufs: Vec<DeviceBuffer> = want
            .iter()
            .map(|t| alloc(torchtrt_testing::sentinel_like(t).bytes()))
            .collect();
        let tensor = |t: &Tensor, b: &DeviceBuffer| DeviceTensor {
            desc: TensorDesc::new(
                t.dtype(),
                t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
            ),
            ptr: b.ptr(),
        };
        let dev_in: Vec<DeviceTensor> = inputs
            .iter()
            .zip(&in_bufs)
            .map(|(t, b)| tensor(t, b))
            .collect();
        let dev_out: Vec<DeviceTensor> = want
            .iter()
            .zip(&out_bufs)
            .map(|(t, b)| tensor(t, b))
            .collect();
        kernel
            .execute(&dev_in, &dev_out, &stream)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        stream.synchronize().expect("sync");
        for (w, b) in want.iter().zip(&out_bufs) {
            let mut bytes = vec![0u8; w.bytes().len()];
            stream.download(b, &mut bytes).expect("download");
            let got = Tensor::from_bytes(w.dtype(), w.shape(), &bytes).expect("output");
            compare(&name, w, &got);
        }
    }
}

/// The shared comparison: floats within the dtype's tolerance, integers and bools exactly.
fn compare(name: &str, want: &Tensor, got: &Tensor) {
    let (atol, rtol) = tolerance(want.dtype());
    if let Err(e) = torchtrt_testing::check_tensor(got, want, Tol::new(rtol, atol)) {
        panic!("{name}: the GPU against the CPU: {e}");
    }
}

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn elementwise_arithmetic_broadcasts() {
    let Some(gpu) = Gpu::new() else { return };
    use ElementwiseOp as E;
    let shapes: [(&[usize], &[usize]); 8] = [
        (&[3, 5, 7], &[3, 5, 7]),
        (&[2, 1001], &[2, 1001]),
        (&[3, 1, 7], &[5, 1]),
        (&[], &[4, 33]),
        (&[2, 3, 4, 5], &[3, 1, 5]),
        (&[67, 3], &[1]),
        (&[4, 3, 16], &[3, 1]),
        (&[6, 32], &[32]),
    ];
    for dtype in FLOATS {
        for op in [
            E::Add,
            E::Sub,
            E::Mul,
            E::Div,
            E::Pow,
            E::Max,
            E::Min,
            E::Mod,
            E::PRelu,
        ] {
            for (k, (a, b)) in shapes.iter().enumerate() {
                let x = [
                    random(dtype, a, 1 + k as u64),
                    random(dtype, b, 50 + k as u64),
                ];
                gpu.check(Elementwise::new(op), &x, &[]);
            }
        }
        let x = [random(dtype, &[4, 9], 7), random(dtype, &[4, 9], 8)];
        gpu.check(
            Elementwise {
                op: E::Mod,
                fmod: true,
            },
            &x,
            &[],
        );
        gpu.check(
            Elementwise::new(E::Add),
            &[random(dtype, &[6, 9], 3), random(dtype, &[9], 4)],
            &[1],
        );
    }
}

#[test]
fn elementwise_integers_comparisons_and_logic() {
    let Some(gpu) = Gpu::new() else { return };
    use ElementwiseOp as E;
    for dtype in [DType::I64, DType::I32] {
        for op in [E::Add, E::Sub, E::Mul, E::Max, E::Min] {
            gpu.check(
                Elementwise::new(op),
                &[random(dtype, &[5, 37], 1), random(dtype, &[37], 2)],
                &[],
            );
        }
    }
    for dtype in [DType::F32, DType::F16, DType::I64, DType::I32] {
        for op in [
            E::Equal,
            E::Less,
            E::LessOrEqual,
            E::Greater,
            E::GreaterOrEqual,
        ] {
            let a = random(dtype, &[3, 41], 3);
            gpu.check(Elementwise::new(op), &[a.clone(), a], &[]);
            gpu.check(
                Elementwise::new(op),
                &[random(dtype, &[3, 41], 4), random(dtype, &[3, 1], 5)],
                &[],
            );
        }
    }
    for op in [E::And, E::Or, E::Xor] {
        let x = [
            random(DType::Bool, &[7, 19], 6),
            random(DType::Bool, &[19], 7),
        ];
        gpu.check(Elementwise::new(op), &x, &[]);
        let x = [
            random(DType::Bool, &[70, 19], 8),
            random(DType::Bool, &[70, 19], 9),
        ];
        gpu.check(Elementwise::new(op), &x, &[]);
    }
}

#[test]
fn elementwise_declines_integer_division() {
    let Some(gpu) = Gpu::new() else { return };
    let s: Vec<DimExpr> = vec![DimExpr::Const(4)];
    let i = InferInput {
        dtype: DType::I64,
        shape: &s,
        value: None,
    };
    let layer = LayerKind::from(Elementwise::new(ElementwiseOp::Div));
    assert!(prepare(&layer, &[i, i], &gpu.ctx()).is_none());
}

#[test]
fn unary_ops() {
    let Some(gpu) = Gpu::new() else { return };
    use UnaryOp as U;
    let float_ops = [
        U::Abs,
        U::Neg,
        U::Exp,
        U::Log,
        U::Sqrt,
        U::Reciprocal,
        U::Floor,
        U::Ceil,
        U::Round,
        U::Sign,
        U::Sin,
        U::Cos,
        U::Tan,
        U::Asin,
        U::Acos,
        U::Atan,
        U::Sinh,
        U::Cosh,
        U::Asinh,
        U::Acosh,
        U::Atanh,
        U::Erf,
    ];
    for dtype in FLOATS {
        for op in float_ops {
            gpu.check(Unary { op }, &[random(dtype, &[3, 333], op as u64)], &[]);
        }
    }
    for dtype in [DType::I32, DType::I64] {
        for op in [U::Abs, U::Neg, U::Sign] {
            gpu.check(Unary { op }, &[random(dtype, &[101], 3)], &[]);
        }
    }
    gpu.check(
        Unary { op: U::Not },
        &[random(DType::Bool, &[9, 11], 4)],
        &[],
    );
}

#[test]
fn activations() {
    let Some(gpu) = Gpu::new() else { return };
    use ActivationKind as A;
    let kinds = [
        A::Relu,
        A::LeakyRelu { alpha: 0.1 },
        A::Sigmoid,
        A::Tanh,
        A::Elu { alpha: 0.7 },
        A::Selu {
            alpha: 1.673_263_2,
            gamma: 1.050_701,
        },
        A::Celu { alpha: 1.3 },
        A::Softplus,
        A::Softsign,
        A::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        A::HardSwish,
        A::Clip {
            min: -0.5,
            max: 1.25,
        },
        A::Gelu { tanh: false },
        A::Gelu { tanh: true },
        A::Mish,
        A::ThresholdedRelu { alpha: 0.3 },
        A::Silu,
    ];
    for dtype in FLOATS {
        for (k, kind) in kinds.into_iter().enumerate() {
            gpu.check(
                Activation { kind },
                &[random(dtype, &[5, 7, 131], k as u64)],
                &[],
            );
        }
    }
    gpu.check(
        Activation { kind: A::Relu },
        &[random(DType::I32, &[77], 1)],
        &[],
    );
}

#[test]
fn casts_between_dtypes() {
    let Some(gpu) = Gpu::new() else { return };
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
    ];
    for from in dtypes {
        for to in dtypes {
            gpu.check(Cast { to }, &[random(from, &[3, 129], 9)], &[]);
        }
    }
    let big = Tensor::from_slice(&[6], &[3e9f32, -3e9, f32::NAN, 1e20, -7.9, 300.5]).expect("t");
    for to in [DType::I32, DType::I64, DType::I8, DType::U8, DType::Bool] {
        gpu.check(Cast { to }, [big.clone()], &[]);
    }
}

#[test]
fn transposes() {
    let Some(gpu) = Gpu::new() else { return };
    let cases: [(&[usize], &[usize]); 10] = [
        (&[2, 3, 4, 5], &[0, 1, 3, 2]),
        (&[2, 3, 4, 5], &[0, 2, 3, 1]),
        (&[2, 3, 4, 5], &[3, 2, 1, 0]),
        (&[2, 3, 4, 5], &[1, 0, 2, 3]),
        (&[3, 67, 45], &[0, 2, 1]),
        (&[40, 33], &[1, 0]),
        (&[2, 9, 40, 3, 2], &[0, 2, 1, 4, 3]),
        (&[2, 48, 64], &[0, 2, 1]),
        (&[3, 70, 36], &[0, 2, 1]),
        (&[2, 34, 3, 66], &[0, 3, 2, 1]),
    ];
    for dtype in [DType::F32, DType::F16, DType::I64, DType::Bool] {
        for (k, (shape, perm)) in cases.iter().enumerate() {
            let layer = Transpose {
                perm: perm.to_vec(),
            };
            gpu.check(layer, &[random(dtype, shape, k as u64)], &[]);
        }
    }
}

#[test]
fn concats() {
    let Some(gpu) = Gpu::new() else { return };
    for dtype in [DType::F32, DType::F16, DType::I64, DType::Bool] {
        let x = [
            random(dtype, &[2, 3, 8], 1),
            random(dtype, &[2, 5, 8], 2),
            random(dtype, &[2, 1, 8], 3),
        ];
        gpu.check(Concat { axis: 1 }, &x, &[]);
        gpu.check(Concat { axis: -2 }, &x, &[2]);
        let y = [random(dtype, &[3, 7], 4), random(dtype, &[3, 9], 5)];
        gpu.check(Concat { axis: -1 }, &y, &[]);
        let z = [random(dtype, &[2, 7], 6), random(dtype, &[5, 7], 7)];
        gpu.check(Concat { axis: 0 }, &z, &[0]);
    }
}

#[test]
fn slices() {
    let Some(gpu) = Gpu::new() else { return };
    let cases = [
        Slice {
            starts: vec![1],
            ends: vec![4],
            axes: vec![1],
            steps: vec![1],
        },
        Slice {
            starts: vec![0, -3],
            ends: vec![i64::MAX, 100],
            axes: vec![0, -1],
            steps: vec![2, 1],
        },
        Slice {
            starts: vec![-1],
            ends: vec![i64::MIN],
            axes: vec![2],
            steps: vec![-1],
        },
        Slice {
            starts: vec![5, 1],
            ends: vec![0, 10],
            axes: vec![-1, 1],
            steps: vec![-2, 3],
        },
        Slice {
            starts: vec![0],
            ends: vec![16],
            axes: vec![2],
            steps: vec![1],
        },
    ];
    for dtype in [DType::F32, DType::F16, DType::I32, DType::Bool] {
        for (k, s) in cases.iter().enumerate() {
            gpu.check(s.clone(), &[random(dtype, &[3, 7, 32], k as u64)], &[]);
        }
    }
    let as_inputs = [
        random(DType::F32, &[4, 10], 9),
        ints(&[1, -8]),
        ints(&[3, -1]),
        ints(&[0, 1]),
        ints(&[1, 3]),
    ];
    gpu.check(Slice::default(), &as_inputs, &[]);
}

#[test]
fn gathers() {
    let Some(gpu) = Gpu::new() else { return };
    let idx64 = Tensor::from_slice(&[2, 3], &[0i64, -1, 2, 1, 0, -3]).expect("t");
    let idx32 = Tensor::from_slice(&[4], &[2i32, 0, -2, 1]).expect("t");
    let scalar = Tensor::from_slice(&[], &[1i64]).expect("t");
    for dtype in [DType::F32, DType::F16, DType::I64, DType::Bool] {
        let data = random(dtype, &[3, 4, 8], 1);
        for axis in [0, 1, -1] {
            gpu.check(Gather { axis }, &[data.clone(), idx64.clone()], &[]);
            gpu.check(Gather { axis }, &[data.clone(), idx32.clone()], &[1]);
            gpu.check(Gather { axis }, &[data.clone(), scalar.clone()], &[0]);
        }
    }
    let table = random(DType::F16, &[50, 96], 3);
    let tokens = Tensor::from_slice(&[2, 5], &[1i64, 49, 3, 0, 7, 7, 8, 22, 13, 2]).expect("t");
    gpu.check(Gather { axis: 0 }, &[table, tokens], &[0]);
}

#[test]
fn gather_rejects_constant_indices_out_of_range() {
    let Some(gpu) = Gpu::new() else { return };
    let (d, i) = (vec![DimExpr::Const(3)], vec![DimExpr::Const(1)]);
    let idx = ints(&[3]);
    let inputs = [
        InferInput {
            dtype: DType::F32,
            shape: &d,
            value: None,
        },
        InferInput {
            dtype: DType::I64,
            shape: &i,
            value: Some(&idx),
        },
    ];
    let layer = LayerKind::from(Gather { axis: 0 });
    let err = prepare(&layer, &inputs, &gpu.ctx())
        .expect("a CUDA kernel")
        .err()
        .expect("an error");
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn pads_in_every_mode() {
    let Some(gpu) = Gpu::new() else { return };
    for dtype in [DType::F32, DType::F16, DType::I64, DType::Bool] {
        let x = random(dtype, &[2, 5, 6], 1);
        for mode in [
            PadMode::Constant,
            PadMode::Reflect,
            PadMode::Edge,
            PadMode::Wrap,
        ] {
            gpu.check(Pad { mode }, &[x.clone(), ints(&[0, 2, 3, 1, 4, 2])], &[]);
            gpu.check(Pad { mode }, &[x.clone(), ints(&[0, -1, 7, 0, 2, -2])], &[]);
            gpu.check(Pad { mode }, &[x.clone(), ints(&[0, 0, 1, 0, 0, 3])], &[]);
            let big = random(dtype, &[3, 33, 40], 2);
            gpu.check(Pad { mode }, &[big, ints(&[0, 1, 2, 0, 3, 5])], &[]);
        }
        let scalar = random(dtype, &[], 3);
        gpu.check(
            Pad {
                mode: PadMode::Edge,
            },
            &[scalar, ints(&[])],
            &[],
        );
        let value = random(dtype, &[], 5);
        gpu.check(
            Pad {
                mode: PadMode::Constant,
            },
            &[
                x.clone(),
                ints(&[1, 2, -1, 3]),
                value.clone(),
                ints(&[-1, 0]),
            ],
            &[],
        );
        gpu.check(
            Pad {
                mode: PadMode::Constant,
            },
            &[x.clone(), ints(&[0, 1, 1, 0, 0, 1]), value],
            &[2],
        );
    }
}

#[test]
fn expands() {
    let Some(gpu) = Gpu::new() else { return };
    for dtype in [DType::F32, DType::F16, DType::Bool, DType::I64] {
        gpu.check(Expand, &[random(dtype, &[3, 1], 1), ints(&[2, 3, 40])], &[]);
        gpu.check(Expand, &[random(dtype, &[1, 64], 2), ints(&[5, 1])], &[]);
        gpu.check(Expand, &[random(dtype, &[7], 3), ints(&[7])], &[]);
    }
}

#[test]
fn reshape_likes_copy() {
    let Some(gpu) = Gpu::new() else { return };
    let x = random(DType::F16, &[2, 1, 3, 5], 1);
    gpu.check(
        Reshape {
            dims: vec![6, -1],
            allow_zero: false,
        },
        [x.clone()],
        &[],
    );
    gpu.check(Flatten { axis: 2 }, [x.clone()], &[]);
    gpu.check(
        Squeeze {
            axes: Some(vec![1]),
        },
        [x.clone()],
        &[],
    );
    gpu.check(Unsqueeze { axes: vec![0, -1] }, &[x], &[]);
}

#[test]
fn slices_with_run_time_parameters_stay_on_the_host() {
    let Some(gpu) = Gpu::new() else { return };
    let (d, p) = (vec![DimExpr::Const(8)], vec![DimExpr::Const(1)]);
    let x = InferInput {
        dtype: DType::F32,
        shape: &d,
        value: None,
    };
    let starts = InferInput {
        dtype: DType::I64,
        shape: &p,
        value: None,
    };
    let layer = LayerKind::from(Slice::default());
    assert!(prepare(&layer, &[x, starts, starts], &gpu.ctx()).is_none());
}

#[test]
fn wrong_operands_are_errors() {
    let Some(gpu) = Gpu::new() else { return };
    let s = vec![DimExpr::Const(4)];
    let x = InferInput {
        dtype: DType::F32,
        shape: &s,
        value: None,
    };
    let kernel = prepare(
        &LayerKind::from(Unary { op: UnaryOp::Exp }),
        &[x],
        &gpu.ctx(),
    )
    .expect("a kernel")
    .expect("prepared");
    let stream = gpu.device.new_stream().expect("stream");
    let t = DeviceTensor {
        desc: TensorDesc::new(DType::F32, vec![4]),
        ptr: 0,
    };
    let h = DeviceTensor {
        desc: TensorDesc::new(DType::F16, vec![4]),
        ptr: 0,
    };
    assert!(
        kernel
            .execute(std::slice::from_ref(&t), &[], &stream)
            .is_err()
    );
    assert!(
        kernel
            .execute(&[h], std::slice::from_ref(&t), &stream)
            .is_err()
    );
    let wide = DeviceTensor {
        desc: TensorDesc::new(DType::F32, vec![5]),
        ptr: 0,
    };
    assert!(kernel.execute(&[t], &[wide], &stream).is_err());
}
