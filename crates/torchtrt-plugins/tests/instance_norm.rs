//! `InstanceNormalization_TRT` against the f64 reference on random 3-D to 5-D shapes,
//! values, affine parameters, (leaky) relu and dtypes; the few-large-planes path; every bad
//! field and input.

#[path = "common/harness.rs"]
mod harness;
#[path = "common/reference.rs"]
mod reference;

use harness::{DTYPES, check_close, rounded, run, values};
use proptest::prelude::*;
use torchtrt_plugin_api::{DType, FieldCollection, PluginError, TensorDesc, create_plugin};
use torchtrt_plugins::instance_norm::InstanceNormCreator;

/// One random case: shape, values with a per-plane offset, per-channel parameters.
struct Case {
    shape: Vec<i64>,
    x: Vec<f32>,
    scales: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
    leaky: Option<f32>,
}

impl Case {
    fn new(shape: Vec<i64>, seed: u64, eps: f32, leaky: Option<f32>) -> Case {
        let n = shape.iter().product::<i64>() as usize;
        let c = shape[1] as usize;
        let plane = n / (shape[0] as usize * c);
        let offsets = values(n / plane, seed ^ 0x55, -20.0, 20.0);
        let x = values(n, seed, -3.0, 3.0)
            .iter()
            .enumerate()
            .map(|(i, v)| v + offsets[i / plane])
            .collect();
        Case {
            shape,
            x,
            scales: values(c, seed + 1, -2.0, 2.0),
            bias: values(c, seed + 2, -1.0, 1.0),
            eps,
            leaky,
        }
    }

    fn fields(&self) -> FieldCollection {
        FieldCollection::new()
            .with("epsilon", self.eps)
            .with("scales", self.scales.clone())
            .with("bias", self.bias.clone())
            .with("relu", i32::from(self.leaky.is_some()))
            .with("alpha", self.leaky.unwrap_or(0.0))
    }

    fn check(&self, threads: usize) -> Result<(), String> {
        let dims: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
        for dtype in DTYPES {
            let out = run(
                &InstanceNormCreator,
                &self.fields(),
                &self.shape,
                &self.x,
                dtype,
                threads,
            )
            .map_err(|e| e.to_string())?;
            let want = reference::instance_norm(
                &rounded(&self.x, dtype),
                &dims,
                &wide(&self.scales),
                &wide(&self.bias),
                f64::from(self.eps),
                self.leaky.map(f64::from),
            );
            check_close(&out.values, &want, dtype, 4.0)?;
        }
        Ok(())
    }
}

fn shape_strategy() -> impl Strategy<Value = Vec<i64>> {
    (1i64..4, 1i64..6, prop::collection::vec(1i64..10, 1..4)).prop_map(|(n, c, rest)| {
        let mut s = vec![n, c];
        s.extend(rest);
        s
    })
}

proptest! {
    #[test]
    fn matches_reference(
        shape in shape_strategy(),
        seed in any::<u64>(),
        eps in prop_oneof![Just(1e-5f32), Just(0.0f32), 1e-3f32..0.5],
        leaky in prop_oneof![Just(None), Just(Some(0.0f32)), (-0.5f32..0.5).prop_map(Some)],
        threads in 0usize..3,
    ) {
        prop_assert_eq!(Case::new(shape, seed, eps, leaky).check(threads), Ok(()));
    }
}

#[test]
fn few_large_planes_are_split_over_threads() {
    assert_eq!(
        Case::new(vec![1, 2, 64, 1100], 3, 1e-5, None).check(2),
        Ok(())
    );
    assert_eq!(
        Case::new(vec![1, 1, 300_001], 4, 1e-5, Some(0.1)).check(2),
        Ok(())
    );
    assert_eq!(
        Case::new(vec![2, 3, 2, 3, 7_001], 5, 1e-3, None).check(2),
        Ok(())
    );
}

