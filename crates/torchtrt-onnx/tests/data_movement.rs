//! Converters for tensors, shapes and data movement, on dynamic input shapes and against
//! plain references: opset-11 softmax coercion, `Split` and `Slice` parameters computed at
//! run time, resize onto the Interpolate plugin for inputs of any rank, `Pad` from
//! attributes and from inputs, `Range` lengths, the `Dropout` mask, and import errors.

mod common;

use common::{f32_init, i64_init, int, ints, model, node, random_f32, string, value};
use half::f16;
use proptest::prelude::*;
use torchtrt::{BuildConfig, Engine, Tensor};
use torchtrt_onnx::proto::attribute_proto::AttributeType;
use torchtrt_onnx::proto::tensor_shape_proto::Dimension;
use torchtrt_onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use torchtrt_onnx::proto::{AttributeProto, ModelProto, TensorProto, ValueInfoProto};
use torchtrt_onnx::{ImportOptions, import_model};

const F32: i32 = 1;
const I64: i32 = 7;
const F16: i32 = 10;

/// A value-info of elem type `ty` and rank `rank` whose dims are all dynamic.
fn dynamic(name: &str, ty: i32, rank: usize) -> ValueInfoProto {
    let mut v = value(name, ty, &vec![1; rank]);
    if let Some(torchtrt_onnx::proto::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
        && let Some(shape) = t.shape.as_mut()
    {
        shape.dim = (0..rank)
            .map(|i| Dimension {
                value: Some(DimValue::DimParam(format!("{name}_{i}"))),
                ..Dimension::default()
            })
            .collect();
    }
    v
}

fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..AttributeProto::default()
    }
}

fn compile(m: &ModelProto) -> Result<Engine, String> {
    torchtrt::init_plugins().map_err(|e| e.to_string())?;
    let options = ImportOptions {
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    };
    let net = import_model(m, None, torchtrt::registry(), &options).map_err(|e| e.to_string())?;
    torchtrt::compile(&net, &BuildConfig::default()).map_err(|e| e.to_string())
}

fn run(m: &ModelProto, inputs: &[&Tensor]) -> Vec<Tensor> {
    let engine = compile(m).expect("the model compiles");
    engine
        .create_context()
        .unwrap()
        .execute(inputs)
        .expect("the engine runs")
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_f64_vec().iter().map(|&v| v as f32).collect()
}

/// `|got - want| ≤ rtol · (|want| + floor)` element by element (the shared comparison); `floor` is the magnitude
/// below which rounding error is set by the operands rather than the result (a linear blend
/// of values in [-2, 2) that nearly cancels is still off by f32 rounding of the operands).
fn assert_close(got: &[f64], want: &[f64], rtol: f64, floor: f64) {
    torchtrt_testing::check_floats(got, want, torchtrt_testing::Tol::new(rtol, rtol * floor))
        .unwrap_or_else(|m| panic!("{m}"));
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Every multi-index of `dims`, in row-major order.
fn indices(dims: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = dims.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut idx = vec![0; dims.len()];
            for (k, &d) in dims.iter().enumerate().rev() {
                idx[k] = flat % d;
                flat /= d;
            }
            idx
        })
        .collect()
}

