//! Built-in converters, one file per op family.

mod activation;
mod attention;
mod clamp;
mod conv;
mod creation;
mod detection;
mod elementwise;
mod embedding;
mod index;
mod interpolate;
mod linear;
mod misc;
mod norm;
mod pool;
mod reduce;
mod softmax;
mod sym;
mod unary;
pub(crate) mod util;
mod view;

use crate::registry::ConverterRegistry;

/// Registers every built-in converter.
pub(crate) fn register(r: &mut ConverterRegistry) {
    activation::register(r);
    attention::register(r);
    clamp::register(r);
    conv::register(r);
    creation::register(r);
    detection::register(r);
    elementwise::register(r);
    embedding::register(r);
    index::register(r);
    interpolate::register(r);
    linear::register(r);
    misc::register(r);
    norm::register(r);
    pool::register(r);
    reduce::register(r);
    softmax::register(r);
    sym::register(r);
    unary::register(r);
    view::register(r);
}
