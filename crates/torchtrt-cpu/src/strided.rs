//! Index math for reading `K` inputs through strides while writing a dense output:
//! numpy broadcasting, transposes and slices all reduce to a [`Strided`] walk.

use crate::tensor_access::contiguous_strides;

/// Strides (in elements) that read an input of shape `input` broadcast to `out`; errors when
/// the shapes do not broadcast.
pub(crate) fn broadcast_strides(input: &[usize], out: &[usize]) -> Result<Vec<isize>, String> {
    if input.len() > out.len() {
        return Err(format!("{input:?} does not broadcast to {out:?}"));
    }
    let lead = out.len() - input.len();
    let contiguous = contiguous_strides(input);
    (0..out.len())
        .map(|i| match i.checked_sub(lead) {
            None => Ok(0),
            Some(j) if input[j] == out[i] => Ok(contiguous[j] as isize),
            Some(j) if input[j] == 1 => Ok(0),
            Some(_) => Err(format!("{input:?} does not broadcast to {out:?}")),
        })
        .collect()
}

/// The numpy broadcast of two concrete shapes.
pub(crate) fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let da = (i + a.len()).checked_sub(rank).map_or(1, |j| a[j]);
            let db = (i + b.len()).checked_sub(rank).map_or(1, |j| b[j]);
            match (da, db) {
                _ if da == db => Ok(da),
                (1, _) => Ok(db),
                (_, 1) => Ok(da),
                _ => Err(format!("shapes {a:?} and {b:?} do not broadcast")),
            }
        })
        .collect()
}

/// A walk over a dense row-major output of `len` elements in which input `k` is read at
/// `base[k] + Σ index[d] · strides[d][k]`. Dims of size 1 are dropped and neighbouring dims
/// that step evenly are merged, so the innermost dim is as long as possible.
pub(crate) struct Strided<const K: usize> {
    dims: Vec<usize>,
    strides: Vec<[isize; K]>,
    base: [isize; K],
}

impl<const K: usize> Strided<K> {
    /// A walk over `shape` with per-dim input strides and input base offsets.
    pub(crate) fn new(shape: &[usize], strides: &[[isize; K]], base: [isize; K]) -> Strided<K> {
        let mut dims: Vec<usize> = Vec::with_capacity(shape.len());
        let mut merged: Vec<[isize; K]> = Vec::with_capacity(shape.len());
        for (&d, s) in shape.iter().zip(strides) {
            if d == 1 {
                continue;
            }
            if let (Some(last_d), Some(last_s)) = (dims.last_mut(), merged.last_mut())
                && (0..K).all(|k| last_s[k] == s[k] * d as isize)
            {
                *last_d *= d;
                *last_s = *s;
                continue;
            }
            dims.push(d);
            merged.push(*s);
        }
        Strided {
            dims,
            strides: merged,
            base,
        }
    }

    /// Dims and strides after merging.
    pub(crate) fn dims(&self) -> (&[usize], &[[isize; K]], [isize; K]) {
        (&self.dims, &self.strides, self.base)
    }

    /// The strides of the innermost dim.
    pub(crate) fn inner_strides(&self) -> [isize; K] {
        self.strides.last().copied().unwrap_or([1; K])
    }

    /// Calls `f(out_offset, input_offsets, len)` for each run of the innermost dim that
    /// overlaps output elements `start..end`; along a run input `k` steps by
    /// `inner_strides()[k]`.
    pub(crate) fn for_each_run(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(usize, [usize; K], usize),
    ) {
        let rank = self.dims.len();
        if start >= end {
            return;
        }
        if rank == 0 {
            f(start, self.base.map(|b| b as usize), 1);
            return;
        }
        let mut index = vec![0usize; rank];
        let mut rest = start;
        for d in (0..rank).rev() {
            index[d] = rest % self.dims[d];
            rest /= self.dims[d];
        }
        let inner = self.dims[rank - 1];
        let mut pos = start;
        while pos < end {
            let len = (inner - index[rank - 1]).min(end - pos);
            let mut offsets = self.base;
            for (d, &i) in index.iter().enumerate() {
                for (o, s) in offsets.iter_mut().zip(self.strides[d]) {
                    *o += i as isize * s;
                }
            }
            f(pos, offsets.map(|o| o as usize), len);
            pos += len;
            index[rank - 1] += len;
            let mut d = rank - 1;
            while index[d] == self.dims[d] && d > 0 {
                index[d] = 0;
                d -= 1;
                index[d] += 1;
            }
        }
    }
}