fn dims_strategy(
    rank: std::ops::RangeInclusive<usize>,
    max: usize,
) -> impl Strategy<Value = Vec<usize>> {
    rank.prop_flat_map(move |r| proptest::collection::vec(1..=max, r))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Opset-11 (log-)softmax normalises over everything from `axis` on, for inputs whose
    /// dims are only known at run time.
    #[test]
    fn softmax_before_opset_13_coerces_to_a_matrix(
        dims in dims_strategy(1..=4, 4),
        axis_pick in 0usize..4,
        log in any::<bool>(),
        half in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let axis = axis_pick % dims.len();
        let n: usize = dims.iter().product();
        let data = random_f32(n, seed);
        let (ty, x, rtol) = if half {
            let v: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
            (F16, Tensor::from_vec(&dims, v).unwrap(), 1e-2)
        } else {
            (F32, Tensor::from_slice(&dims, &data).unwrap(), 1e-5)
        };
        let op = if log { "LogSoftmax" } else { "Softmax" };
        let m = model(
            vec![node(op, &["x"], &["y"], vec![int("axis", axis as i64)])],
            vec![],
            vec![dynamic("x", ty, dims.len())],
            vec![dynamic("y", ty, dims.len())],
            11,
        );
        let got = run(&m, &[&x])[0].to_f64_vec();
        let xs = x.to_f64_vec();
        let row: usize = dims[axis..].iter().product();
        let mut want = Vec::with_capacity(n);
        for r in xs.chunks(row) {
            let max = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
            want.extend(r.iter().map(|v| if log { v - max - sum.ln() } else { (v - max).exp() / sum }));
        }
        assert_close(&got, &want, rtol, 1e-3);
    }

    /// `Split` with its part sizes as a run-time input (zero-sized parts included).
    #[test]
    fn split_sizes_computed_at_run_time(
        other in 1usize..4,
        sizes in proptest::collection::vec(0i64..4, 1..5),
        axis in 0usize..2,
        seed in any::<u64>(),
    ) {
        let mut sizes = sizes;
        sizes[0] += 1;
        let total = sizes.iter().sum::<i64>() as usize;
        let dims = if axis == 0 { vec![total, other] } else { vec![other, total] };
        let x = Tensor::from_vec(&dims, random_f32(total * other, seed)).unwrap();
        let split = Tensor::from_slice(&[sizes.len()], &sizes).unwrap();
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("y{i}")).collect();
        let outs: Vec<&str> = names.iter().map(String::as_str).collect();
        let m = model(
            vec![node("Split", &["x", "split"], &outs, vec![int("axis", axis as i64)])],
            vec![],
            vec![dynamic("x", F32, 2), value("split", I64, &[sizes.len() as i64])],
            outs.iter().map(|o| dynamic(o, F32, 2)).collect(),
            18,
        );
        let got = run(&m, &[&x, &split]);
        let xs = f32s(&x);
        let mut start = 0;
        for (part, &s) in got.iter().zip(&sizes) {
            let s = s as usize;
            let mut shape = dims.clone();
            shape[axis] = s;
            let want: Vec<f32> = indices(&shape)
                .iter()
                .map(|idx| {
                    let mut src = idx.clone();
                    src[axis] += start;
                    xs[src[0] * dims[1] + src[1]]
                })
                .collect();
            prop_assert_eq!(part.shape(), &shape[..]);
            prop_assert_eq!(f32s(part), want);
            start += s;
        }
    }

    /// Opset-13 `Slice` with starts, ends, axes and steps as run-time inputs, against the
    /// ONNX operator's definition.
    #[test]
    fn slice_parameters_computed_at_run_time(
        dims in proptest::collection::vec(1usize..6, 2),
        params in proptest::collection::vec((-8i64..8, -8i64..8, prop_oneof![-3i64..0, 1i64..4]), 1..=2),
        swap in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let n = params.len();
        let axes: Vec<i64> = if swap { (0..n as i64).rev().collect() } else { (0..n as i64).collect() };
        let starts: Vec<i64> = params.iter().map(|p| p.0).collect();
        let ends: Vec<i64> = params.iter().map(|p| p.1).collect();
        let steps: Vec<i64> = params.iter().map(|p| p.2).collect();
        let x = Tensor::from_vec(&dims, random_f32(dims[0] * dims[1], seed)).unwrap();
        let vec1 = |v: &[i64]| Tensor::from_slice(&[v.len()], v).unwrap();
        let ins = [x.clone(), vec1(&starts), vec1(&ends), vec1(&axes), vec1(&steps)];
        let m = model(
            vec![node("Slice", &["x", "s", "e", "a", "k"], &["y"], vec![])],
            vec![],
            vec![
                dynamic("x", F32, 2),
                value("s", I64, &[n as i64]),
                value("e", I64, &[n as i64]),
                value("a", I64, &[n as i64]),
                value("k", I64, &[n as i64]),
            ],
            vec![dynamic("y", F32, 2)],
            13,
        );
        let refs: Vec<&Tensor> = ins.iter().collect();
        let got = &run(&m, &refs)[0];
        let mut picks: Vec<Vec<usize>> = dims.iter().map(|&d| (0..d).collect()).collect();
        for i in 0..n {
            let axis = axes[i] as usize;
            let d = dims[axis] as i64;
            let wrap = |v: i64| if v < 0 { v + d } else { v };
            let (mut s, mut e) = (wrap(starts[i]), wrap(ends[i]));
            let step = steps[i];
            if step > 0 {
                s = s.clamp(0, d);
                e = e.clamp(0, d);
            } else {
                s = s.clamp(0, d - 1);
                e = e.clamp(-1, d - 1);
            }
            let mut taken = Vec::new();
            let mut j = s;
            while (step > 0 && j < e) || (step < 0 && j > e) {
                taken.push(j as usize);
                j += step;
            }
            picks[axis] = taken;
        }
        let xs = f32s(&x);
        let want: Vec<f32> = picks[0]
            .iter()
            .flat_map(|&r| picks[1].iter().map(move |&c| (r, c)))
            .map(|(r, c)| xs[r * dims[1] + c])
            .collect();
        prop_assert_eq!(got.shape(), &[picks[0].len(), picks[1].len()][..]);
        prop_assert_eq!(f32s(got), want);
    }

    /// Nearest `Upsample` of the last 1 to 3 axes of inputs of rank 1 to 5 (leading axes
    /// padded out to or folded into the plugin's N and C), against repeating elements.
    #[test]
    fn upsample_any_rank_repeats_elements(
        dims in dims_strategy(1..=5, 3),
        resized in 1usize..=3,
        factors in proptest::collection::vec(1i64..=3, 3),
        seed in any::<u64>(),
    ) {
        let rank = dims.len();
        let k = resized.min(rank);
        let mut scales = vec![1.0f32; rank];
        for i in 0..k {
            scales[rank - k + i] = factors[i] as f32;
        }
        let n: usize = dims.iter().product();
        let x = Tensor::from_vec(&dims, random_f32(n, seed)).unwrap();
        let m = model(
            vec![node("Upsample", &["x", "scales"], &["y"], vec![string("mode", "nearest")])],
            vec![f32_init("scales", &[rank as i64], &scales)],
            vec![dynamic("x", F32, rank)],
            vec![dynamic("y", F32, rank)],
            9,
        );
        let got = &run(&m, &[&x])[0];
        let out: Vec<usize> = dims.iter().zip(&scales).map(|(&d, &s)| d * s as usize).collect();
        let xs = f32s(&x);
        let st = strides(&dims);
        let want: Vec<f32> = indices(&out)
            .iter()
            .map(|idx| {
                let src: usize = idx.iter().zip(&scales).zip(&st).map(|((&i, &s), &t)| i / s as usize * t).sum();
                xs[src]
            })
            .collect();
        prop_assert_eq!(got.shape(), &out[..]);
        prop_assert_eq!(f32s(got), want);
    }

    /// Linear `Resize` (half-pixel coordinates) of the last axis of inputs of rank 1 to 4,
    /// against interpolating each row.
    #[test]
    fn resize_linear_last_axis_any_rank(
        dims in dims_strategy(1..=4, 4),
        scale in prop_oneof![Just(0.5f32), Just(1.5), Just(2.0), Just(3.0)],
        seed in any::<u64>(),
    ) {
        let rank = dims.len();
        prop_assume!(dims[rank - 1] as f32 * scale >= 1.0, "the plugin refuses empty outputs, as PyTorch does");
        let mut scales = vec![1.0f32; rank];
        scales[rank - 1] = scale;
        let n: usize = dims.iter().product();
        let x = Tensor::from_vec(&dims, random_f32(n, seed)).unwrap();
        let m = model(
            vec![node("Resize", &["x", "", "scales"], &["y"], vec![string("mode", "linear")])],
            vec![f32_init("scales", &[rank as i64], &scales)],
            vec![dynamic("x", F32, rank)],
            vec![dynamic("y", F32, rank)],
            19,
        );
        let got = &run(&m, &[&x])[0];
        let d = dims[rank - 1];
        let out = (d as f64 * f64::from(scale)).floor() as usize;
        let mut want = Vec::new();
        for row in x.to_f64_vec().chunks(d) {
            for i in 0..out {
                let c = ((i as f64 + 0.5) / f64::from(scale) - 0.5).clamp(0.0, (d - 1) as f64);
                let lo = c.floor() as usize;
                let hi = (lo + 1).min(d - 1);
                let w = c - lo as f64;
                want.push(row[lo] * (1.0 - w) + row[hi] * w);
            }
        }
        let mut shape = dims.clone();
        shape[rank - 1] = out;
        prop_assert_eq!(got.shape(), &shape[..]);
        assert_close(&got.to_f64_vec(), &want, 1e-5, 2.0);
    }

    /// `Pad` in constant and edge modes: opset-2 attributes and opset-18 inputs (with
    /// `axes`) give the reference result.
    #[test]
    fn pad_from_attributes_and_from_inputs(
        dims in dims_strategy(1..=3, 4),
        pads in proptest::collection::vec((0i64..3, 0i64..3), 3),
        edge in any::<bool>(),
        fill in -4.0f32..4.0,
        seed in any::<u64>(),
    ) {
        let rank = dims.len();
        let (begin, end): (Vec<i64>, Vec<i64>) = pads[..rank].iter().cloned().unzip();
        let all: Vec<i64> = begin.iter().chain(&end).cloned().collect();
        let mode = if edge { "edge" } else { "constant" };
        let n: usize = dims.iter().product();
        let x = Tensor::from_vec(&dims, random_f32(n, seed)).unwrap();
        let out: Vec<usize> = (0..rank).map(|i| dims[i] + (begin[i] + end[i]) as usize).collect();
        let xs = f32s(&x);
        let st = strides(&dims);
        let want: Vec<f32> = indices(&out)
            .iter()
            .map(|idx| {
                let mut src = 0;
                for i in 0..rank {
                    let j = idx[i] as i64 - begin[i];
                    if !(0..dims[i] as i64).contains(&j) && !edge {
                        return fill;
                    }
                    src += j.clamp(0, dims[i] as i64 - 1) as usize * st[i];
                }
                xs[src]
            })
            .collect();
        let old = model(
            vec![node("Pad", &["x"], &["y"], vec![string("mode", mode), ints("pads", &all), float("value", fill)])],
            vec![],
            vec![dynamic("x", F32, rank)],
            vec![dynamic("y", F32, rank)],
            2,
        );
        let axes: Vec<i64> = (0..rank as i64).rev().collect();
        let reversed: Vec<i64> = begin.iter().rev().chain(end.iter().rev()).cloned().collect();
        let new = model(
            vec![node("Pad", &["x", "pads", "value", "axes"], &["y"], vec![string("mode", mode)])],
            vec![
                i64_init("pads", &[2 * rank as i64], &reversed),
                f32_init("value", &[], &[fill]),
                i64_init("axes", &[rank as i64], &axes),
            ],
            vec![dynamic("x", F32, rank)],
            vec![dynamic("y", F32, rank)],
            18,
        );
        for m in [&old, &new] {
            let got = &run(m, &[&x])[0];
            prop_assert_eq!(got.shape(), &out[..]);
            prop_assert_eq!(f32s(got), want.clone());
        }
    }

    /// `Range` of run-time i64 scalars has `max(⌈(limit − start)/delta⌉, 0)` elements.
    #[test]
    fn range_of_run_time_scalars(start in -20i64..20, limit in -20i64..20, delta in prop_oneof![-5i64..0, 1i64..6]) {
        let m = model(
            vec![node("Range", &["s", "l", "d"], &["y"], vec![])],
            vec![],
            vec![value("s", I64, &[]), value("l", I64, &[]), value("d", I64, &[])],
            vec![dynamic("y", I64, 1)],
            11,
        );
        let scalars = [Tensor::scalar(start), Tensor::scalar(limit), Tensor::scalar(delta)];
        let got = run(&m, &[&scalars[0], &scalars[1], &scalars[2]])[0].to_i64_vec().unwrap();
        let mut want = Vec::new();
        let mut v = start;
        while (delta > 0 && v < limit) || (delta < 0 && v > limit) {
            want.push(v);
            v += delta;
        }
        prop_assert_eq!(got, want);
    }
}

