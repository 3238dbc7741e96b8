//! The matrix-product core shared by MatMul and Convolution: a checked, safe front to the
//! `gemm` crate, the sliding-window geometry, and im2col.
//!
//! Epilogues build on [`gemm()`]'s `accumulate` flag: a bias is written into the destination
//! first and the product added to it. A fused activation runs over the destination rows
//! right after the product, while they are still in cache.

mod epilogue;
mod gemm;
pub(crate) mod gemm_i8;
mod im2col;
mod packed;
#[cfg(target_arch = "x86_64")]
mod packed_avx2;
mod packed_rhs;
#[cfg(target_arch = "x86_64")]
mod packed_rhs_avx2;
mod window;

pub(crate) use epilogue::Epilogue;
pub(crate) use gemm::{GemmElem, MatRef, gemm, gemm_into, via_f32};
pub(crate) use im2col::im2col;
pub(crate) use packed::{Block, Grid, MR, NR, PackedLhs, Rhs, grids, run_block};
pub(crate) use packed_rhs::{Finish, PackedRhs};
pub(crate) use window::{Window, WindowParams};
