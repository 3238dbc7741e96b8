//! The layers of modern exports (issue 24): index tuples, non-zero coordinates, value
//! tests, bit shifts, RMS normalization, rotary embeddings and attention, against the CPU
//! backend.

use torchtrt_core::layers::{
    Attention, Elementwise, ElementwiseOp, GatherNd, NonZero, RmsNormalization, RotaryEmbedding,
    ScatterNd, ScatterReduction, ValueTest, ValueTestKind,
};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};

use half::{bf16, f16};

use crate::common::device_or_skip;
use crate::harness::{check, rand, supported};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn i64s(shape: &[usize], v: Vec<i64>) -> Tensor {
    Tensor::from_vec(shape, v).expect("i64 tensor")
}

#[test]
fn gather_and_scatter_by_tuples_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in DTYPES {
        let data = rand(dtype, &[3, 4, 5, 6], 1);
        let layer = LayerKind::from(GatherNd { batch_dims: 0 });
        let idx = i64s(
            &[2, 7, 2],
            (0..28).map(|i| (i * 5 % 6) as i64 - 3).collect(),
        );
        check(
            &dev,
            "GatherNd",
            &layer,
            &[(data.clone(), false), (idx, false)],
        );
        let batched = LayerKind::from(GatherNd { batch_dims: 1 });
        let bidx = i64s(&[3, 4, 1], (0..12).map(|i| (i % 4) as i64 - 2).collect());
        check(
            &dev,
            "GatherNd batch_dims 1",
            &batched,
            &[(data.clone(), false), (bidx, false)],
        );
        for reduction in [
            ScatterReduction::None,
            ScatterReduction::Add,
            ScatterReduction::Mul,
            ScatterReduction::Max,
            ScatterReduction::Min,
        ] {
            let layer = LayerKind::from(ScatterNd { reduction });
            let unique = i64s(&[3, 1], vec![2, 0, -2]);
            let updates = rand(dtype, &[3, 4, 5, 6], 3);
            let inputs = [(data.clone(), false), (unique, false), (updates, false)];
            check(&dev, &format!("ScatterNd {reduction:?}"), &layer, &inputs);
            if reduction != ScatterReduction::None {
                let repeated = i64s(&[4, 2], vec![1, 2, 1, 2, 0, 3, 1, 2]);
                let updates = rand(dtype, &[4, 5, 6], 4);
                let inputs = [(data.clone(), false), (repeated, false), (updates, false)];
                check(
                    &dev,
                    &format!("ScatterNd {reduction:?} repeated"),
                    &layer,
                    &inputs,
                );
            }
        }
    }
}

#[test]
fn non_zero_and_value_tests_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for (n, shape) in [
        (1usize, vec![5usize, 7]),
        (3, vec![3, 1000, 11]),
        (2, vec![70_000]),
    ] {
        let x = rand(DType::F32, &shape, n as u64);
        let v: Vec<f32> = x
            .to_f64_vec()
            .iter()
            .map(|&v| if v.abs() < 1.0 { 0.0 } else { v as f32 })
            .collect();
        let sparse = Tensor::from_vec(&shape, v).expect("tensor");
        check(
            &dev,
            "NonZero",
            &LayerKind::from(NonZero),
            &[(sparse, true)],
        );
    }
    let special: Vec<f32> = (0..4000)
        .map(|i| match i % 5 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            _ => i as f32 - 2000.0,
        })
        .collect();
    let x = Tensor::from_vec(&[40, 100], special).expect("tensor");
    for test in [
        ValueTestKind::Nan,
        ValueTestKind::Inf {
            positive: true,
            negative: false,
        },
        ValueTestKind::Inf {
            positive: true,
            negative: true,
        },
    ] {
        let layer = LayerKind::from(ValueTest { test });
        assert!(supported(&dev, &layer, &[(x.clone(), false)]));
        check(&dev, &format!("{test:?}"), &layer, &[(x.clone(), false)]);
    }
}

#[test]
fn bit_shifts_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let a = i64s(
        &[2, 50],
        (0..100).map(|i| (i * 37 % 201) as i64 - 100).collect(),
    );
    let b = i64s(&[50], (0..50).map(|i| i as i64 % 70 - 3).collect());
    for op in [ElementwiseOp::ShiftLeft, ElementwiseOp::ShiftRight] {
        let layer = LayerKind::from(Elementwise::new(op));
        check(
            &dev,
            &format!("{op:?}"),
            &layer,
            &[(a.clone(), false), (b.clone(), false)],
        );
        let a8 = Tensor::from_vec(&[6], vec![-8i8, 4, -1, 64, 1, -64]).expect("tensor");
        let b8 = Tensor::from_vec(&[6], vec![8i8, 9, 127, 1, 7, -1]).expect("tensor");
        check(
            &dev,
            &format!("{op:?} i8"),
            &layer,
            &[(a8, false), (b8, false)],
        );
    }
}