/// Shapes taken from a dynamic input drive `Expand`, `Tile` and `Range`, and `NonZero`'s
/// data-dependent count flows through `Transpose` into `GatherND`, in one engine run at two
/// input shapes.
#[test]
fn run_time_shapes_drive_expand_tile_range_and_non_zero() {
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Expand", &["c", "s"], &["e"], vec![]),
            node("Add", &["x", "e"], &["shifted"], vec![]),
            node("Gather", &["s", "one"], &["b"], vec![int("axis", 0)]),
            node("Concat", &["b", "one"], &["reps"], vec![int("axis", 0)]),
            node("Tile", &["x", "reps"], &["tiled"], vec![]),
            node("Gather", &["s", "zero"], &["a"], vec![int("axis", 0)]),
            node("Range", &["zero", "a", "one"], &["rows"], vec![]),
            node("Greater", &["x", "c0"], &["positive"], vec![]),
            node("NonZero", &["positive"], &["nz"], vec![]),
            node(
                "Transpose",
                &["nz"],
                &["coords"],
                vec![ints("perm", &[1, 0])],
            ),
            node("GatherND", &["x", "coords"], &["picked"], vec![]),
        ],
        vec![
            f32_init("c", &[1], &[2.5]),
            f32_init("c0", &[], &[0.0]),
            i64_init("one", &[1], &[1]),
            i64_init("zero", &[], &[0]),
        ],
        vec![dynamic("x", F32, 2)],
        vec![
            dynamic("shifted", F32, 2),
            dynamic("tiled", F32, 2),
            dynamic("rows", I64, 1),
            dynamic("picked", F32, 1),
        ],
        18,
    );
    let engine = compile(&m).expect("the model compiles");
    for (a, b, seed) in [(3usize, 4usize, 1u64), (5, 2, 2)] {
        let values = random_f32(a * b, seed);
        let x = Tensor::from_vec(&[a, b], values.clone()).unwrap();
        let got = engine
            .create_context()
            .unwrap()
            .execute(&[&x])
            .expect("the engine runs");
        let shifted: Vec<f32> = values.iter().map(|v| v + 2.5).collect();
        assert_eq!((got[0].shape(), f32s(&got[0])), (&[a, b][..], shifted));
        let tiled: Vec<f32> = (0..a * b)
            .flat_map(|r| values[(r % a) * b..(r % a + 1) * b].to_vec())
            .collect();
        assert_eq!(got[1].shape(), &[a * b, b][..]);
        assert_eq!(f32s(&got[1]), tiled);
        assert_eq!(
            got[2].to_i64_vec().unwrap(),
            (0..a as i64).collect::<Vec<_>>()
        );
        let picked: Vec<f32> = values.iter().copied().filter(|&v| v > 0.0).collect();
        assert_eq!(f32s(&got[3]), picked);
    }
}

