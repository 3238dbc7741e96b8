//! Softmax by its definition.

use super::Nd;

/// `e^x / Σ e^x` along `axis` (its logarithm when `log`).
pub fn softmax(x: &Nd, axis: usize, log: bool) -> Nd {
    Nd::from_fn(x.shape.clone(), |idx| {
        let mut other = idx.to_vec();
        let total: f64 = (0..x.shape[axis])
            .map(|j| {
                other[axis] = j;
                x.at(&other).exp()
            })
            .sum();
        let v = x.at(idx);
        if log { v - total.ln() } else { v.exp() / total }
    })
}
