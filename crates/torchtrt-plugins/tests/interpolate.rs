//! `torch_tensorrt::Interpolate@1` against a plain scalar reference on random shapes,
//! modes, options and dtypes; symbolic shapes; field errors; serialization round trips.

#[path = "common/interp_ref.rs"]
mod interp_ref;

use half::{bf16, f16};
use interp_ref::Spec;
use proptest::prelude::*;
use torchtrt_plugin_api::{
    CpuLaunch, CudaLaunch, DType, DeviceKind, DimExpr, FieldCollection, HostTensor, HostTensorMut,
    Launch, Plugin, PluginError, PortDesc, TensorDesc, create_plugin,
};
use torchtrt_plugins::interpolate::InterpolateCreator;

/// A tensor's elements in one of the three dtypes.
enum Buf {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

impl Buf {
    fn from_f32(dtype: DType, x: &[f32]) -> Buf {
        match dtype {
            DType::F16 => Buf::F16(x.iter().map(|&v| f16::from_f32(v)).collect()),
            DType::BF16 => Buf::BF16(x.iter().map(|&v| bf16::from_f32(v)).collect()),
            _ => Buf::F32(x.to_vec()),
        }
    }

    /// `n` elements of the shared sentinel (a NaN), for an output the plugin must write.
    fn sentinel(dtype: DType, n: usize) -> Buf {
        let mut b = Buf::from_f32(dtype, &vec![0.0; n]);
        b.bytes_mut().fill(torchtrt_testing::sentinel::FLOAT_BYTE);
        b
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Buf::F32(v) => bytemuck::cast_slice(v),
            Buf::F16(v) => bytemuck::cast_slice(v),
            Buf::BF16(v) => bytemuck::cast_slice(v),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Buf::F32(v) => bytemuck::cast_slice_mut(v),
            Buf::F16(v) => bytemuck::cast_slice_mut(v),
            Buf::BF16(v) => bytemuck::cast_slice_mut(v),
        }
    }

    fn values(&self) -> Vec<f64> {
        match self {
            Buf::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Buf::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Buf::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        }
    }
}

/// Relative tolerance per dtype (values are O(1)).
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 1e-2,
        DType::BF16 => 2e-2,
        _ => 1e-5,
    }
}

/// `got` against `want` with the shared comparison: within `tol` relative to each element,
/// with `tol` as the absolute floor (the inputs are in [-1, 1)).
fn close(got: &[f64], want: &[f64], tol: f64) -> Result<(), torchtrt_testing::Mismatch> {
    torchtrt_testing::check_floats(got, want, torchtrt_testing::Tol::new(tol, tol))
}

/// Random values in [-1, 1) from a seed (never all zeros).
fn random_data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn creator() -> InterpolateCreator {
    InterpolateCreator
}

/// What one run gives: the output shape, the input as the dtype rounded it, the output.
type Ran = (Vec<usize>, Vec<f64>, Vec<f64>);

/// Creates, shapes, configures and runs a plugin.
fn run(
    fields: &FieldCollection,
    dtype: DType,
    shape: &[usize],
    data: &[f32],
    threads: usize,
) -> Result<Ran, PluginError> {
    let mut plugin = create_plugin(&creator(), "interp", fields)?;
    run_plugin(plugin.as_mut(), dtype, shape, data, threads)
}

fn run_plugin(
    plugin: &mut dyn Plugin,
    dtype: DType,
    shape: &[usize],
    data: &[f32],
    threads: usize,
) -> Result<Ran, PluginError> {
    let in_shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let exprs: Vec<DimExpr> = in_shape.iter().map(|&d| DimExpr::Const(d)).collect();
    let out_exprs = plugin.output_shapes(&[exprs])?;
    let out_shape: Vec<i64> = out_exprs[0]
        .iter()
        .map(|d| d.as_const().expect("constant input shape folds"))
        .collect();
    assert_eq!(plugin.output_dtypes(&[dtype])?, vec![dtype]);
    let in_desc = TensorDesc::new(dtype, in_shape.clone());
    let out_desc = TensorDesc::new(dtype, out_shape.clone());
    plugin.configure(
        std::slice::from_ref(&in_desc),
        std::slice::from_ref(&out_desc),
    )?;
    let input = Buf::from_f32(dtype, data);
    let out_len: usize = out_shape.iter().map(|&d| d as usize).product();
    let mut output = Buf::sentinel(dtype, out_len);
    let inputs = [HostTensor {
        desc: in_desc,
        data: input.bytes(),
    }];
    let mut outputs = [HostTensorMut {
        desc: out_desc,
        data: output.bytes_mut(),
    }];
    plugin.enqueue(Launch::Cpu(CpuLaunch {
        inputs: &inputs,
        outputs: &mut outputs,
        workspace: &mut [],
        threads,
    }))?;
    let out_shape = out_shape.iter().map(|&d| d as usize).collect();
    Ok((out_shape, input.values(), output.values()))
}

