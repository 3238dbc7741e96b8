//! Built-in converters, one file per op family.

mod activation;
mod cast;
mod concat;
mod constant;
mod elementwise;
mod expand;
mod gather;
mod identity;
mod interpolate;
mod matmul;
mod pad;
mod reshape;
mod resize;
mod select;
mod shape;
mod slice;
mod softmax;
mod split;
mod transpose;
mod unary;
mod util;

use crate::registry::ConverterRegistry;

/// Registers every built-in converter.
pub(crate) fn register(r: &mut ConverterRegistry) {
    activation::register(r);
    cast::register(r);
    concat::register(r);
    constant::register(r);
    elementwise::register(r);
    expand::register(r);
    gather::register(r);
    identity::register(r);
    matmul::register(r);
    pad::register(r);
    reshape::register(r);
    resize::register(r);
    select::register(r);
    shape::register(r);
    slice::register(r);
    softmax::register(r);
    split::register(r);
    transpose::register(r);
    unary::register(r);
}
