//! Every CPU kernel against the plain references in `reference/`, on random shapes and data.

mod cases;
mod reference;
#[allow(dead_code)]
mod support;
