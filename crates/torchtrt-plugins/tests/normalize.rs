//! `NormalizePlugin` against the f64 reference on random shapes, axes (negative, several,
//! non-adjacent), orders (1, 2, inf, other p), keep_dims, both modes and dtypes; the large
//! parallel paths; symbolic output shapes; every bad field and axis.

#[path = "common/harness.rs"]
mod harness;
#[path = "common/reference.rs"]
mod reference;

use harness::{DTYPES, check_close, rounded, run, values};
use proptest::prelude::*;
use torchtrt_plugin_api::{
    DType, DimExpr, FieldCollection, PluginError, TensorDesc, create_plugin, format_shape,
};
use torchtrt_plugins::normalize::NormalizeCreator;

/// One case: shape, axes as given, order, keep_dims, mode, eps.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<i64>,
    axes: Vec<i32>,
    order: f32,
    keep_dims: bool,
    normalize: bool,
    eps: f32,
}

impl Case {
    fn fields(&self) -> FieldCollection {
        FieldCollection::new()
            .with("order", self.order)
            .with("axes", self.axes.clone())
            .with("keep_dims", i32::from(self.keep_dims))
            .with("eps", self.eps)
            .with("mode", if self.normalize { "normalize" } else { "norm" })
    }

    fn reduce_mask(&self) -> Vec<bool> {
        let rank = self.shape.len() as i32;
        (0..rank)
            .map(|d| self.axes.iter().any(|&a| (a + rank) % rank == d))
            .collect()
    }

