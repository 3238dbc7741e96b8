//! Checks of a CUDA launch's tensors shared by the built-in plugins.

use torchtrt_plugin_api::{CudaLaunch, DeviceTensor, PluginResult, ShapeDisplay, numel};

use crate::support::Origin;

impl Origin {
    /// The one input and one output of a unary float launch, with the input's element
    /// count. The output must have the input's dtype and `expected_out` as shape (the
    /// input's shape when `None`); shapes must be concrete and pointers non-null.
    pub(crate) fn check_unary_cuda<'l>(
        &self,
        cuda: &'l CudaLaunch<'_>,
        expected_out: Option<&[i64]>,
    ) -> PluginResult<(&'l DeviceTensor, &'l DeviceTensor, usize)> {
        let ([x], [y]) = (cuda.inputs, cuda.outputs) else {
            return Err(self.input_error(format!(
                "expects 1 input and 1 output, got {} and {}",
                cuda.inputs.len(),
                cuda.outputs.len()
            )));
        };
        let dtype = self.single_float_dtype(&[x.desc.dtype])?;
        if y.desc.dtype != dtype {
            return Err(self.input_error(format!(
                "output dtype {} differs from input dtype {dtype}",
                y.desc.dtype
            )));
        }
        let want = expected_out.unwrap_or(&x.desc.shape);
        if y.desc.shape != want {
            return Err(self.input_error(format!(
                "output shape {} should be {} for input {}",
                ShapeDisplay(&y.desc.shape),
                ShapeDisplay(want),
                x.desc
            )));
        }
        let n = numel(&x.desc.shape)
            .ok_or_else(|| self.input_error(format!("input shape {} is not concrete", x.desc)))?;
        let m = numel(&y.desc.shape)
            .ok_or_else(|| self.input_error(format!("output shape {} is not concrete", y.desc)))?;
        if (n > 0 && x.ptr == 0) || (m > 0 && y.ptr == 0) {
            return Err(self.input_error("a device pointer is null"));
        }
        Ok((x, y, n))
    }
}
