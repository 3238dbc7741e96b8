//! One module of property tests per layer kind.

mod activation;
mod attention;
mod cast;
mod concat;
mod conv_direct;
mod conv_nhwc;
mod conv_packed;
mod convolution;
mod coverage;
mod dynamic;
mod elementwise;
mod gather;
mod indexing_nd;
mod matmul;
mod pooling;
mod quantized;
mod reduce;
mod reduction_paths;
mod reshape;
mod rms_normalization;
mod simd_level;
mod slice;
mod softmax;
mod transpose;
mod unary;
