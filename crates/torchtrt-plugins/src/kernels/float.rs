//! The element types the plugins compute on (f32, f16, bf16), converted to and from f32 with
//! branch-free bit arithmetic so that conversion loops vectorise.

use torchtrt_plugin_api::{Element, bf16, f16};

/// A floating-point element that kernels load as f32 and store back, rounding to nearest
/// even.
pub(crate) trait Float: Element + Copy + Send + Sync {
    /// Widens to f32 (exact).
    fn to_f32(self) -> f32;
    /// Narrows from f32, rounding to nearest even.
    fn from_f32(v: f32) -> Self;
}

impl Float for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
}

impl Float for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.to_bits()) << 16)
    }

    #[inline(always)]
    fn from_f32(v: f32) -> bf16 {
        let b = v.to_bits();
        let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
        let quiet_nan = (b >> 16) | 0x40;
        let is_nan = (b & 0x7fff_ffff) > 0x7f80_0000;
        bf16::from_bits((if is_nan { quiet_nan } else { rounded }) as u16)
    }
}

impl Float for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        let h = u32::from(self.to_bits());
        let sign = (h & 0x8000) << 16;
        let em = h & 0x7fff;
        let finite = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000);
        let special = f32::from_bits((em << 13) | 0x7f80_0000);
        let mag = if em >= 0x7c00 { special } else { finite };
        f32::from_bits(mag.to_bits() | sign)
    }

    #[inline(always)]
    fn from_f32(v: f32) -> f16 {
        const F16_OVERFLOW: u32 = (127 + 16) << 23;
        const F16_MIN_NORMAL: u32 = 113 << 23;
        const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
        let b = v.to_bits();
        let sign = (b >> 16) & 0x8000;
        let a = b & 0x7fff_ffff;
        let special = if a > 0x7f80_0000 { 0x7e00 } else { 0x7c00 };
        let denormal = (f32::from_bits(a) + f32::from_bits(DENORM_MAGIC))
            .to_bits()
            .wrapping_sub(DENORM_MAGIC);
        let mant_odd = (a >> 13) & 1;
        let normal = a
            .wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff))
            .wrapping_add(mant_odd)
            >> 13;
        let mag = if a >= F16_OVERFLOW {
            special
        } else if a < F16_MIN_NORMAL {
            denormal
        } else {
            normal
        };
        f16::from_bits((mag | sign) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_match_half() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let ours = Float::to_f32(h);
            let theirs = h.to_f32();
            assert!(ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()));
        }
        let mut state = 0x1234_5678u32;
        for _ in 0..2_000_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let v = f32::from_bits(state);
            let ours = <f16 as Float>::from_f32(v);
            let theirs = f16::from_f32(v);
            assert!(
                ours == theirs || (ours.is_nan() && theirs.is_nan()),
                "{v:e}"
            );
            let ob = <bf16 as Float>::from_f32(v);
            let tb = bf16::from_f32(v);
            assert!(ob == tb || (ob.is_nan() && tb.is_nan()), "{v:e}");
        }
    }
}