#[test]
fn rms_normalization_and_rotary_embeddings_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in DTYPES {
        for (shape, axes) in [
            (vec![4, 7, 96], vec![-1]),
            (vec![3, 5, 2000], vec![-1]),
            (vec![2, 6, 8], vec![1, 2]),
        ] {
            let x = rand(dtype, &shape, 5);
            let scale = rand(dtype, &shape[shape.len() - axes.len()..], 6);
            let layer = LayerKind::from(RmsNormalization {
                axes,
                epsilon: 1e-5,
            });
            check(
                &dev,
                "RmsNormalization",
                &layer,
                &[(x, false), (scale, true)],
            );
        }
        for interleaved in [false, true] {
            let x = rand(dtype, &[2, 3, 5, 16], 7);
            let (cos, sin) = (rand(dtype, &[9, 6], 8), rand(dtype, &[9, 6], 9));
            let pos = i64s(&[2, 5], (0..10).map(|i| (i * 4 % 9) as i64).collect());
            let layer = LayerKind::from(RotaryEmbedding {
                interleaved,
                num_heads: 0,
                rotary_dim: 12,
            });
            let inputs = [(x, false), (cos, false), (sin, false), (pos, false)];
            check(&dev, "RotaryEmbedding 4d", &layer, &inputs);
            let x = rand(dtype, &[2, 5, 3 * 16], 10);
            let (cos, sin) = (rand(dtype, &[2, 5, 8], 11), rand(dtype, &[2, 5, 8], 12));
            let layer = LayerKind::from(RotaryEmbedding {
                interleaved,
                num_heads: 3,
                rotary_dim: 0,
            });
            check(
                &dev,
                "RotaryEmbedding 3d",
                &layer,
                &[(x, false), (cos, false), (sin, false)],
            );
        }
    }
}

#[test]
fn attention_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in DTYPES {
        let base = Attention::default();
        let q = rand(dtype, &[2, 4, 37, 64], 20);
        let k = rand(dtype, &[2, 2, 53, 64], 21);
        let v = rand(dtype, &[2, 2, 53, 48], 22);
        let plain = (q.clone(), false);
        let gqa = [plain.clone(), (k.clone(), false), (v.clone(), false)];
        check(&dev, "Attention gqa", &LayerKind::from(base.clone()), &gqa);
        let causal = Attention {
            causal: true,
            softcap: 5.0,
            ..base.clone()
        };
        check(
            &dev,
            "Attention causal softcap",
            &LayerKind::from(causal),
            &gqa,
        );
        let mask: Vec<u8> = (0..37 * 50).map(|i| u8::from(i % 7 != 3)).collect();
        let mask = Tensor::from_bytes(DType::Bool, &[37, 50], &mask).expect("mask");
        let masked = Attention {
            mask: true,
            left_window: 20,
            ..base.clone()
        };
        let inputs = [
            plain.clone(),
            (k.clone(), false),
            (v.clone(), false),
            (mask, false),
        ];
        check(
            &dev,
            "Attention bool mask window",
            &LayerKind::from(masked),
            &inputs,
        );
        let additive = Attention {
            mask: true,
            past: true,
            causal: true,
            ..base.clone()
        };
        let bias = rand(dtype, &[2, 1, 37, 60], 23);
        let (pk, pv) = (
            rand(dtype, &[2, 2, 7, 64], 24),
            rand(dtype, &[2, 2, 7, 48], 25),
        );
        let inputs = [
            plain,
            (k.clone(), false),
            (v.clone(), false),
            (bias, false),
            (pk, false),
            (pv, false),
        ];
        check(
            &dev,
            "Attention past additive causal",
            &LayerKind::from(additive),
            &inputs,
        );
        let rank3 = Attention {
            q_heads: 4,
            kv_heads: 2,
            nonpad: true,
            causal: true,
            ..base
        };
        let inputs = [
            (rand(dtype, &[2, 11, 4 * 32], 26), false),
            (rand(dtype, &[2, 19, 2 * 32], 27), false),
            (rand(dtype, &[2, 19, 2 * 40], 28), false),
            (i64s(&[2], vec![15, 19]), false),
        ];
        check(
            &dev,
            "Attention rank 3 nonpad",
            &LayerKind::from(rank3),
            &inputs,
        );
    }
}

