//! `libtriton_torchtrt.so`: a Triton Inference Server backend (`backend: "torchtrt"`) that
//! serves torchtrt engines.
//!
//! A model folder of the repository holds `config.pbtxt` and `<version>/model.engine` (or
//! `model.onnx` / `model.pt2`, compiled when the model loads and cached next to it). The
//! configuration is completed from the engine (inputs, outputs, `max_batch_size`) and
//! checked against it; every instance (`KIND_CPU`, `KIND_GPU`) owns one execution context;
//! requests are batched along the first dim up to `max_batch_size`, and a bad request gets
//! its own error response. See `docs/serving.md`.
//!
//! Triton's functions are looked up in the server process when the backend is initialized
//! (see `ffi.rs`); nothing unwinds into Triton.

pub mod batch;
pub mod config;
pub mod dtype;
mod entry;
mod error;
mod ffi;
mod instance;
mod model;
mod request;