#[test]
fn constant_planes_give_the_bias() {
    let shape = [2i64, 3, 4, 5];
    let x = vec![7.25f32; 120];
    let f = FieldCollection::new()
        .with("scales", vec![2.0f32, 3.0, 4.0])
        .with("bias", vec![0.5f32, -1.0, 0.25]);
    let out = run(&InstanceNormCreator, &f, &shape, &x, DType::F32, 1).expect("runs");
    for (i, v) in out.values.iter().enumerate() {
        assert_eq!(*v, [0.5, -1.0, 0.25][(i / 20) % 3]);
    }
}

fn create_err(f: FieldCollection) -> PluginError {
    match create_plugin(&InstanceNormCreator, "bad_in", &f) {
        Ok(_) => panic!("fields {f:?} were accepted"),
        Err(e) => e,
    }
}

fn base() -> FieldCollection {
    FieldCollection::new()
        .with("scales", vec![1.0f32; 3])
        .with("bias", vec![0.0f32; 3])
}

#[test]
fn bad_fields_are_refused_at_create() {
    let e = create_err(FieldCollection::new().with("scales", vec![1.0f32]));
    assert!(
        matches!(&e, PluginError::MissingField { field, .. } if field == "bias"),
        "{e}"
    );
    let e = create_err(base().with("bias", vec![0.0f32; 2]));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "bias"),
        "{e}"
    );
    assert!(e.to_string().contains("InstanceNormalization_TRT"), "{e}");
    for eps in [-1e-5f32, f32::NAN, f32::INFINITY] {
        let e = create_err(base().with("epsilon", eps));
        assert!(
            matches!(&e, PluginError::InvalidField { field, .. } if field == "epsilon"),
            "{e}"
        );
    }
    let e = create_err(base().with("relu", 2i32));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "relu"),
        "{e}"
    );
    let e = create_err(base().with("alpha", f32::NAN));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "alpha"),
        "{e}"
    );
    let e = create_err(base().with("scales", Vec::<f32>::new()));
    assert!(
        matches!(&e, PluginError::WrongFieldLength { field, .. } if field == "scales"),
        "{e}"
    );
    let e = create_err(base().with("epsilon", vec![1e-5f32, 1e-5]));
    assert!(
        matches!(&e, PluginError::WrongFieldLength { field, .. } if field == "epsilon"),
        "{e}"
    );
}

#[test]
fn channel_mismatch_is_refused_at_configure_and_enqueue() {
    let mut p = create_plugin(&InstanceNormCreator, "in", &base()).expect("created");
    let bad = TensorDesc::new(DType::F32, vec![1, 4, 2]);
    let e = p
        .configure(std::slice::from_ref(&bad), std::slice::from_ref(&bad))
        .unwrap_err();
    assert!(e.to_string().contains("4 channels"), "{e}");
    assert!(e.to_string().contains("in"), "{e}");
    let dynamic = TensorDesc::new(DType::F32, vec![1, -1, 2]);
    p.configure(
        std::slice::from_ref(&dynamic),
        std::slice::from_ref(&dynamic),
    )
    .expect("a dynamic channel count is checked at enqueue");
    let e = harness::enqueue(p.as_ref(), &bad, &[0u8; 32], &bad, 1).unwrap_err();
    assert!(e.to_string().contains("4 channels"), "{e}");
}

#[test]
fn ranks_outside_3_to_5_are_refused() {
    let mut p = create_plugin(&InstanceNormCreator, "in", &base()).expect("created");
    for shape in [vec![3i64, 4], vec![1, 3, 1, 1, 1, 2]] {
        let d = TensorDesc::new(DType::F32, shape.clone());
        assert!(
            p.configure(std::slice::from_ref(&d), std::slice::from_ref(&d))
                .is_err()
        );
        let bytes = vec![0u8; 4 * shape.iter().product::<i64>() as usize];
        let e = harness::enqueue(p.as_ref(), &d, &bytes, &d, 1).unwrap_err();
        assert!(e.to_string().contains("rank"), "{e}");
        let sym = torchtrt_plugin_api::const_shape(&shape);
        assert!(p.output_shapes(&[sym]).is_err());
    }
}
