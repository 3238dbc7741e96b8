//! Implementations a plugin offers for the builder to time (TensorRT's plugin tactics).

/// One implementation of a plugin, as [`crate::Plugin::tactics`] lists it: the builder runs
/// each on the build machine at the profile's optimum shapes, keeps the fastest, and the
/// engine remembers it. `id` is the plugin's own and nonzero (`0` means "the plugin's
/// default", what runs when nothing was chosen).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Tactic {
    /// Nonzero identifier, stable across builds and library versions that keep the tactic.
    pub id: u32,
    /// A short name for `inspect` and logs (`rows`, `windows`, `avx512-narrow`).
    pub name: String,
}

impl Tactic {
    /// A tactic with this id and name.
    pub fn new(id: u32, name: &str) -> Tactic {
        Tactic {
            id,
            name: name.to_string(),
        }
    }

    /// Checks a plugin's list: ids nonzero and distinct, names non-empty.
    pub fn check(tactics: &[Tactic]) -> Result<(), String> {
        for (k, t) in tactics.iter().enumerate() {
            if t.id == 0 {
                return Err(format!(
                    "tactic `{}` has id 0, which means the default",
                    t.name
                ));
            }
            if t.name.is_empty() {
                return Err(format!("tactic {} has no name", t.id));
            }
            if tactics[..k].iter().any(|u| u.id == t.id) {
                return Err(format!("tactic id {} is listed twice", t.id));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_zero_duplicate_and_unnamed_ids() {
        assert!(Tactic::check(&[Tactic::new(1, "a"), Tactic::new(2, "b")]).is_ok());
        assert!(
            Tactic::check(&[Tactic::new(0, "a")])
                .unwrap_err()
                .contains("id 0")
        );
        assert!(
            Tactic::check(&[Tactic::new(3, "a"), Tactic::new(3, "b")])
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            Tactic::check(&[Tactic::new(4, "")])
                .unwrap_err()
                .contains("no name")
        );
    }
}
