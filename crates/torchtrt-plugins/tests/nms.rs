//! `NonMaxSuppression` as a plugin: fields (serialised, re-created, cloned, refused when
//! bad), the capability query, upper-bound output shapes (with the limit from a field or a
//! shape input), CPU launches (empty problems, mismatched shapes), and CUDA launches that
//! are refused cleanly without a runtime.

use torchtrt_plugin_api::{
    CpuLaunch, CudaLaunch, DType, DeviceKind, DeviceTensor, DimExpr, FieldCollection, HostTensor,
    HostTensorMut, Launch, Plugin, PluginCreator, PluginError, PortDesc, ShapeValues, SizedOutput,
    TensorDesc, const_shape, create_plugin, validate_fields,
};
use torchtrt_plugins::nms::NmsCreator;

fn fields() -> FieldCollection {
    FieldCollection::new()
        .with("max_output_boxes_per_class", 2i64)
        .with("iou_threshold", 0.5f32)
        .with("score_threshold", 0.1f32)
        .with("use_score_threshold", 1i32)
}

fn plugin(fields: &FieldCollection) -> Box<dyn Plugin> {
    create_plugin(&NmsCreator, "nms", fields).expect("created")
}

/// Two batches of three boxes, two classes: boxes 0 and 1 overlap (IoU 0.6), box 2 apart.
fn problem() -> (Vec<f32>, Vec<f32>) {
    let one = [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.6, 5.0, 5.0, 6.0, 6.0];
    let boxes = [one, one].concat();
    let scores = vec![
        0.9, 0.8, 0.7, 0.05, 0.3, 0.2, //
        0.1, 0.4, 0.4, 0.6, 0.6, 0.6,
    ];
    (boxes, scores)
}

/// Runs a CPU launch on f32 boxes `[b, n, 4]` and scores `[b, c, n]`: the selection rows.
fn run_cpu(
    p: &dyn Plugin,
    boxes: &[f32],
    scores: &[f32],
    (b, c, n): (i64, i64, i64),
) -> Result<Vec<[i64; 3]>, PluginError> {
    let upper = shape_of(p, (b, c, n))?;
    let inputs = [
        HostTensor {
            desc: TensorDesc::new(DType::F32, vec![b, n, 4]),
            data: bytemuck::cast_slice(boxes),
        },
        HostTensor {
            desc: TensorDesc::new(DType::F32, vec![b, c, n]),
            data: bytemuck::cast_slice(scores),
        },
    ];
    let mut selected = vec![-7i64; (upper * 3) as usize];
    let mut count = [-7i64];
    let mut outputs = [
        HostTensorMut {
            desc: TensorDesc::new(DType::I64, vec![upper, 3]),
            data: bytemuck::cast_slice_mut(&mut selected),
        },
        HostTensorMut {
            desc: TensorDesc::new(DType::I64, vec![]),
            data: bytemuck::cast_slice_mut(&mut count),
        },
    ];
    p.enqueue(Launch::Cpu(CpuLaunch {
        inputs: &inputs,
        outputs: &mut outputs,
        workspace: &mut [],
        threads: 1,
    }))?;
    Ok(selected[..count[0] as usize * 3]
        .chunks_exact(3)
        .map(|r| [r[0], r[1], r[2]])
        .collect())
}

fn shape_of(p: &dyn Plugin, (b, c, n): (i64, i64, i64)) -> Result<i64, PluginError> {
    let shapes = p.output_shapes(&[const_shape(&[b, n, 4]), const_shape(&[b, c, n])])?;
    Ok(shapes[0][0].as_const().expect("constant"))
}

#[test]
fn selects_by_score_suppresses_by_iou_and_limits_per_class() {
    let (boxes, scores) = problem();
    let got = run_cpu(plugin(&fields()).as_ref(), &boxes, &scores, (2, 2, 3)).expect("runs");
    assert_eq!(
        got,
        [
            [0, 0, 0],
            [0, 0, 2],
            [0, 1, 1],
            [0, 1, 2],
            [1, 0, 1],
            [1, 0, 2],
            [1, 1, 0],
            [1, 1, 2],
        ]
    );
}

#[test]
fn empty_problems_and_empty_selections_give_a_zero_count() {
    let p = plugin(&fields());
    assert_eq!(run_cpu(p.as_ref(), &[], &[], (2, 2, 0)), Ok(vec![]));
    let (boxes, _) = problem();
    let low = vec![0.05f32; 12];
    assert_eq!(run_cpu(p.as_ref(), &boxes, &low, (2, 2, 3)), Ok(vec![]));
}