/// How the output size is given.
#[derive(Clone, Debug)]
enum Size {
    Sizes(Vec<usize>),
    /// Scales as exact fractions `p/q`.
    Scales(Vec<(usize, usize)>),
}

/// One randomly drawn case.
#[derive(Clone, Debug)]
struct Case {
    spec: Spec,
    shape: Vec<usize>,
    size: Size,
    dtype: DType,
    threads: usize,
    seed: u64,
}

impl Case {
    fn fields(&self) -> FieldCollection {
        let s = &self.spec;
        let mut f = FieldCollection::new()
            .with("mode", s.mode.as_str())
            .with("align_corners", i32::from(s.align_corners))
            .with("coordinate_transformation_mode", s.coord.as_str())
            .with("nearest_mode", s.nearest.as_str())
            .with("cubic_coeff_a", s.cubic_a as f32)
            .with("exclude_outside", i32::from(s.exclude_outside))
            .with("antialias", i32::from(s.antialias));
        match &self.size {
            Size::Sizes(v) => f.set("out_size", v.iter().map(|&d| d as i64).collect::<Vec<_>>()),
            Size::Scales(v) => {
                f.set(
                    "scales",
                    v.iter()
                        .map(|&(p, q)| p as f64 / q as f64)
                        .collect::<Vec<_>>(),
                );
                f.set("use_scales", 1i32);
            }
        }
        f
    }

    /// The expected spatial output size: the sizes, or `floor(in·p/q)` exactly.
    fn out_size(&self) -> Vec<usize> {
        match &self.size {
            Size::Sizes(v) => v.clone(),
            Size::Scales(v) => v
                .iter()
                .zip(&self.shape[2..])
                .map(|(&(p, q), &d)| d * p / q)
                .collect(),
        }
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let n: usize = self.shape.iter().product();
        let data = random_data(self.seed, n);
        let (out_shape, x, got) = run(&self.fields(), self.dtype, &self.shape, &data, self.threads)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let out = self.out_size();
        prop_assert_eq!(&out_shape[..2], &self.shape[..2]);
        prop_assert_eq!(&out_shape[2..], &out[..]);
        let mut spec = self.spec.clone();
        spec.scales = match &self.size {
            Size::Scales(v) => Some(v.iter().map(|&(p, q)| p as f64 / q as f64).collect()),
            Size::Sizes(_) => None,
        };
        spec.cubic_a = f64::from(spec.cubic_a as f32);
        let want = interp_ref::resize(&spec, &self.shape, &x, &out);
        let tol = tolerance(self.dtype);
        close(&got, &want, tol).map_err(|m| TestCaseError::fail(m.in_shape(&out_shape).to_string()))
    }
}

const COORDS: [&str; 7] = [
    "",
    "half_pixel",
    "asymmetric",
    "pytorch_half_pixel",
    "align_corners",
    "tf_half_pixel_for_nn",
    "half_pixel_symmetric",
];
const NEAREST: [&str; 5] = [
    "",
    "round_prefer_floor",
    "round_prefer_ceil",
    "floor",
    "ceil",
];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Shapes with `k` spatial dims of length 1..=max, sizes likewise, or scales p/q.
fn geometry(k: usize) -> impl Strategy<Value = (Vec<usize>, Size)> {
    let max: usize = if k == 3 { 7 } else { 12 };
    (
        1..=2usize,
        1..=3usize,
        prop::collection::vec(1..=max, k),
        prop::collection::vec(1..=max, k),
        prop::collection::vec(
            (
                1..=24usize,
                prop::sample::select(vec![1usize, 2, 3, 4, 5, 8]),
            ),
            k,
        ),
        any::<bool>(),
    )
        .prop_map(|(n, c, spatial, sizes, ratios, use_scales)| {
            let mut shape = vec![n, c];
            shape.extend(&spatial);
            let size = if use_scales {
                let fixed = ratios
                    .iter()
                    .zip(&spatial)
                    .map(|(&(p, q), &d)| {
                        let p = 1 + (p - 1) % (3 * q);
                        if d * p / q == 0 { (q, q) } else { (p, q) }
                    })
                    .collect();
                Size::Scales(fixed)
            } else {
                Size::Sizes(sizes)
            };
            (shape, size)
        })
}

