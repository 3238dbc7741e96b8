//! What a creator's plugins may do beyond plugin API v1, as `torchtrtc plugins` shows it.

/// The plugin API v2 capabilities a creator's plugins may use (some only with some fields,
/// e.g. `Interpolate` takes shape inputs when `size_input` is set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// Shape inputs ([`crate::Plugin::shape_inputs`]).
    pub shape_inputs: bool,
    /// Outputs sized by a count ([`crate::Plugin::sized_outputs`]).
    pub sized_outputs: bool,
    /// Several implementations for the builder to time.
    pub tactics: bool,
    /// Outputs that alias an input ([`crate::Plugin::aliased_input`]).
    pub aliased_outputs: bool,
}

/// Bit of [`Capabilities::shape_inputs`] in the C ABI (`TTRT_CAPABILITY_SHAPE_INPUTS`).
pub const CAPABILITY_SHAPE_INPUTS: u32 = 1;
/// Bit of [`Capabilities::sized_outputs`] (`TTRT_CAPABILITY_SIZED_OUTPUTS`).
pub const CAPABILITY_SIZED_OUTPUTS: u32 = 2;
/// Bit of [`Capabilities::tactics`] (`TTRT_CAPABILITY_TACTICS`).
pub const CAPABILITY_TACTICS: u32 = 4;
/// Bit of [`Capabilities::aliased_outputs`] (`TTRT_CAPABILITY_ALIASED_OUTPUTS`, ABI version 4).
pub const CAPABILITY_ALIASED_OUTPUTS: u32 = 8;

impl Capabilities {
    /// The C ABI's bit set.
    pub fn bits(self) -> u32 {
        [
            (self.shape_inputs, CAPABILITY_SHAPE_INPUTS),
            (self.sized_outputs, CAPABILITY_SIZED_OUTPUTS),
            (self.tactics, CAPABILITY_TACTICS),
            (self.aliased_outputs, CAPABILITY_ALIASED_OUTPUTS),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .fold(0, |bits, (_, bit)| bits | bit)
    }

    /// From the C ABI's bit set; unknown bits are ignored.
    pub fn from_bits(bits: u32) -> Capabilities {
        Capabilities {
            shape_inputs: bits & CAPABILITY_SHAPE_INPUTS != 0,
            sized_outputs: bits & CAPABILITY_SIZED_OUTPUTS != 0,
            tactics: bits & CAPABILITY_TACTICS != 0,
            aliased_outputs: bits & CAPABILITY_ALIASED_OUTPUTS != 0,
        }
    }

    /// The names of the capabilities present (`shape inputs`, `sized outputs`, `tactics`,
    /// `aliased outputs`).
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.shape_inputs, "shape inputs"),
            (self.sized_outputs, "sized outputs"),
            (self.tactics, "tactics"),
            (self.aliased_outputs, "aliased outputs"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_and_name_what_is_set() {
        for bits in 0..16 {
            assert_eq!(Capabilities::from_bits(bits).bits(), bits);
        }
        let c = Capabilities {
            shape_inputs: true,
            tactics: true,
            aliased_outputs: true,
            ..Capabilities::default()
        };
        assert_eq!(c.names(), ["shape inputs", "tactics", "aliased outputs"]);
        assert_eq!(Capabilities::from_bits(0xfff0), Capabilities::default());
    }
}