/// Inference `Dropout` passes the input through and gives an all-true mask of its shape.
#[test]
fn dropout_mask_is_all_true() {
    let m = model(
        vec![node("Dropout", &["x"], &["y", "mask"], vec![])],
        vec![],
        vec![dynamic("x", F32, 3)],
        vec![dynamic("y", F32, 3), dynamic("mask", 9, 3)],
        13,
    );
    let x = Tensor::from_vec(&[2, 3, 4], random_f32(24, 7)).unwrap();
    let outs = run(&m, &[&x]);
    assert_eq!(f32s(&outs[0]), f32s(&x));
    assert_eq!(outs[1].shape(), &[2, 3, 4]);
    assert!(outs[1].bytes().iter().all(|&b| b == 1), "mask {}", outs[1]);
}

/// `Dropout` with a constant `training_mode` of true is the identity when the ratio is 0,
/// and refused otherwise.
#[test]
fn dropout_training_mode_known_at_import_time() {
    let training = TensorProto {
        name: Some("t".into()),
        data_type: Some(9),
        int32_data: vec![1],
        ..TensorProto::default()
    };
    let with_ratio = |r: f32| {
        model(
            vec![node("Dropout", &["x", "r", "t"], &["y"], vec![])],
            vec![f32_init("r", &[], &[r]), training.clone()],
            vec![dynamic("x", F32, 2)],
            vec![dynamic("y", F32, 2)],
            13,
        )
    };
    let x = Tensor::from_vec(&[3, 5], random_f32(15, 11)).unwrap();
    assert_eq!(f32s(&run(&with_ratio(0.0), &[&x])[0]), f32s(&x));
    let e = import_error(&with_ratio(0.5));
    assert!(e.contains("training mode"), "{e}");
}

