//! Reductions by visiting every input element.

use torchtrt_core::layers::ReduceOp;

use super::{Nd, indices};

/// Reduces `axes` (resolved, distinct) of `x`; `int` truncates Mean, L2 and LogSumExp.
pub fn reduce(x: &Nd, op: ReduceOp, axes: &[usize], keep_dims: bool, int: bool) -> Nd {
    let kept_shape: Vec<usize> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); kept_shape.iter().product()];
    for idx in indices(&x.shape) {
        let key: Vec<usize> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| if axes.contains(&d) { 0 } else { i })
            .collect();
        groups[super::ravel(&key, &kept_shape)].push(x.at(&idx));
    }
    let data = groups.iter().map(|g| fold(op, g, int)).collect();
    let shape = if keep_dims {
        kept_shape
    } else {
        x.shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, &n)| n)
            .collect()
    };
    Nd::new(shape, data)
}

fn fold(op: ReduceOp, v: &[f64], int: bool) -> f64 {
    let n = v.len() as f64;
    let sum: f64 = v.iter().sum();
    let r = match op {
        ReduceOp::Sum => sum,
        ReduceOp::Mean => sum / n,
        ReduceOp::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ReduceOp::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
        ReduceOp::Prod => v.iter().product(),
        ReduceOp::L1 => v.iter().map(|x| x.abs()).sum(),
        ReduceOp::L2 => v.iter().map(|x| x * x).sum::<f64>().sqrt(),
        ReduceOp::SumSquare => v.iter().map(|x| x * x).sum(),
        ReduceOp::LogSumExp => {
            let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        }
    };
    if int { r.trunc() } else { r }
}