#[test]
fn mismatched_boxes_and_scores_are_named() {
    let p = plugin(&fields());
    let e = p
        .output_shapes(&[const_shape(&[2, 3, 4]), const_shape(&[2, 2])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 3") && e.contains("nms"), "{e}");
    let (boxes, scores) = problem();
    let e = run_cpu(p.as_ref(), &boxes[..20], &scores, (2, 2, 3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("box and") || e.contains("boxes"), "{e}");
}

#[test]
fn serialized_fields_recreate_an_identical_plugin() {
    let p = plugin(&fields());
    let saved = p.fields_to_serialize();
    let complete =
        validate_fields(&NmsCreator.key(), &NmsCreator.field_schema(), &saved).expect("valid");
    assert_eq!(complete, saved);
    let again = plugin(&saved);
    assert_eq!(again.fields_to_serialize(), saved);
    assert_eq!(p.clone_plugin().fields_to_serialize(), saved);
    let (boxes, scores) = problem();
    assert_eq!(
        run_cpu(again.as_ref(), &boxes, &scores, (2, 2, 3)),
        run_cpu(p.as_ref(), &boxes, &scores, (2, 2, 3))
    );
}

#[test]
fn bad_fields_are_named() {
    let bad = [
        ("layout", FieldCollection::new().with("layout", "yolo")),
        (
            "center_point_box",
            FieldCollection::new().with("center_point_box", 2i32),
        ),
        (
            "max_output_boxes_per_class",
            FieldCollection::new().with("max_output_boxes_per_class", -2i64),
        ),
        (
            "iou_threshold",
            FieldCollection::new().with("iou_threshold", f32::NAN),
        ),
        ("iou_input", FieldCollection::new().with("iou_input", 1i32)),
        (
            "score_input",
            FieldCollection::new()
                .with("max_output_input", 2i32)
                .with("score_input", 2i32),
        ),
        (
            "max_output_input",
            FieldCollection::new().with("iou_input", 3i32),
        ),
    ];
    for (field, f) in bad {
        let e = create_plugin(&NmsCreator, "nms", &f)
            .err()
            .unwrap_or_else(|| panic!("{field} accepted"))
            .to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

#[test]
fn supports_float_boxes_and_scores_of_one_dtype_and_i64_outputs() {
    let p = plugin(&fields());
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let io = [dtype, dtype, DType::I64, DType::I64].map(PortDesc::linear);
        for device in [DeviceKind::Cpu, DeviceKind::Cuda] {
            assert!((0..4).all(|pos| p.supports(pos, &io, 2, device)), "{dtype}");
        }
        let mixed = [dtype, DType::F64, DType::I64, DType::I64].map(PortDesc::linear);
        assert!(!p.supports(1, &mixed, 2, DeviceKind::Cpu));
        let wrong_out = [dtype, dtype, DType::I32, DType::I64].map(PortDesc::linear);
        assert!(!p.supports(2, &wrong_out, 2, DeviceKind::Cpu));
    }
    let ints = [DType::I32, DType::I32, DType::I64, DType::I64].map(PortDesc::linear);
    assert!(!p.supports(0, &ints, 2, DeviceKind::Cpu));
    assert_eq!(
        p.sized_outputs(),
        [SizedOutput {
            output: 0,
            axis: 0,
            count: 1
        }]
    );
    assert_eq!(
        p.output_dtypes(&[DType::F16, DType::F16]),
        Ok(vec![DType::I64; 2])
    );
    assert!(p.output_dtypes(&[DType::F16, DType::F32]).is_err());
}

#[test]
fn the_bound_follows_the_limit_from_a_field_or_a_shape_input() {
    let p = plugin(&fields());
    assert_eq!(shape_of(p.as_ref(), (2, 3, 10)), Ok(12));
    let n = DimExpr::sym("n");
    let shapes = p
        .output_shapes(&[
            vec![DimExpr::Const(1), n.clone(), DimExpr::Const(4)],
            vec![DimExpr::Const(1), DimExpr::Const(1), n],
        ])
        .expect("symbolic");
    assert_eq!(shapes[0][0].eval(&|_| Some(1)), Ok(1));
    assert_eq!(shapes[0][0].eval(&|_| Some(50)), Ok(2));
    let by_input = plugin(
        &FieldCollection::new()
            .with("max_output_input", 2i32)
            .with("iou_input", 3i32),
    );
    assert_eq!(by_input.shape_inputs(), [2, 3]);
    let ins = [
        const_shape(&[2, 10, 4]),
        const_shape(&[2, 3, 10]),
        const_shape(&[1]),
        const_shape(&[1]),
    ];
    let unknown = vec![ShapeValues::Unknown; 4];
    assert_eq!(
        by_input.output_shapes_of(&ins, &unknown).expect("bound")[0][0],
        DimExpr::Const(60)
    );
    let mut known = unknown.clone();
    known[2] = ShapeValues::Ints(vec![4]);
    known[3] = ShapeValues::Floats(vec![0.5]);
    assert_eq!(
        by_input.output_shapes_of(&ins, &known).expect("bound")[0][0],
        DimExpr::Const(24)
    );
    known[2] = ShapeValues::Ints(vec![-3]);
    assert_eq!(
        by_input.output_shapes_of(&ins, &known).expect("bound")[0][0],
        DimExpr::Const(0)
    );
    known[2] = ShapeValues::Ints(vec![1, 2]);
    let e = by_input
        .output_shapes_of(&ins, &known)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("max_output_boxes_per_class") && e.contains("2 values"),
        "{e}"
    );
}

#[test]
fn cuda_launches_without_a_runtime_are_refused() {
    let p = plugin(&fields());
    let t = |dtype, shape: Vec<i64>| DeviceTensor {
        desc: TensorDesc::new(dtype, shape),
        ptr: 0,
    };
    let inputs = [t(DType::F32, vec![2, 3, 4]), t(DType::F32, vec![2, 2, 3])];
    let outputs = [t(DType::I64, vec![8, 3]), t(DType::I64, vec![])];
    let e = p
        .enqueue(Launch::Cuda(CudaLaunch {
            inputs: &inputs,
            outputs: &outputs,
            workspace: 0,
            device: 0,
            stream: std::ptr::null_mut(),
            runtime: &torchtrt_plugin_api::NoCudaRuntime,
            shape_values: &[],
        }))
        .unwrap_err();
    assert!(
        matches!(
            e,
            PluginError::InvalidInput(_) | PluginError::Unsupported(_)
        ),
        "{e}"
    );
}
