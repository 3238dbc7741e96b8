//! Built-in converters, one file per op family.

mod activation;
mod elementwise;
mod matmul;
mod unary;
mod util;

use crate::registry::ConverterRegistry;

/// Registers every built-in converter.
pub(crate) fn register(r: &mut ConverterRegistry) {
    activation::register(r);
    elementwise::register(r);
    matmul::register(r);
    unary::register(r);
}
