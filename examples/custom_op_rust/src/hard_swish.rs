//! `com.example::HardSwishCustom(x; alpha: float = 1, max_abs: float = inf)`:
//! `y = alpha · x · clamp(x + 3, 0, 6) / 6`, f32, any shape (the output has the input's).
//! An input element with `|x| > max_abs` is a kernel error naming the element.

use torchtrt_plugin_api::{
    CpuLaunch, CustomOp, FieldCollection, FieldSpec, PluginError, PluginResult,
};

/// The operator definition.
pub struct HardSwishCustom;

impl CustomOp for HardSwishCustom {
    fn domain(&self) -> String {
        "com.example".to_string()
    }

    fn op_type(&self) -> String {
        "HardSwishCustom".to_string()
    }

    fn num_inputs(&self) -> usize {
        1
    }

    fn num_outputs(&self) -> usize {
        1
    }

    fn attributes(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default("alpha", 1.0f32, "scale of the output").scalar(),
            FieldSpec::with_default("max_abs", f32::INFINITY, "largest |x| accepted").scalar(),
        ]
    }

    fn cpu_kernel(&self, attrs: &FieldCollection, launch: CpuLaunch<'_, '_>) -> PluginResult<()> {
        let alpha = attrs.f32("alpha").unwrap_or(1.0);
        let max_abs = attrs.f32("max_abs").unwrap_or(f32::INFINITY);
        let x = launch.inputs[0].typed::<f32>()?;
        let y = launch.outputs[0].typed_mut::<f32>()?;
        if let Some(i) = x.iter().position(|v| v.abs() > max_abs) {
            return Err(PluginError::Execution(format!(
                "input element {i} is {}, beyond max_abs {max_abs}",
                x[i]
            )));
        }
        for (y, &x) in y.iter_mut().zip(x) {
            *y = alpha * x * (x + 3.0).clamp(0.0, 6.0) / 6.0;
        }
        Ok(())
    }
}
