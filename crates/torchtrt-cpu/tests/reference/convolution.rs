//! Direct N-d cross-correlation (ONNX `Conv`).

use super::{Nd, indices};

/// Convolution parameters, one value per spatial dim.
pub struct ConvParams {
    /// Strides.
    pub strides: Vec<usize>,
    /// Dilations.
    pub dilations: Vec<usize>,
    /// Leading pads.
    pub pads_begin: Vec<usize>,
    /// Trailing pads.
    pub pads_end: Vec<usize>,
    /// Groups.
    pub groups: usize,
}

/// `y[n, m, o…] = b[m] + Σ_{c, k…} x[n, g·C/G + c, o·s + k·d − p] · w[m, c, k…]`.
pub fn conv(x: &Nd, w: &Nd, bias: Option<&Nd>, p: &ConvParams) -> Nd {
    let spatial = x.shape.len() - 2;
    let (batch, c_in) = (x.shape[0], x.shape[1]);
    let (m_out, cg) = (w.shape[0], w.shape[1]);
    let mg = m_out / p.groups;
    let kernel = &w.shape[2..];
    let out_sp: Vec<usize> = (0..spatial)
        .map(|i| {
            let span = x.shape[2 + i] + p.pads_begin[i] + p.pads_end[i];
            (span - p.dilations[i] * (kernel[i] - 1) - 1) / p.strides[i] + 1
        })
        .collect();
    assert_eq!(c_in, cg * p.groups);
    let mut shape = vec![batch, m_out];
    shape.extend(&out_sp);
    Nd::from_fn(shape, |idx| {
        let (n, m, o) = (idx[0], idx[1], &idx[2..]);
        let g = m / mg;
        let mut acc = bias.map_or(0.0, |b| b.data[m]);
        for c in 0..cg {
            for k in indices(kernel) {
                let mut xi = vec![n, g * cg + c];
                let mut inside = true;
                for d in 0..spatial {
                    let pos = (o[d] * p.strides[d] + k[d] * p.dilations[d]) as isize
                        - p.pads_begin[d] as isize;
                    inside &= pos >= 0 && (pos as usize) < x.shape[2 + d];
                    xi.push(pos.max(0) as usize);
                }
                if inside {
                    let mut wi = vec![m, c];
                    wi.extend(&k);
                    acc += x.at(&xi) * w.at(&wi);
                }
            }
        }
        acc
    })
}
