//! Transposes into MatMul: a `Transpose` that only swaps the last two dims and whose result
//! only one `MatMul` reads becomes that MatMul's `transpose_a`/`transpose_b` flag (a GEMM
//! reads either layout at no cost), so the transposed copy is never made. The transpose is
//! left unread, for `compact` to drop.

use super::Work;
use crate::layers::LayerKind;
use crate::network::TensorId;

/// Whether `perm` swaps the last two of its dims and keeps the others.
fn swaps_last_two(perm: &[usize]) -> bool {
    let n = perm.len();
    n >= 2
        && perm[n - 2] == n - 1
        && perm[n - 1] == n - 2
        && perm[..n - 2].iter().enumerate().all(|(i, &p)| i == p)
}

/// Folds every such transpose of `work` into the MatMul that reads it.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    let n = work.tensors.len();
    let mut readers = vec![0usize; n];
    let mut producer: Vec<Option<usize>> = vec![None; n];
    for (i, layer) in work.layers.iter().enumerate() {
        for t in &layer.inputs {
            readers[t.index()] += 1;
        }
        for t in &layer.outputs {
            producer[t.index()] = Some(i);
        }
    }
    for (_, t) in outputs {
        readers[t.index()] += 1;
    }
    for m in 0..work.layers.len() {
        if !matches!(work.layers[m].kind, LayerKind::MatMul(_)) {
            continue;
        }
        for operand in 0..work.layers[m].inputs.len().min(2) {
            let t = work.layers[m].inputs[operand];
            let Some(p) = producer[t.index()] else {
                continue;
            };
            let source = match &work.layers[p].kind {
                LayerKind::Transpose(tr)
                    if swaps_last_two(&tr.perm)
                        && readers[t.index()] == 1
                        && work.devices[p] == work.devices[m] =>
                {
                    work.layers[p].inputs[0]
                }
                _ => continue,
            };
            let layer = &mut work.layers[m];
            if let LayerKind::MatMul(mm) = &mut layer.kind {
                if operand == 0 {
                    mm.transpose_a = !mm.transpose_a;
                } else {
                    mm.transpose_b = !mm.transpose_b;
                }
                layer.inputs[operand] = source;
                readers[t.index()] -= 1;
                readers[source.index()] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::swaps_last_two;

    #[test]
    fn only_a_swap_of_the_last_two_dims_folds() {
        assert!(swaps_last_two(&[1, 0]));
        assert!(swaps_last_two(&[0, 1, 3, 2]));
        assert!(!swaps_last_two(&[0, 2, 1, 3]));
        assert!(!swaps_last_two(&[1, 0, 2]));
        assert!(!swaps_last_two(&[0]));
        assert!(!swaps_last_two(&[0, 1]));
    }
}
