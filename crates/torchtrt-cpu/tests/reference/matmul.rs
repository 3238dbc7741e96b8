//! `numpy.matmul` with optional transposes of the last two dims.

use super::elementwise::broadcast;
use super::{Nd, indices};

/// `op(a) · op(b)`; rank-1 operands are promoted and the promoted dim dropped.
pub fn matmul(a: &Nd, b: &Nd, transpose_a: bool, transpose_b: bool) -> Nd {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let get_a = |batch: &[usize], i: usize, k: usize| -> f64 {
        if ra == 1 {
            return a.data[k];
        }
        let mut idx = batch_index(batch, &a.shape[..ra - 2]);
        if transpose_a {
            idx.extend([k, i]);
        } else {
            idx.extend([i, k]);
        }
        a.at(&idx)
    };
    let get_b = |batch: &[usize], k: usize, j: usize| -> f64 {
        if rb == 1 {
            return b.data[k];
        }
        let mut idx = batch_index(batch, &b.shape[..rb - 2]);
        if transpose_b {
            idx.extend([j, k]);
        } else {
            idx.extend([k, j]);
        }
        b.at(&idx)
    };
    let (m, k) = match ra {
        1 => (1, a.shape[0]),
        _ if transpose_a => (a.shape[ra - 1], a.shape[ra - 2]),
        _ => (a.shape[ra - 2], a.shape[ra - 1]),
    };
    let n = match rb {
        1 => 1,
        _ if transpose_b => b.shape[rb - 2],
        _ => b.shape[rb - 1],
    };
    let batch = broadcast(
        &a.shape[..ra.saturating_sub(2)],
        &b.shape[..rb.saturating_sub(2)],
    );
    let mut shape = batch.clone();
    if ra > 1 {
        shape.push(m);
    }
    if rb > 1 {
        shape.push(n);
    }
    let mut data = Vec::new();
    for bi in indices(&batch) {
        for i in 0..m {
            for j in 0..n {
                data.push((0..k).map(|kk| get_a(&bi, i, kk) * get_b(&bi, kk, j)).sum());
            }
        }
    }
    Nd::new(shape, data)
}

/// The index into batch dims `dims` that broadcast batch index `batch` reads.
fn batch_index(batch: &[usize], dims: &[usize]) -> Vec<usize> {
    let lead = batch.len() - dims.len();
    dims.iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { batch[lead + d] })
        .collect()
}
