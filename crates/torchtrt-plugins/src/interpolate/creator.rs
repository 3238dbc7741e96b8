//! `InterpolateCreator`: the key, field schema and creation of `Interpolate` plugins.

use torchtrt_plugin_api::{
    Capabilities, FieldCollection, FieldSpec, FieldType, Plugin, PluginCreator, PluginKey,
    PluginResult, validate_fields,
};

use super::config;
use super::plugin::InterpolatePlugin;

/// Creates `torch_tensorrt::Interpolate@1` plugins: PyTorch `F.interpolate` and
/// `adaptive_{avg,max}_pool{1,2,3}d`, with ONNX `Resize`'s extra options.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterpolateCreator;

/// The key `torch_tensorrt::Interpolate@1`.
pub fn key() -> PluginKey {
    PluginKey::new("torch_tensorrt", "Interpolate", "1")
}

impl PluginCreator for InterpolateCreator {
    fn key(&self) -> PluginKey {
        key()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::required(
                "mode",
                FieldType::Char,
                "nearest, linear, bilinear, bicubic, trilinear, adaptive_avg_pool{1,2,3}d or adaptive_max_pool{1,2,3}d",
            ),
            FieldSpec::optional("out_size", FieldType::I64, "spatial output sizes")
                .len_range(0, Some(3)),
            FieldSpec::optional(
                "scales",
                FieldType::F64,
                "per-axis scale factors; the output size when use_scales = 1",
            )
            .len_range(0, Some(3)),
            FieldSpec::with_default("align_corners", 0i32, "PyTorch align_corners (0 or 1)")
                .scalar(),
            FieldSpec::with_default(
                "use_scales",
                0i32,
                "1: the output size is floor(in·scale) and coordinates use 1/scale",
            )
            .scalar(),
            FieldSpec::optional("in_shape", FieldType::I32, "input shape (ignored)"),
            FieldSpec::optional(
                "out_shape",
                FieldType::I32,
                "full output shape; its spatial part is the size when out_size is absent",
            ),
            FieldSpec::with_default(
                "coordinate_transformation_mode",
                "",
                "ONNX Resize coordinate mode; empty for PyTorch's rule",
            ),
            FieldSpec::with_default(
                "nearest_mode",
                "",
                "ONNX Resize nearest rounding; empty for PyTorch's floor",
            ),
            FieldSpec::with_default(
                "cubic_coeff_a",
                -0.75f32,
                "cubic convolution coefficient A (PyTorch-rule antialiased bicubic uses -0.5)",
            )
            .scalar(),
            FieldSpec::with_default(
                "exclude_outside",
                0i32,
                "1: taps outside the input get weight 0, the rest renormalise",
            )
            .scalar(),
            FieldSpec::with_default(
                "extrapolation_value",
                0f32,
                "ONNX tf_crop_and_resize: the value of outputs sampling outside the input",
            )
            .scalar(),
            FieldSpec::with_default(
                "size_input",
                "",
                "sizes or scales: the output size comes from input 1, a shape input (i32/i64 sizes or float scales, one per axis after size_input_skip)",
            ),
            FieldSpec::with_default(
                "size_input_skip",
                0i32,
                "entries of the shape input before the spatial ones (0 or 2: N and C, which must keep their size)",
            )
            .scalar(),
            FieldSpec::with_default(
                "keep_aspect_ratio_policy",
                "stretch",
                "ONNX Resize: stretch, not_larger or not_smaller (with size_input = sizes)",
            ),
            FieldSpec::with_default(
                "roi_input",
                0i32,
                "1 (with tf_crop_and_resize): the last input is the region of interest, starts then ends (after size_input_skip entries each)",
            )
            .scalar(),
            FieldSpec::with_default(
                "antialias",
                0i32,
                "1: ONNX opset-18 antialias filter when downsampling (linear, cubic)",
            )
            .scalar(),
        ]
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shape_inputs: true,
            tactics: true,
            ..Capabilities::default()
        }
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let key = key();
        let fields = validate_fields(&key, &self.field_schema(), fields)?;
        let config = config::parse(&key, &fields)?;
        Ok(Box::new(InterpolatePlugin::new(layer_name, config)))
    }
}
