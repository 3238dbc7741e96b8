//! The ONNX protobuf messages, generated at build time from the vendored `proto/onnx.proto`.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
