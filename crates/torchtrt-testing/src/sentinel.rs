//! What fills every output buffer before a kernel runs, so that an element the kernel never
//! writes cannot match its reference.

/// The byte that fills floating-point outputs: all-ones is a NaN in f16, bf16, f32 and f64,
/// which matches no finite or infinite reference (a zero-ish fill would pass wherever the
/// reference is near zero).
pub const FLOAT_BYTE: u8 = 0xFF;

/// The byte that fills integer and bool outputs: an i64 of −6.5e18, an i32 of −1.5e9, and a
/// bool that is neither 0 nor 1.
pub const INT_BYTE: u8 = 0xA5;

/// The fill byte for an element type.
pub fn byte(is_float: bool) -> u8 {
    if is_float { FLOAT_BYTE } else { INT_BYTE }
}

/// `len` bytes of sentinel, for an output buffer about to be written by a kernel.
pub fn filled(len: usize, is_float: bool) -> Vec<u8> {
    vec![byte(is_float); len]
}
