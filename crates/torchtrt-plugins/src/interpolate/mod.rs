//! `torch_tensorrt::Interpolate@1`: PyTorch `F.interpolate` (nearest, linear, bilinear,
//! bicubic, trilinear) and `adaptive_{avg,max}_pool{1,2,3}d`, with ONNX `Resize`'s
//! coordinate modes, nearest modes, cubic coefficient, `exclude_outside` and antialias.
//!
//! Kernels run on the CPU in `f32` for f32, f16 and bf16 tensors: per-axis index/weight
//! tables are built once per launch, then separable passes over contiguous rows run in
//! parallel over planes (and over output rows when there are few planes).

#![allow(clippy::result_large_err)]

mod antialias;
mod config;
mod coord;
mod creator;
mod cubic;
mod element;
mod launch;
mod linear;
mod mode;
mod nearest;
mod passes;
mod plan;
mod plugin;
mod poly;
mod pool;
mod separable;
mod size;
mod taps;

pub use creator::InterpolateCreator;