/// Everything but the mode-specific options.
fn case(modes: &'static [(&'static str, usize)]) -> impl Strategy<Value = Case> {
    prop::sample::select(modes.to_vec()).prop_flat_map(|(mode, k)| {
        (
            geometry(k),
            prop::sample::select(DTYPES.to_vec()),
            prop::sample::select(vec![1usize, 4]),
            any::<u64>(),
        )
            .prop_map(move |((shape, size), dtype, threads, seed)| Case {
                spec: Spec::new(mode),
                shape,
                size,
                dtype,
                threads,
                seed,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn nearest_matches_reference(
        mut c in case(&[("nearest", 1), ("nearest", 2), ("nearest", 3)]),
        coord in prop::sample::select(COORDS.to_vec()),
        nearest in prop::sample::select(NEAREST.to_vec()),
    ) {
        c.spec.coord = coord.to_string();
        c.spec.nearest = nearest.to_string();
        c.check()?;
    }

    #[test]
    fn linear_matches_reference(
        mut c in case(&[("linear", 1), ("bilinear", 2), ("trilinear", 3)]),
        coord in prop::sample::select(COORDS.to_vec()),
        align_corners in any::<bool>(),
        exclude_outside in any::<bool>(),
        antialias in any::<bool>(),
    ) {
        c.spec.coord = coord.to_string();
        c.spec.align_corners = align_corners && (coord.is_empty() || coord == "align_corners");
        c.spec.exclude_outside = exclude_outside;
        c.spec.antialias = antialias;
        c.check()?;
    }

    #[test]
    fn cubic_matches_reference(
        mut c in case(&[("bicubic", 2)]),
        coord in prop::sample::select(COORDS.to_vec()),
        align_corners in any::<bool>(),
        exclude_outside in any::<bool>(),
        antialias in any::<bool>(),
        a in prop::sample::select(vec![-0.75f64, -0.5, -0.6]),
    ) {
        c.spec.coord = coord.to_string();
        c.spec.align_corners = align_corners && (coord.is_empty() || coord == "align_corners");
        c.spec.exclude_outside = exclude_outside;
        c.spec.antialias = antialias;
        c.spec.cubic_a = a;
        c.check()?;
    }

    #[test]
    fn adaptive_pools_match_reference(
        mut c in case(&[
            ("adaptive_avg_pool1d", 1), ("adaptive_avg_pool2d", 2), ("adaptive_avg_pool3d", 3),
            ("adaptive_max_pool1d", 1), ("adaptive_max_pool2d", 2), ("adaptive_max_pool3d", 3),
        ]),
    ) {
        if let Size::Scales(v) = &c.size {
            c.size = Size::Sizes(v.iter().zip(&c.shape[2..]).map(|(&(p, q), &d)| d * p / q).collect());
        }
        c.check()?;
    }

    #[test]
    fn symbolic_output_shapes_match_concrete(
        k in 1..=3usize,
        ratios in prop::collection::vec((1..=24i64, 1..=12i64), 3),
        dims in prop::collection::vec(1..=200i64, 3),
    ) {
        let scales: Vec<f64> = ratios[..k].iter().map(|&(p, q)| p as f64 / q as f64).collect();
        let fields = FieldCollection::new()
            .with("mode", "nearest")
            .with("scales", scales)
            .with("use_scales", 1i32);
        let plugin = create_plugin(&creator(), "interp", &fields)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let names = ["d", "h", "w"];
        let mut sym = vec![DimExpr::sym("n"), DimExpr::Const(3)];
        sym.extend(names[..k].iter().map(|s| DimExpr::sym(s)));
        let out = plugin.output_shapes(&[sym]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let bind = |s: &str| names.iter().position(|&n| n == s).map(|i| dims[i]).or((s == "n").then_some(2));
        prop_assert_eq!(out[0][0].eval(&bind), Ok(2));
        prop_assert_eq!(out[0][1].clone(), DimExpr::Const(3));
        for a in 0..k {
            let (p, q) = ratios[a];
            prop_assert_eq!(out[0][2 + a].eval(&bind), Ok(dims[a] * p / q));
        }
    }

    #[test]
    fn serialize_recreate_gives_identical_output(c in case(&[
        ("nearest", 2), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3), ("adaptive_avg_pool2d", 2),
    ]), coord in prop::sample::select(COORDS.to_vec())) {
        let mut c = c;
        if !c.spec.mode.starts_with("adaptive") {
            c.spec.coord = coord.to_string();
        } else if let Size::Scales(v) = &c.size {
            c.size = Size::Sizes(v.iter().zip(&c.shape[2..]).map(|(&(p, q), &d)| d * p / q).collect());
        }
        let first = create_plugin(&creator(), "a", &c.fields()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let saved = first.fields_to_serialize();
        let mut second = create_plugin(&creator(), "b", &saved).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(second.fields_to_serialize(), saved);
        let mut first = first.clone_plugin();
        let data = random_data(c.seed, c.shape.iter().product());
        let a = run_plugin(first.as_mut(), c.dtype, &c.shape, &data, c.threads).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = run_plugin(second.as_mut(), c.dtype, &c.shape, &data, c.threads).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(a, b);
    }
}

/// Fields for `mode` with explicit sizes.
fn sized(mode: &str, sizes: &[i64]) -> FieldCollection {
    FieldCollection::new()
        .with("mode", mode)
        .with("out_size", sizes.to_vec())
}

/// The field named by an error about a field, if it is one.
fn field_of(e: &PluginError) -> Option<&str> {
    match e {
        PluginError::InvalidField { field, .. }
        | PluginError::MissingField { field, .. }
        | PluginError::UnknownField { field, .. }
        | PluginError::WrongFieldType { field, .. }
        | PluginError::WrongFieldLength { field, .. } => Some(field),
        _ => None,
    }
}

fn create_err(fields: &FieldCollection) -> PluginError {
    match create_plugin(&creator(), "bad", fields) {
        Ok(_) => panic!("fields {fields:?} were accepted"),
        Err(e) => e,
    }
}

#[test]
fn bad_fields_name_the_field() {
    let cases: Vec<(FieldCollection, &str)> = vec![
        (sized("bilinearr", &[4, 4]), "mode"),
        (FieldCollection::new().with("out_size", vec![4i64]), "mode"),
        (sized("bilinear", &[4, 0]), "out_size"),
        (sized("bilinear", &[4, -2]), "out_size"),
        (sized("bilinear", &[4, 4, 4]), "out_size"),
        (sized("linear", &[4, 4]), "out_size"),
        (sized("trilinear", &[4]), "out_size"),
        (sized("bicubic", &[4]), "out_size"),
        (sized("adaptive_avg_pool3d", &[4, 4]), "out_size"),
        (sized("nearest", &[1, 2, 3, 4]), "out_size"),
        (FieldCollection::new().with("mode", "nearest"), "out_size"),
        (
            FieldCollection::new()
                .with("mode", "nearest")
                .with("scales", vec![2.0f64]),
            "out_size",
        ),
        (
            sized("nearest", &[4])
                .with("scales", vec![2.0f64])
                .with("use_scales", 1i32),
            "out_size",
        ),
        (sized("nearest", &[4]).with("use_scales", 1i32), "scales"),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("scales", vec![2.0f64, -1.0])
                .with("use_scales", 1i32),
            "scales",
        ),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("scales", vec![2.0f64, f64::NAN])
                .with("use_scales", 1i32),
            "scales",
        ),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("scales", vec![2.0f64])
                .with("use_scales", 1i32),
            "scales",
        ),
        (
            FieldCollection::new()
                .with("mode", "adaptive_max_pool1d")
                .with("scales", vec![0.5f64])
                .with("use_scales", 1i32),
            "use_scales",
        ),
        (
            sized("nearest", &[4]).with("align_corners", 1i32),
            "align_corners",
        ),
        (
            sized("adaptive_avg_pool1d", &[4]).with("align_corners", 1i32),
            "align_corners",
        ),
        (
            sized("linear", &[4]).with("align_corners", 2i32),
            "align_corners",
        ),
        (
            sized("linear", &[4]).with("use_scales", -1i32),
            "use_scales",
        ),
        (
            sized("linear", &[4])
                .with("align_corners", 1i32)
                .with("coordinate_transformation_mode", "half_pixel"),
            "align_corners",
        ),
        (
            sized("linear", &[4]).with("coordinate_transformation_mode", "tf_crop_and_resize"),
            "roi_input",
        ),
        (sized("linear", &[4]).with("roi_input", 1i32), "roi_input"),
        (
            sized("linear", &[4]).with("coordinate_transformation_mode", "bogus"),
            "coordinate_transformation_mode",
        ),
        (
            sized("adaptive_avg_pool1d", &[4]).with("coordinate_transformation_mode", "half_pixel"),
            "coordinate_transformation_mode",
        ),
        (
            sized("nearest", &[4]).with("nearest_mode", "round"),
            "nearest_mode",
        ),
        (
            sized("bicubic", &[4, 4]).with("cubic_coeff_a", f32::INFINITY),
            "cubic_coeff_a",
        ),
        (sized("nearest", &[4]).with("antialias", 1i32), "antialias"),
        (
            sized("linear", &[4]).with("exclude_outside", 3i32),
            "exclude_outside",
        ),
        (
            sized("linear", &[4]).with("out_size", vec![4i32]),
            "out_size",
        ),
        (sized("linear", &[4]).with("bogus", 1i32), "bogus"),
        (
            sized("linear", &[4]).with("align_corners", vec![0i32, 1]),
            "align_corners",
        ),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("out_shape", vec![1i32, 3, 8]),
            "out_shape",
        ),
        (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("out_shape", vec![1i32, 3]),
            "out_shape",
        ),
    ];
    for (fields, field) in cases {
        let e = create_err(&fields);
        assert_eq!(field_of(&e), Some(field), "fields {fields:?}: {e}");
        assert!(
            e.to_string().contains("torch_tensorrt::Interpolate@1"),
            "{e}"
        );
    }
}

#[test]
fn out_shape_supplies_the_size_when_out_size_is_absent() {
    let fields = FieldCollection::new()
        .with("mode", "bilinear")
        .with("in_shape", vec![1i32, 1, 2, 2])
        .with("out_shape", vec![1i32, 1, 3, 5]);
    let data = random_data(7, 4);
    let (shape, _, _) = run(&fields, DType::F32, &[1, 1, 2, 2], &data, 1).expect("runs");
    assert_eq!(shape, vec![1, 1, 3, 5]);
    let plugin = create_plugin(&creator(), "x", &fields).expect("creates");
    let saved = plugin.fields_to_serialize();
    assert_eq!(saved.i64s("out_size"), Some(&[3i64, 5][..]));
    assert!(!saved.contains("out_shape"));
}

#[test]
fn bilinear_matches_pytorch_example() {
    let data = [1.0f32, 2.0, 3.0, 4.0];
    let (shape, _, got) = run(
        &sized("bilinear", &[4, 4]),
        DType::F32,
        &[1, 1, 2, 2],
        &data,
        1,
    )
    .expect("runs");
    assert_eq!(shape, vec![1, 1, 4, 4]);
    let want = [
        1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0,
    ];
    assert_eq!(got, want.to_vec());
}

#[test]
fn scales_are_read_as_exact_fractions() {
    let plugin = create_plugin(
        &creator(),
        "x",
        &FieldCollection::new()
            .with("mode", "nearest")
            .with("scales", vec![0.29f64, 1.0 / 3.0])
            .with("use_scales", 1i32),
    )
    .expect("creates");
    let out = plugin
        .output_shapes(&[vec![
            DimExpr::Const(1),
            DimExpr::Const(1),
            DimExpr::Const(100),
            DimExpr::sym("w"),
        ]])
        .expect("shapes");
    assert_eq!(out[0][2], DimExpr::Const(29));
    assert_eq!(out[0][3].eval(&|_| Some(3)), Ok(1));
    assert_eq!(out[0][3].eval(&|_| Some(300)), Ok(100));
}

#[test]
fn large_planes_split_across_threads_match_reference() {
    let cases: [(&str, Vec<usize>, Vec<i64>); 4] = [
        ("bilinear", vec![1, 1, 301, 250], vec![602, 500]),
        ("nearest", vec![1, 2, 200, 170], vec![401, 333]),
        ("trilinear", vec![1, 1, 40, 41, 42], vec![80, 82, 84]),
        ("adaptive_max_pool2d", vec![2, 1, 300, 450], vec![7, 9]),
    ];
    for (mode, shape, out) in cases {
        let data = random_data(11, shape.iter().product());
        let fields = sized(mode, &out);
        let (_, x, one) = run(&fields, DType::F32, &shape, &data, 1).expect("runs");
        let (_, _, many) = run(&fields, DType::F32, &shape, &data, 8).expect("runs");
        assert_eq!(one, many, "{mode}");
        let out: Vec<usize> = out.iter().map(|&d| d as usize).collect();
        let want = interp_ref::resize(&Spec::new(mode), &shape, &x, &out);
        close(&one, &want, 1e-5).unwrap_or_else(|m| panic!("{mode}: {m}"));
    }
}

#[test]
fn adaptive_pools_with_non_dividing_sizes() {
    let shape = [2usize, 3, 30, 45];
    let data = random_data(5, shape.iter().product());
    for mode in ["adaptive_avg_pool2d", "adaptive_max_pool2d"] {
        let (out_shape, x, got) =
            run(&sized(mode, &[7, 7]), DType::F32, &shape, &data, 4).expect("runs");
        assert_eq!(out_shape, vec![2, 3, 7, 7]);
        let want = interp_ref::resize(&Spec::new(mode), &shape, &x, &[7, 7]);
        close(&got, &want, 1e-5).unwrap_or_else(|m| panic!("{mode}: {m}"));
    }
}

#[test]
fn shape_and_launch_errors() {
    let mut plugin = create_plugin(&creator(), "l", &sized("bilinear", &[4, 4])).expect("creates");
    let rank3 = vec![DimExpr::Const(1), DimExpr::Const(1), DimExpr::Const(4)];
    assert!(matches!(
        plugin.output_shapes(&[rank3]),
        Err(PluginError::InvalidInput(_))
    ));
    assert!(matches!(
        plugin.output_dtypes(&[DType::I32]),
        Err(PluginError::Unsupported(_))
    ));
    assert!(plugin.output_dtypes(&[DType::F32, DType::F32]).is_err());
    let good_in = TensorDesc::new(DType::F32, vec![1, 2, 3, 3]);
    let good_out = TensorDesc::new(DType::F32, vec![1, 2, 4, 4]);
    assert!(
        plugin
            .configure(
                std::slice::from_ref(&good_in),
                std::slice::from_ref(&good_out)
            )
            .is_ok()
    );
    let dynamic = TensorDesc::new(DType::F32, vec![-1, 2, -1, 3]);
    assert!(
        plugin
            .configure(
                &[dynamic],
                &[TensorDesc::new(DType::F32, vec![-1, 2, 4, 4])]
            )
            .is_ok()
    );
    let wrong_out = TensorDesc::new(DType::F32, vec![1, 2, 4, 5]);
    assert!(matches!(
        plugin.configure(std::slice::from_ref(&good_in), &[wrong_out]),
        Err(PluginError::InvalidInput(_))
    ));
    let wrong_c = TensorDesc::new(DType::F32, vec![1, 3, 4, 4]);
    assert!(
        plugin
            .configure(std::slice::from_ref(&good_in), &[wrong_c])
            .is_err()
    );
    let f16_out = TensorDesc::new(DType::F16, vec![1, 2, 4, 4]);
    assert!(
        plugin
            .configure(std::slice::from_ref(&good_in), &[f16_out])
            .is_err()
    );
    let empty = TensorDesc::new(DType::F32, vec![1, 2, 0, 3]);
    assert!(
        plugin
            .configure(&[empty], std::slice::from_ref(&good_out))
            .is_err()
    );

    let cuda = plugin.enqueue(Launch::Cuda(CudaLaunch {
        inputs: &[],
        outputs: &[],
        workspace: 0,
        device: 0,
        stream: std::ptr::null_mut(),
        runtime: &torchtrt_plugin_api::NoCudaRuntime,
        shape_values: &[],
    }));
    assert!(cuda.is_err());

    let input = Buf::from_f32(DType::F32, &random_data(3, 17));
    let mut output = Buf::sentinel(DType::F32, 32);
    let inputs = [HostTensor {
        desc: good_in,
        data: input.bytes(),
    }];
    let mut outputs = [HostTensorMut {
        desc: good_out,
        data: output.bytes_mut(),
    }];
    let short = plugin.enqueue(Launch::Cpu(CpuLaunch {
        inputs: &inputs,
        outputs: &mut outputs,
        workspace: &mut [],
        threads: 1,
    }));
    assert!(short.is_err());

    let scaled = create_plugin(
        &creator(),
        "s",
        &FieldCollection::new()
            .with("mode", "linear")
            .with("scales", vec![0.5f64])
            .with("use_scales", 1i32),
    )
    .expect("creates");
    let one = vec![DimExpr::Const(1), DimExpr::Const(1), DimExpr::Const(1)];
    assert!(scaled.output_shapes(&[one]).is_err());
}

#[test]
fn supports_cpu_float_linear_same_dtype() {
    let plugin = create_plugin(&creator(), "l", &sized("nearest", &[4])).expect("creates");
    for dtype in DTYPES {
        let io = [PortDesc::linear(dtype), PortDesc::linear(dtype)];
        assert!(plugin.supports(0, &io, 1, DeviceKind::Cpu));
        assert!(plugin.supports(1, &io, 1, DeviceKind::Cpu));
        assert!(plugin.supports(0, &io, 1, DeviceKind::Cuda));
    }
    let mixed = [PortDesc::linear(DType::F32), PortDesc::linear(DType::F16)];
    assert!(!plugin.supports(1, &mixed, 1, DeviceKind::Cpu));
    let ints = [PortDesc::linear(DType::I32), PortDesc::linear(DType::I32)];
    assert!(!plugin.supports(0, &ints, 1, DeviceKind::Cpu));
    assert!(!plugin.supports(2, &mixed, 1, DeviceKind::Cpu));
    assert!(!plugin.supports(0, &mixed, 2, DeviceKind::Cpu));
}

#[test]
fn integer_factor_fast_paths_match_reference() {
    let cases: [(&str, Vec<usize>, Vec<i64>); 9] = [
        ("bilinear", vec![2, 3, 40, 36], vec![80, 72]),
        ("bilinear", vec![2, 3, 40, 36], vec![120, 108]),
        ("bilinear", vec![2, 3, 40, 36], vec![20, 18]),
        ("bicubic", vec![1, 2, 33, 40], vec![66, 160]),
        ("nearest", vec![1, 2, 33, 40], vec![132, 20]),
        ("trilinear", vec![1, 2, 10, 12, 14], vec![20, 24, 7]),
        ("adaptive_avg_pool2d", vec![2, 3, 64, 48], vec![32, 16]),
        ("adaptive_max_pool2d", vec![2, 3, 64, 48], vec![16, 12]),
        ("adaptive_max_pool3d", vec![1, 2, 12, 12, 12], vec![4, 6, 3]),
    ];
    for (mode, shape, out) in cases {
        for dtype in DTYPES {
            let data = random_data(17, shape.iter().product());
            let (_, x, got) = run(&sized(mode, &out), dtype, &shape, &data, 2).expect("runs");
            let out: Vec<usize> = out.iter().map(|&d| d as usize).collect();
            let want = interp_ref::resize(&Spec::new(mode), &shape, &x, &out);
            let tol = tolerance(dtype);
            close(&got, &want, tol)
                .unwrap_or_else(|m| panic!("{mode} {dtype} {shape:?}->{out:?}: {m}"));
        }
    }
}

/// Two-dimensional adaptive max pooling of NCHW `x`, element by element, NaN winning.
fn naive_adaptive_max2d(x: &[f64], shape: &[usize], out: [usize; 2]) -> Vec<f64> {
    let (h, w) = (shape[2], shape[3]);
    let win = |i: usize, input: usize, output: usize| {
        i * input / output..((i + 1) * input).div_ceil(output)
    };
    let mut want = Vec::new();
    for plane in x.chunks_exact(h * w) {
        for oh in 0..out[0] {
            for ow in 0..out[1] {
                let mut m = f64::NEG_INFINITY;
                for r in win(oh, h, out[0]) {
                    for c in win(ow, w, out[1]) {
                        let v = plane[r * w + c];
                        if !m.is_nan() && (v > m || v.is_nan()) {
                            m = v;
                        }
                    }
                }
                want.push(m);
            }
        }
    }
    want
}

/// Runs adaptive max pooling of `shape` to `out` on `data`, by rule and with every tactic
/// the plugin offers for these sizes, and compares each with [`naive_adaptive_max2d`]
/// exactly; returns the tactic ids offered.
fn check_adaptive_max2d(shape: &[usize], out: [usize; 2], data: &[f32]) -> Vec<u32> {
    let fields = sized("adaptive_max_pool2d", &[out[0] as i64, out[1] as i64]);
    let mut plugin = create_plugin(&creator(), "interp", &fields).expect("created");
    let dims = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let out_shape = [shape[0], shape[1], out[0], out[1]];
    let (x_desc, y_desc) = (
        TensorDesc::new(DType::F32, dims(shape)),
        TensorDesc::new(DType::F32, dims(&out_shape)),
    );
    plugin
        .configure(std::slice::from_ref(&x_desc), std::slice::from_ref(&y_desc))
        .expect("configures");
    let (xs, ys) = (std::slice::from_ref(&x_desc), std::slice::from_ref(&y_desc));
    let ids: Vec<u32> = plugin
        .tactics(xs, ys, DeviceKind::Cpu)
        .iter()
        .map(|t| t.id)
        .collect();
    assert!(
        plugin
            .tactics(&[x_desc], &[y_desc], DeviceKind::Cuda)
            .is_empty()
    );
    for tactic in std::iter::once(0).chain(ids.iter().copied()) {
        let mut p = plugin.clone_plugin();
        p.set_tactic(tactic).expect("an offered tactic is accepted");
        let (_, x, got) = run_plugin(p.as_mut(), DType::F32, shape, data, 2).expect("runs");
        let want = naive_adaptive_max2d(&x, shape, out);
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{shape:?}->{out:?} tactic {tactic} element {i}: {g} vs {w}"
            );
        }
    }
    ids
}