/// The tensor-core kernel (f16 and bf16, head sizes 64 and 128, sm_80+): query and key
/// lengths that are not multiples of its 64-row tiles, grouped heads, both layouts, causal
/// masking, additive masks broadcast over heads and queries (padding), bool masks with a
/// query that may attend no key, and a scale of the layer's own.
#[test]
fn flash_attention_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in [DType::F16, DType::BF16] {
        let base = Attention::default();
        let gqa = [
            (rand(dtype, &[2, 4, 100, 64], 40), false),
            (rand(dtype, &[2, 2, 130, 64], 41), false),
            (rand(dtype, &[2, 2, 130, 64], 42), false),
        ];
        check(&dev, "flash gqa", &LayerKind::from(base.clone()), &gqa);
        let causal = Attention {
            causal: true,
            scale: Some(0.3),
            ..base.clone()
        };
        let long = [
            (rand(dtype, &[1, 2, 150, 128], 43), false),
            (rand(dtype, &[1, 2, 150, 128], 44), false),
            (rand(dtype, &[1, 2, 150, 128], 45), false),
        ];
        check(
            &dev,
            "flash causal d128",
            &LayerKind::from(causal.clone()),
            &long,
        );
        let long64 = [
            (rand(dtype, &[1, 3, 200, 64], 50), false),
            (rand(dtype, &[1, 3, 200, 64], 51), false),
            (rand(dtype, &[1, 3, 200, 64], 52), false),
        ];
        check(&dev, "flash causal d64", &LayerKind::from(causal), &long64);
        let padded = Attention {
            mask: true,
            ..base.clone()
        };
        let pad: Vec<f32> = (0..2 * 130)
            .map(|i| {
                if i % 130 >= 97 + 20 * (i / 130) {
                    -10_000.0
                } else {
                    0.0
                }
            })
            .collect();
        let pad = match dtype {
            DType::F16 => Tensor::from_vec(
                &[2, 1, 1, 130],
                pad.iter().map(|&x| f16::from_f32(x)).collect(),
            ),
            _ => Tensor::from_vec(
                &[2, 1, 1, 130],
                pad.iter().map(|&x| bf16::from_f32(x)).collect(),
            ),
        }
        .expect("mask");
        let inputs = [gqa[0].clone(), gqa[1].clone(), gqa[2].clone(), (pad, false)];
        check(
            &dev,
            "flash padding mask",
            &LayerKind::from(padded.clone()),
            &inputs,
        );
        let bias = rand(dtype, &[2, 4, 100, 130], 46);
        let inputs = [
            gqa[0].clone(),
            gqa[1].clone(),
            gqa[2].clone(),
            (bias, false),
        ];
        check(
            &dev,
            "flash additive mask",
            &LayerKind::from(padded.clone()),
            &inputs,
        );
        let allowed: Vec<u8> = (0..100 * 130)
            .map(|i| u8::from(i / 130 != 7 && i % 5 != 2))
            .collect();
        let allowed = Tensor::from_bytes(DType::Bool, &[100, 130], &allowed).expect("mask");
        let inputs = [
            gqa[0].clone(),
            gqa[1].clone(),
            gqa[2].clone(),
            (allowed, false),
        ];
        check(&dev, "flash bool mask", &LayerKind::from(padded), &inputs);
        let rank3 = Attention {
            q_heads: 4,
            kv_heads: 4,
            causal: true,
            ..base
        };
        let inputs = [
            (rand(dtype, &[2, 77, 4 * 64], 47), false),
            (rand(dtype, &[2, 77, 4 * 64], 48), false),
            (rand(dtype, &[2, 77, 4 * 64], 49), false),
        ];
        check(
            &dev,
            "flash rank 3 causal",
            &LayerKind::from(rank3),
            &inputs,
        );
    }
}

/// `Where` with every operand broadcast (condition per key, values per row or scalar, the
/// layout of attention masks) and a walk wider than 32 bits is not needed: floats of each
/// width, integers and bools as values.
#[test]
fn select_matches_cpu() {
    use torchtrt_core::layers::Select;
    let Some(dev) = device_or_skip() else { return };
    let layer = LayerKind::from(Select);
    let cond: Vec<u8> = (0..36).map(|i| u8::from(i % 3 != 1)).collect();
    let cond = Tensor::from_bytes(DType::Bool, &[4, 1, 1, 9], &cond).expect("condition");
    for dtype in DTYPES {
        let x = rand(dtype, &[4, 3, 5, 9], 60);
        let y = rand(dtype, &[1, 3, 5, 1], 61);
        let inputs = [(cond.clone(), false), (x.clone(), false), (y, false)];
        check(&dev, "Select broadcast", &layer, &inputs);
        let scalar = rand(dtype, &[], 62);
        let inputs = [(cond.clone(), false), (scalar, false), (x, false)];
        check(&dev, "Select scalar", &layer, &inputs);
    }
    let a = i64s(&[2, 9], (0..18).map(|i| i * 1_000_003 - 7).collect());
    let b = i64s(&[9], (0..9).map(|i| -(i << 40)).collect());
    let inputs = [(cond.clone(), false), (a, false), (b, false)];
    check(&dev, "Select i64", &layer, &inputs);
    let t: Vec<u8> = (0..9).map(|i| u8::from(i % 2 == 0)).collect();
    let t = Tensor::from_bytes(DType::Bool, &[9], &t).expect("bools");
    let f = Tensor::from_bytes(DType::Bool, &[1], &[1]).expect("bool");
    let inputs = [(cond, false), (t, false), (f, false)];
    check(&dev, "Select bool", &layer, &inputs);
}