/// `F.interpolate(y, size=x.shape[-2:]) + x` exported with every dim dynamic: the sizes are
/// computed in the graph, so the Interpolate plugin takes them as a shape input. One engine
/// runs at several batch and image sizes; nearest sampling with asymmetric coordinates
/// rounding down is `out[i] = y[floor(i·h/H)]`, computed here independently.
#[test]
fn resize_to_a_computed_size_compiles_once_and_runs_at_each_size() {
    let m = model(
        vec![
            node("Shape", &["x"], &["sx"], vec![int("start", 2)]),
            node("Shape", &["y"], &["sy"], vec![int("end", 2)]),
            node("Concat", &["sy", "sx"], &["sizes"], vec![int("axis", 0)]),
            node(
                "Resize",
                &["y", "", "", "sizes"],
                &["up"],
                vec![
                    string("mode", "nearest"),
                    string("coordinate_transformation_mode", "asymmetric"),
                    string("nearest_mode", "floor"),
                ],
            ),
            node("Add", &["up", "x"], &["out"], vec![]),
        ],
        vec![],
        vec![dynamic("x", F32, 4), dynamic("y", F32, 4)],
        vec![dynamic("out", F32, 4)],
        18,
    );
    torchtrt::init_plugins().unwrap();
    let options = ImportOptions {
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    };
    let net = import_model(&m, None, torchtrt::registry(), &options).unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let mut context = engine.create_context().unwrap();
    for (seed, [n, c, big_h, big_w, h, w]) in
        [[1, 2, 8, 6, 3, 4], [2, 3, 5, 7, 5, 2], [1, 1, 9, 9, 4, 4]]
            .into_iter()
            .enumerate()
    {
        let seed = seed as u64;
        let x = Tensor::from_vec(
            &[n, c, big_h, big_w],
            random_f32(n * c * big_h * big_w, seed),
        )
        .unwrap();
        let y = Tensor::from_vec(&[n, c, h, w], random_f32(n * c * h * w, seed + 10)).unwrap();
        let out = &context.execute(&[&x, &y]).unwrap()[0];
        assert_eq!(out.shape(), [n, c, big_h, big_w]);
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let mut want = Vec::with_capacity(xs.len());
        for p in 0..n * c {
            for i in 0..big_h {
                for j in 0..big_w {
                    let (si, sj) = (i * h / big_h, j * w / big_w);
                    want.push(ys[(p * h + si) * w + sj] + xs[(p * big_h + i) * big_w + j]);
                }
            }
        }
        assert_close(&out.to_f64_vec(), &want, 1e-6, 1e-6);
    }
}