    fn expected_shape(&self) -> Vec<i64> {
        if self.normalize {
            return self.shape.clone();
        }
        self.shape
            .iter()
            .zip(self.reduce_mask())
            .filter_map(|(&d, r)| match (r, self.keep_dims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect()
    }

    fn check(&self, seed: u64, threads: usize) -> Result<(), String> {
        let dims: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let x = values(dims.iter().product(), seed, -3.0, 3.0);
        let mask = self.reduce_mask();
        let p = f64::from(self.order);
        for dtype in DTYPES {
            let out = run(
                &NormalizeCreator,
                &self.fields(),
                &self.shape,
                &x,
                dtype,
                threads,
            )
            .map_err(|e| format!("{self:?}: {e}"))?;
            if out.shape != self.expected_shape() {
                return Err(format!("{self:?}: output shape {:?}", out.shape));
            }
            let xr = rounded(&x, dtype);
            let want = if self.normalize {
                reference::normalize(&xr, &dims, &mask, p, f64::from(self.eps))
            } else {
                reference::norm(&xr, &dims, &mask, p)
            };
            let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
            let rtol_scale = if self.normalize { 1.0 } else { scale.max(1.0) };
            check_close(&out.values, &want, dtype, rtol_scale)
                .map_err(|e| format!("{self:?}: {e}"))?;
        }
        Ok(())
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    prop::collection::vec(1i64..7, 1..5).prop_flat_map(|shape| {
        let rank = shape.len();
        (
            Just(shape),
            prop::sample::subsequence((0..rank).collect::<Vec<_>>(), 1..=rank),
            prop::collection::vec(any::<bool>(), rank),
            prop_oneof![
                Just(1.0f32),
                Just(2.0),
                Just(f32::INFINITY),
                Just(3.0),
                0.5f32..4.0
            ],
            any::<bool>(),
            any::<bool>(),
            prop_oneof![Just(0.0f32), Just(1e-12), 0.0f32..0.5],
        )
            .prop_map(
                move |(shape, axes, negative, order, keep_dims, normalize, eps)| Case {
                    axes: axes
                        .iter()
                        .map(|&a| {
                            if negative[a] {
                                a as i32 - rank as i32
                            } else {
                                a as i32
                            }
                        })
                        .collect(),
                    shape,
                    order,
                    keep_dims,
                    normalize,
                    eps,
                },
            )
    })
}

proptest! {
    #[test]
    fn matches_reference(case in case_strategy(), seed in any::<u64>(), threads in 0usize..3) {
        prop_assert_eq!(case.check(seed, threads), Ok(()));
    }
}

fn big(shape: &[i64], axes: &[i32], order: f32, normalize: bool) -> Case {
    Case {
        shape: shape.to_vec(),
        axes: axes.to_vec(),
        order,
        keep_dims: true,
        normalize,
        eps: 1e-12,
    }
}

#[test]
fn large_inputs_take_the_parallel_paths() {
    for normalize in [false, true] {
        for order in [2.0f32, 1.0, f32::INFINITY] {
            assert_eq!(
                big(&[2, 64, 40, 103], &[1], order, normalize).check(1, 2),
                Ok(())
            );
            assert_eq!(
                big(&[2, 200, 3, 50], &[1], order, normalize).check(2, 2),
                Ok(())
            );
            assert_eq!(
                big(&[2, 70_001], &[-1], order, normalize).check(3, 2),
                Ok(())
            );
            assert_eq!(big(&[300, 257], &[1], order, normalize).check(4, 2), Ok(()));
            assert_eq!(
                big(&[5, 3, 6, 999], &[0, 2], order, normalize).check(5, 2),
                Ok(())
            );
        }
    }
    assert_eq!(big(&[3, 5000], &[0, 1], 2.5, false).check(6, 2), Ok(()));
}

#[test]
fn zero_norm_with_eps_and_empty_reductions() {
    let c = Case {
        shape: vec![2, 3],
        axes: vec![1],
        order: 2.0,
        keep_dims: false,
        normalize: true,
        eps: 1e-3,
    };
    let out = run(
        &NormalizeCreator,
        &c.fields(),
        &c.shape,
        &[0.0; 6],
        DType::F32,
        1,
    )
    .expect("runs");
    assert_eq!(out.values, vec![0.0; 6]);
    let empty = Case {
        shape: vec![3, 0],
        normalize: false,
        ..c.clone()
    };
    let out = run(
        &NormalizeCreator,
        &empty.fields(),
        &empty.shape,
        &[],
        DType::F32,
        1,
    )
    .expect("runs");
    assert_eq!((out.shape, out.values), (vec![3], vec![0.0; 3]));
}

#[test]
fn output_shapes_are_symbolic() {
    let f = FieldCollection::new()
        .with("axes", vec![1i32, -1])
        .with("keep_dims", 1i32);
    let p = create_plugin(&NormalizeCreator, "n", &f).expect("created");
    let input = vec![
        DimExpr::sym("batch"),
        DimExpr::Const(3),
        DimExpr::sym("h") * 2,
    ];
    let out = p
        .output_shapes(std::slice::from_ref(&input))
        .expect("shapes");
    assert_eq!(format_shape(&out[0]), "[batch,1,1]");
    let f = FieldCollection::new().with("axes", vec![1i32]);
    let p = create_plugin(&NormalizeCreator, "n", &f).expect("created");
    assert_eq!(
        format_shape(
            &p.output_shapes(std::slice::from_ref(&input))
                .expect("shapes")[0]
        ),
        "[batch,(h*2)]"
    );
    let f = f.with("mode", "normalize");
    let p = create_plugin(&NormalizeCreator, "n", &f).expect("created");
    assert_eq!(
        p.output_shapes(std::slice::from_ref(&input))
            .expect("shapes")[0],
        input
    );
}

fn create_err(f: FieldCollection) -> PluginError {
    match create_plugin(&NormalizeCreator, "bad_norm", &f) {
        Ok(_) => panic!("fields {f:?} were accepted"),
        Err(e) => e,
    }
}

#[test]
fn bad_fields_are_refused_at_create() {
    let axes = || FieldCollection::new().with("axes", vec![1i32]);
    let e = create_err(FieldCollection::new());
    assert!(
        matches!(&e, PluginError::MissingField { field, .. } if field == "axes"),
        "{e}"
    );
    let e = create_err(FieldCollection::new().with("axes", Vec::<i32>::new()));
    assert!(
        matches!(&e, PluginError::WrongFieldLength { field, .. } if field == "axes"),
        "{e}"
    );
    for p in [0.0f32, -2.0, f32::NAN, f32::NEG_INFINITY] {
        let e = create_err(axes().with("order", p));
        assert!(
            matches!(&e, PluginError::InvalidField { field, .. } if field == "order"),
            "{e}"
        );
    }
    let e = create_err(axes().with("mode", "l2"));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "mode"),
        "{e}"
    );
    assert!(
        e.to_string().contains("torch_tensorrt::NormalizePlugin@1"),
        "{e}"
    );
    let e = create_err(FieldCollection::new().with("axes", vec![2i32, 0, 2]));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "axes"),
        "{e}"
    );
    let e = create_err(axes().with("keep_dims", -1i32));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "keep_dims"),
        "{e}"
    );
    for eps in [-1.0f32, f32::INFINITY] {
        let e = create_err(axes().with("eps", eps));
        assert!(
            matches!(&e, PluginError::InvalidField { field, .. } if field == "eps"),
            "{e}"
        );
    }
    let e = create_err(axes().with("order", 2.0f64));
    assert!(
        matches!(&e, PluginError::WrongFieldType { field, .. } if field == "order"),
        "{e}"
    );
}

#[test]
fn axes_out_of_range_or_repeated_are_refused_at_configure() {
    for (axes, rank) in [(vec![3i32], 3usize), (vec![-4], 3), (vec![1, -2], 3)] {
        let f = FieldCollection::new().with("axes", axes.clone());
        let mut p = create_plugin(&NormalizeCreator, "n", &f).expect("created");
        let d = TensorDesc::new(DType::F16, vec![2; rank]);
        let e = p
            .configure(std::slice::from_ref(&d), std::slice::from_ref(&d))
            .unwrap_err();
        assert!(
            matches!(&e, PluginError::InvalidField { field, .. } if field == "axes"),
            "{axes:?}: {e}"
        );
        let sym = torchtrt_plugin_api::const_shape(&vec![2; rank]);
        assert!(p.output_shapes(&[sym]).is_err());
        let e = harness::enqueue(p.as_ref(), &d, &vec![0u8; 2 << rank], &d, 1).unwrap_err();
        assert!(
            matches!(&e, PluginError::InvalidField { field, .. } if field == "axes"),
            "{e}"
        );
    }
}
