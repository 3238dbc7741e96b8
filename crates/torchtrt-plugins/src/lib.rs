//! placeholder
pub mod interpolate;