/// Runtime scales: `Resize` by a scales input of the graph, against the same model with the
/// scales as an initializer (whose import-time path the node suite checks).
#[test]
fn resize_by_run_time_scales_matches_import_time_scales() {
    let resize = |inputs: Vec<ValueInfoProto>, inits: Vec<TensorProto>| {
        model(
            vec![node(
                "Resize",
                &["x", "", "scales"],
                &["y"],
                vec![string("mode", "linear")],
            )],
            inits,
            inputs,
            vec![dynamic("y", F32, 4)],
            19,
        )
    };
    let x = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 3)).unwrap();
    for scales in [[1.0f32, 1.0, 2.0, 0.5], [1.0, 1.0, 0.6, 1.75]] {
        let s = Tensor::from_vec(&[4], scales.to_vec()).unwrap();
        let dynamic_model = resize(
            vec![dynamic("x", F32, 4), value("scales", F32, &[4])],
            vec![],
        );
        let got = run(&dynamic_model, &[&x, &s]);
        let frozen = resize(
            vec![dynamic("x", F32, 4)],
            vec![f32_init("scales", &[4], &scales)],
        );
        let want = run(&frozen, &[&x]);
        assert_eq!(got[0].shape(), want[0].shape());
        assert_eq!(f32s(&got[0]), f32s(&want[0]));
    }
    let bad = Tensor::from_vec(&[4], vec![2.0f32, 1.0, 2.0, 2.0]).unwrap();
    let m = resize(
        vec![dynamic("x", F32, 4), value("scales", F32, &[4])],
        vec![],
    );
    let e = compile(&m)
        .unwrap()
        .create_context()
        .unwrap()
        .execute(&[&x, &bad])
        .unwrap_err()
        .to_string();
    assert!(e.contains("scale 2 for axis 0"), "{e}");
}

