//! Outputs whose length along one axis only the kernel knows (TensorRT's size tensors).

/// Output `output` is as long along `axis` as the value the kernel writes into output
/// `count`, a scalar `i64` (shape `[]` or `[1]`): the boxes non-maximum suppression keeps,
/// the elements a compaction selects. [`crate::Plugin::output_shapes`] gives that axis its
/// upper bound, which is what the host allocates; the kernel writes the output as a
/// contiguous tensor of its actual shape (the upper-bound shape with `axis` set to the
/// count) and the count itself, and the host reads the count after the launch. Layers that
/// read the output see its actual shape; at build time the axis is unknown to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizedOutput {
    /// The output whose axis the count sizes.
    pub output: usize,
    /// The axis of that output.
    pub axis: usize,
    /// The scalar `i64` output holding the length.
    pub count: usize,
}

impl SizedOutput {
    /// Checks the declaration against a plugin's output ranks and dtypes: indices in
    /// range, distinct outputs, a scalar `i64` count.
    pub fn check(
        sized: &[SizedOutput],
        ranks: &[usize],
        dtypes: &[crate::DType],
    ) -> Result<(), String> {
        for (k, s) in sized.iter().enumerate() {
            if s.count == s.output {
                return Err(format!("output {} counts itself", s.output));
            }
            let rank = ranks
                .get(s.output)
                .ok_or_else(|| format!("sized output {} of {} outputs", s.output, ranks.len()))?;
            if s.axis >= *rank {
                return Err(format!(
                    "axis {} of output {} of rank {rank} is sized by a count",
                    s.axis, s.output
                ));
            }
            match (ranks.get(s.count), dtypes.get(s.count)) {
                (Some(0 | 1), Some(crate::DType::I64)) => {}
                (Some(r), Some(d)) => {
                    return Err(format!(
                        "count output {} must be a scalar i64, is {d} of rank {r}",
                        s.count
                    ));
                }
                _ => return Err(format!("count output {} does not exist", s.count)),
            }
            if sized[..k].iter().any(|o| o.output == s.output) {
                return Err(format!("output {} is sized twice", s.output));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn sized(output: usize, axis: usize, count: usize) -> SizedOutput {
        SizedOutput {
            output,
            axis,
            count,
        }
    }

    #[test]
    fn a_scalar_i64_count_of_an_existing_axis_is_accepted() {
        let dtypes = [DType::I64, DType::I64];
        assert_eq!(
            SizedOutput::check(&[sized(0, 0, 1)], &[2, 0], &dtypes),
            Ok(())
        );
        assert_eq!(
            SizedOutput::check(&[sized(0, 1, 1)], &[2, 1], &dtypes),
            Ok(())
        );
    }

    #[test]
    fn bad_declarations_are_named() {
        let dtypes = [DType::F32, DType::I64, DType::F32];
        let ranks = [2, 0, 1];
        let err = |s: &[SizedOutput]| SizedOutput::check(s, &ranks, &dtypes).unwrap_err();
        assert!(err(&[sized(5, 0, 1)]).contains("sized output 5"));
        assert!(err(&[sized(0, 2, 1)]).contains("axis 2 of output 0"));
        assert!(err(&[sized(0, 0, 2)]).contains("scalar i64"));
        assert!(err(&[sized(0, 0, 9)]).contains("does not exist"));
        assert!(err(&[sized(1, 0, 1)]).contains("counts itself"));
        assert!(err(&[sized(0, 0, 1), sized(0, 1, 1)]).contains("sized twice"));
    }
}
