use torchtrt_plugin_api::{
    FieldCollection, FieldSpec, FieldType, FieldValue, PluginError, PluginKey, validate_fields,
};

fn key() -> PluginKey {
    PluginKey::new("torch_tensorrt", "Demo", "1")
}

fn schema() -> Vec<FieldSpec> {
    vec![
        FieldSpec::required("mode", FieldType::Char, "how").len_range(1, None),
        FieldSpec::required("size", FieldType::I64, "output size").len_range(1, Some(3)),
        FieldSpec::with_default("eps", 1e-5f32, "epsilon").scalar(),
        FieldSpec::optional("bias", FieldType::F32, "optional bias"),
    ]
}

fn good() -> FieldCollection {
    FieldCollection::new()
        .with("mode", "linear")
        .with("size", vec![4i64, 5])
}

#[test]
fn valid_fields_get_defaults() {
    let out = validate_fields(&key(), &schema(), &good()).unwrap();
    assert_eq!(out.f32("eps"), Some(1e-5));
    assert_eq!(out.string("mode"), Some("linear"));
    assert_eq!(out.i64s("size"), Some(&[4i64, 5][..]));
    assert!(
        !out.contains("bias"),
        "optional without default stays absent"
    );
}

#[test]
fn missing_required_field_is_named() {
    let mut f = good();
    f.remove("size");
    let err = validate_fields(&key(), &schema(), &f).unwrap_err();
    assert_eq!(
        err,
        PluginError::MissingField {
            key: key(),
            field: "size".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "plugin torch_tensorrt::Demo@1: missing required field `size`"
    );
}

#[test]
fn unknown_field_is_named_with_the_known_ones() {
    let f = good().with("sizes", vec![1i64]);
    let err = validate_fields(&key(), &schema(), &f).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PluginError::UnknownField { ref field, .. } if field == "sizes"));
    assert!(
        msg.contains("torch_tensorrt::Demo@1") && msg.contains("mode, size, eps, bias"),
        "{msg}"
    );
}

#[test]
fn wrong_type_is_named() {
    let f = good().with("size", vec![4i32, 5]);
    let err = validate_fields(&key(), &schema(), &f).unwrap_err();
    assert_eq!(
        err,
        PluginError::WrongFieldType {
            key: key(),
            field: "size".into(),
            expected: FieldType::I64,
            found: FieldType::I32
        }
    );
    let f = good().with("eps", 1e-5f64);
    assert!(matches!(
        validate_fields(&key(), &schema(), &f),
        Err(PluginError::WrongFieldType { ref field, .. }) if field == "eps"
    ));
}

#[test]
fn wrong_length_is_named() {
    let f = good().with("size", vec![1i64, 2, 3, 4]);
    let err = validate_fields(&key(), &schema(), &f).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin torch_tensorrt::Demo@1: field `size` has 4 elements, expected 1 to 3"
    );
    let f = good().with("eps", vec![1.0f32, 2.0]);
    assert!(matches!(
        validate_fields(&key(), &schema(), &f),
        Err(PluginError::WrongFieldLength { ref field, found: 2, .. }) if field == "eps"
    ));
    let f = good().with("mode", "");
    assert!(matches!(
        validate_fields(&key(), &schema(), &f),
        Err(PluginError::WrongFieldLength { ref field, found: 0, .. }) if field == "mode"
    ));
}

#[test]
fn values_roundtrip_through_bytes_and_convert() {
    let values = [
        FieldValue::F32(vec![1.5, -2.0]),
        FieldValue::I64(vec![i64::MIN, 7]),
        FieldValue::Char("bilinear".into()),
        FieldValue::Dims(vec![1, 2, 3]),
        FieldValue::Bytes(vec![0, 255]),
        FieldValue::F16(vec![torchtrt_plugin_api::f16::from_f32(0.5)]),
    ];
    for v in values {
        assert_eq!(
            FieldValue::from_bytes(v.ty(), &v.to_bytes()),
            Some(v.clone())
        );
    }
    assert_eq!(FieldValue::from_bytes(FieldType::I32, &[1, 2, 3]), None);
    assert_eq!(
        FieldValue::I64(vec![3, -4]).convert(FieldType::I32),
        Some(FieldValue::I32(vec![3, -4]))
    );
    assert_eq!(FieldValue::I64(vec![1 << 40]).convert(FieldType::I32), None);
    assert_eq!(
        FieldValue::F32(vec![0.25]).convert(FieldType::F64),
        Some(FieldValue::F64(vec![0.25]))
    );
    assert_eq!(FieldValue::Char("x".into()).convert(FieldType::I32), None);
}
