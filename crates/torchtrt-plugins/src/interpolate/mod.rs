//! `torch_tensorrt::Interpolate@1`: PyTorch `F.interpolate` (nearest, linear, bilinear,
//! bicubic, trilinear) and `adaptive_{avg,max}_pool{1,2,3}d`, with ONNX `Resize`'s
//! coordinate modes, nearest modes, cubic coefficient, `exclude_outside` and antialias.
//!
//! Fields and their rules live in `config` (validation, normalised round trip) and `size`
//! (the output size, exact for symbolic dimensions); `coord` maps output indices to input
//! coordinates; `nearest`, `linear`, `cubic`, `antialias` and `pool` turn one axis into a
//! tap table (`taps`), once per launch. Kernels run on the CPU in `f32` for f32, f16 and
//! bf16 tensors: `nearest` copies elements and rows; `maxpool` runs two-dimensional adaptive
//! max pools directly (lane-wise row maxima; `maxpool_x86` keeps narrow rows in AVX-512
//! registers); `separable` runs `passes` axis by axis (with `poly`'s vectorised kernels for
//! integer factors); `launch` splits planes (and rows of few or large planes) over threads.
//!
//! On CUDA, `cuda` runs the same tap tables on the GPU.

#![allow(clippy::result_large_err)]

mod antialias;
mod config;
mod coord;
mod creator;
mod cubic;
pub(crate) mod cuda;
pub(crate) mod cuda_linear;
pub(crate) mod cuda_pool;
mod element;
mod launch;
mod linear;
mod maxpool;
#[cfg(target_arch = "x86_64")]
mod maxpool_x86;
mod mode;
mod nearest;
mod passes;
mod plan;
mod plugin;
mod poly;
mod pool;
#[cfg(target_arch = "x86_64")]
mod rows_x86;
mod separable;
mod size;
mod taps;

pub use creator::InterpolateCreator;