#[test]
fn adaptive_max_pool2d_offers_tactics_where_they_differ_and_refuses_unknown_ones() {
    let data = random_data(3, 2 * 30 * 45);
    let ids = check_adaptive_max2d(&[1, 2, 30, 45], [7, 7], &data);
    assert!(ids.contains(&1) && ids.contains(&2), "{ids:?}");
    let data = random_data(4, 2 * 64 * 64);
    assert_eq!(
        check_adaptive_max2d(&[1, 2, 64, 64], [32, 32], &data),
        Vec::<u32>::new()
    );
    let mut p =
        create_plugin(&creator(), "interp", &sized("adaptive_max_pool2d", &[7, 7])).unwrap();
    assert!(p.set_tactic(9).is_err());
    let mut p = create_plugin(&creator(), "interp", &sized("bilinear", &[7, 7])).unwrap();
    assert!(p.set_tactic(1).is_err());
    assert!(p.set_tactic(0).is_ok());
}

#[test]
fn adaptive_max_pool2d_matches_naive_windows_with_nans() {
    let cases: [(Vec<usize>, [usize; 2]); 8] = [
        (vec![1, 2, 30, 45], [7, 7]),
        (vec![1, 2, 64, 64], [32, 32]),
        (vec![1, 2, 64, 64], [1, 1]),
        (vec![1, 2, 17, 40], [5, 27]),
        (vec![1, 2, 9, 37], [4, 20]),
        (vec![1, 1, 5, 100], [3, 60]),
        (vec![1, 1, 6, 50], [2, 40]),
        (vec![2, 1, 33, 70], [11, 17]),
    ];
    for (shape, out) in cases {
        let n: usize = shape.iter().product();
        let mut data = random_data(23, n);
        for i in (0..n).step_by(97) {
            data[i] = f32::NAN;
        }
        check_adaptive_max2d(&shape, out, &data);
    }
}

