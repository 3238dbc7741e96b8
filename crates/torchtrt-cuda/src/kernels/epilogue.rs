//! The activations a convolution applies as it writes its output (its `activation` field),
//! as CUDA C and as the code and parameters the kernels take.

use torchtrt_core::layers::ActivationKind;

/// CUDA C: `act(v, code, p0, p1)` for the codes of [`Epilogue`].
pub(crate) const ACTIVATIONS: &str = r#"
__device__ __forceinline__ float act(float v, int code, float p0, float p1) {
    switch (code) {
    case 1: return fmaxf(v, 0.0f);
    case 2: return v < 0.0f ? p0 * v : v;
    case 3: return fminf(fmaxf(v, p0), p1);
    case 4: return v / (1.0f + expf(-v));
    default: return v;
    }
}
"#;

/// An activation as kernel arguments: a code and two parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Epilogue {
    /// 0 none, 1 relu, 2 leaky relu, 3 clip, 4 SiLU.
    pub code: i32,
    /// First parameter (alpha, min).
    pub p0: f32,
    /// Second parameter (max, beta).
    pub p1: f32,
}

impl Epilogue {
    /// The epilogue of `activation`, `None` for one the kernels do not fuse (the builder
    /// fuses the same four).
    pub(crate) fn new(activation: Option<ActivationKind>) -> Option<Epilogue> {
        let e = |code, p0, p1| Some(Epilogue { code, p0, p1 });
        match activation {
            None => e(0, 0.0, 0.0),
            Some(ActivationKind::Relu) => e(1, 0.0, 0.0),
            Some(ActivationKind::LeakyRelu { alpha }) => e(2, alpha, 0.0),
            Some(ActivationKind::Clip { min, max }) => e(3, min, max),
            Some(ActivationKind::Silu) => e(4, 0.0, 0.0),
            Some(_) => None,
        }
    }
}
