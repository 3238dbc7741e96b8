//! Core-layer CUDA kernels against the CPU backend on random data, f32, f16 and bf16.

#[path = "../common/mod.rs"]
mod common;
mod conv;
mod harness;
mod matmul;
mod modern;
mod quantized;
mod rows;