/// Rows of at most 64 inputs pooled into at most 16 windows that do not tile them (the
/// AVX-512 narrow-row kernel where the CPU has it), with and without NaNs.
#[test]
fn adaptive_max_pool2d_narrow_rows_match_naive_windows() {
    let mut seed = 40;
    for w in [3usize, 9, 16, 17, 31, 45, 48, 63, 64] {
        for ow in [2usize, 5, 7, 11, 16] {
            if ow > w || w % ow == 0 {
                continue;
            }
            for (h, oh) in [(30usize, 7usize), (5, 5), (9, 2)] {
                let shape = [2, 3, h, w];
                let n: usize = shape.iter().product();
                seed += 1;
                let mut data = random_data(seed, n);
                check_adaptive_max2d(&shape, [oh, ow], &data);
                data[n / 2 + 1] = f32::NAN;
                check_adaptive_max2d(&shape, [oh, ow], &data);
            }
        }
    }
}

#[test]
fn many_small_planes_grouped_across_threads_match_one_thread() {
    let shape = vec![4usize, 64, 30, 45];
    let data = random_data(29, shape.iter().product());
    let cases: [(&str, Vec<i64>); 4] = [
        ("adaptive_max_pool2d", vec![7, 7]),
        ("adaptive_avg_pool2d", vec![7, 7]),
        ("nearest", vec![60, 90]),
        ("bilinear", vec![45, 67]),
    ];
    for (mode, out) in cases {
        let fields = sized(mode, &out);
        let (_, x, one) = run(&fields, DType::F32, &shape, &data, 1).expect("runs");
        let (_, _, many) = run(&fields, DType::F32, &shape, &data, 3).expect("runs");
        assert_eq!(one, many, "{mode}");
        let out: Vec<usize> = out.iter().map(|&d| d as usize).collect();
        let want = interp_ref::resize(&Spec::new(mode), &shape, &x, &out);
        close(&one, &want, 1e-5).unwrap_or_else(|m| panic!("{mode}: {m}"));
    }
}
