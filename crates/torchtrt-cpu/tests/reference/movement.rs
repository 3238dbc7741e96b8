//! Data movement by index math: transpose, concat, slice, gather.

use super::Nd;

/// `out[i…] = x[i at perm…]`: output dim `d` is input dim `perm[d]`.
pub fn transpose(x: &Nd, perm: &[usize]) -> Nd {
    let shape = perm.iter().map(|&p| x.shape[p]).collect();
    Nd::from_fn(shape, |idx| {
        let mut src = vec![0; perm.len()];
        for (d, &p) in perm.iter().enumerate() {
            src[p] = idx[d];
        }
        x.at(&src)
    })
}

/// Joins `xs` along `axis`.
pub fn concat(xs: &[Nd], axis: usize) -> Nd {
    let mut shape = xs[0].shape.clone();
    shape[axis] = xs.iter().map(|x| x.shape[axis]).sum();
    Nd::from_fn(shape, |idx| {
        let mut pos = idx[axis];
        for x in xs {
            if pos < x.shape[axis] {
                let mut src = idx.to_vec();
                src[axis] = pos;
                return x.at(&src);
            }
            pos -= x.shape[axis];
        }
        unreachable!("index inside the joined axis")
    })
}

/// The elements a slice `start:end:step` takes from a dim of `len`, clamped as the ONNX
/// spec says (and onnxruntime does): for negative steps `start` to `[0, len − 1]`, `end` to
/// `[−1, len − 1]`.
pub fn slice_positions(len: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    let n = len as i64;
    let wrap = |v: i64| if v < 0 { v + n } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let mut i = wrap(start).clamp(0, n);
        let e = wrap(end).clamp(0, n);
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let mut i = wrap(start).clamp(0, n - 1);
        let e = wrap(end).clamp(-1, n - 1);
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

/// Takes `positions[d]` along each dim `d`.
pub fn select(x: &Nd, positions: &[Vec<usize>]) -> Nd {
    let shape = positions.iter().map(Vec::len).collect();
    Nd::from_fn(shape, |idx| {
        let src: Vec<usize> = idx.iter().zip(positions).map(|(&i, p)| p[i]).collect();
        x.at(&src)
    })
}

/// ONNX `Gather` along `axis` with (already non-negative) `indices` of shape `idx_shape`.
pub fn gather(x: &Nd, axis: usize, indices: &[usize], idx_shape: &[usize]) -> Nd {
    let mut shape = x.shape[..axis].to_vec();
    shape.extend(idx_shape);
    shape.extend(&x.shape[axis + 1..]);
    let r = idx_shape.len();
    Nd::from_fn(shape, |idx| {
        let k = super::ravel(&idx[axis..axis + r], idx_shape);
        let mut src = idx[..axis].to_vec();
        src.push(indices[k]);
        src.extend(&idx[axis + r..]);
        x.at(&src)
    })
}
