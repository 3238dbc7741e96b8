//! A contiguous tensor reduced over some axes, seen as `[outer…, reduced…, inner]`.

use crate::tensor_access::contiguous_strides;

/// How a reduction reads its input. Output element `(o, i)` (row `o`, `i < inner`) reduces
/// `x[outer[o] + s + k + i]` for every `s` in `starts` and `k < run`.
///
/// Dims of size 1 are dropped and neighbouring dims that are both kept or both reduced are
/// merged, so `inner` is the longest trailing kept run and, when `inner` is 1, `run` the
/// longest trailing reduced run: a reduction over the last axes reads consecutive
/// elements, one over leading or middle axes reads rows of `inner` consecutive elements.
#[derive(Clone, Debug)]
pub(crate) struct ReducePlan {
    /// Input offset of each output row.
    pub(crate) outer: Offsets,
    /// Offsets of the reduced runs, relative to a row's offset.
    pub(crate) starts: Offsets,
    /// Consecutive reduced elements at each start (1 when `inner > 1`).
    pub(crate) run: usize,
    /// Length of the trailing kept dims (1 when the last dim is reduced).
    pub(crate) inner: usize,
}

impl ReducePlan {
    /// The plan for reducing `axes` (sorted, distinct) of a row-major `shape`.
    pub(crate) fn new(shape: &[usize], axes: &[usize]) -> ReducePlan {
        let strides = contiguous_strides(shape);
        let mut groups: Vec<(bool, usize, usize)> = Vec::new();
        for (d, (&size, &stride)) in shape.iter().zip(&strides).enumerate() {
            if size == 1 {
                continue;
            }
            let reduced = axes.contains(&d);
            match groups.last_mut() {
                Some((r, n, s)) if *r == reduced => {
                    *n *= size;
                    *s = stride;
                }
                _ => groups.push((reduced, size, stride)),
            }
        }
        let mut inner = 1;
        if let Some(&(false, n, _)) = groups.last() {
            inner = n;
            groups.pop();
        }
        let mut run = 1;
        if let (1, Some(&(true, n, _))) = (inner, groups.last()) {
            run = n;
            groups.pop();
        }
        let dims = |reduced: bool| -> Vec<(usize, usize)> {
            groups
                .iter()
                .filter(|g| g.0 == reduced)
                .map(|g| (g.1, g.2))
                .collect()
        };
        ReducePlan {
            outer: Offsets::of(&dims(false)),
            starts: Offsets::of(&dims(true)),
            run,
            inner,
        }
    }

    /// Number of elements each output element reduces.
    pub(crate) fn count(&self) -> usize {
        self.starts.len() * self.run
    }

    /// Number of output rows.
    pub(crate) fn rows(&self) -> usize {
        self.outer.len()
    }

    /// True when every row reduces one run of consecutive elements.
    pub(crate) fn is_one_run(&self) -> bool {
        self.inner == 1 && self.starts.len() == 1
    }
}

/// The offsets of every index of some dims, row-major: one stride when there is at most
/// one dim, else listed.
#[derive(Clone, Debug)]
pub(crate) enum Offsets {
    /// `i · stride` for `i < len`.
    Strided {
        /// Number of offsets.
        len: usize,
        /// Distance between consecutive offsets.
        stride: usize,
    },
    /// Every offset.
    Listed(Vec<usize>),
}

impl Offsets {
    /// The offsets of `dims` (size, stride).
    fn of(dims: &[(usize, usize)]) -> Offsets {
        match dims {
            [] => Offsets::Strided { len: 1, stride: 0 },
            &[(len, stride)] => Offsets::Strided { len, stride },
            _ => Offsets::Listed(offsets(dims)),
        }
    }

    /// Offset `i`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> usize {
        match self {
            Offsets::Strided { stride, .. } => i * stride,
            Offsets::Listed(v) => v[i],
        }
    }

    /// Number of offsets.
    pub(crate) fn len(&self) -> usize {
        match self {
            Offsets::Strided { len, .. } => *len,
            Offsets::Listed(v) => v.len(),
        }
    }

    /// Offsets `range`, in order.
    #[inline(always)]
    pub(crate) fn range(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = usize> + Clone + '_ {
        range.map(move |i| self.get(i))
    }
}

/// Offsets of every index of `dims` (size, stride), row-major.
fn offsets(dims: &[(usize, usize)]) -> Vec<usize> {
    let mut out = vec![0usize];
    for &(size, stride) in dims {
        out = out
            .iter()
            .flat_map(|&base| (0..size).map(move |i| base + i * stride))
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ReducePlan;

    #[test]
    fn trailing_axes_are_one_run() {
        let p = ReducePlan::new(&[8, 64, 64, 64], &[2, 3]);
        assert_eq!(
            (p.rows(), p.starts.len(), p.run, p.inner),
            (512, 1, 4096, 1)
        );
        assert_eq!(p.outer.get(3), 3 * 4096);
    }

    #[test]
    fn middle_axes_read_rows() {
        let p = ReducePlan::new(&[2, 3, 1, 4, 5], &[1, 2, 3]);
        assert_eq!((p.rows(), p.run, p.inner), (2, 1, 5));
        assert_eq!(p.starts.len(), 12);
        assert_eq!(p.starts.get(4), 20);
        assert_eq!((p.outer.get(0), p.outer.get(1)), (0, 60));
    }

    #[test]
    fn split_reduced_axes_keep_their_last_run() {
        let p = ReducePlan::new(&[2, 3, 4, 5], &[1, 3]);
        assert_eq!((p.rows(), p.run, p.inner, p.count()), (8, 5, 1, 15));
        let starts: Vec<usize> = p.starts.range(0..3).collect();
        assert_eq!(starts, vec![0, 20, 40]);
        let outer: Vec<usize> = p.outer.range(0..5).collect();
        assert_eq!(outer, vec![0, 5, 10, 15, 60]);
    }

    #[test]
    fn scalars_and_empty_dims() {
        let p = ReducePlan::new(&[], &[]);
        assert_eq!((p.rows(), p.count(), p.inner), (1, 1, 1));
        let p = ReducePlan::new(&[3, 0], &[1]);
        assert_eq!((p.rows(), p.count()), (3, 0));
    }
}