fn import_error(m: &ModelProto) -> String {
    match compile(m) {
        Ok(_) => panic!("the model was accepted"),
        Err(e) => e,
    }
}

/// Unsupported inputs are errors that name the node and what is wrong.
#[test]
fn unsupported_nodes_are_named_errors() {
    let x = || vec![dynamic("x", F32, 4)];
    let y = || vec![dynamic("y", F32, 4)];
    let resize = model(
        vec![node(
            "Resize",
            &["x", "", "scales"],
            &["y"],
            vec![ints("axes", &[0, 1])],
        )],
        vec![],
        vec![dynamic("x", F32, 4), value("scales", F32, &[2])],
        y(),
        19,
    );
    let e = import_error(&resize);
    assert!(
        e.contains("Resize") && e.contains("scales for axes [0, 1]"),
        "{e}"
    );

    let cast = model(
        vec![node("Cast", &["x"], &["y"], vec![int("to", 17)])],
        vec![],
        x(),
        y(),
        19,
    );
    let e = import_error(&cast);
    assert!(
        e.contains("attribute `to`") && e.contains("FLOAT8E4M3FN"),
        "{e}"
    );

    let mut text = string("value_string", "hello");
    text.r#type = Some(AttributeType::String as i32);
    let constant = model(
        vec![node("Constant", &[], &["y"], vec![text])],
        vec![],
        vec![],
        y(),
        13,
    );
    let e = import_error(&constant);
    assert!(e.contains("string tensors"), "{e}");

    let dropout = model(
        vec![node("Dropout", &["x", "r", "t"], &["y"], vec![])],
        vec![],
        vec![
            dynamic("x", F32, 4),
            value("r", F32, &[]),
            value("t", 9, &[]),
        ],
        y(),
        13,
    );
    let e = import_error(&dropout);
    assert!(e.contains("training_mode"), "{e}");

    let split = model(
        vec![node("Split", &["x"], &["a", "b"], vec![])],
        vec![],
        x(),
        y(),
        13,
    );
    let e = import_error(&split);
    assert!(e.contains("Split") && e.contains("needs `split`"), "{e}");
}
