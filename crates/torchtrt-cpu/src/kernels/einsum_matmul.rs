//! The Einsum fast path: a two-input equation whose labels are each batch (both inputs
//! and the output), contracted (both inputs only), or free in one input and the output, is
//! a batched gemm between the inputs packed as `[batch, m, k]` and `[batch, k, n]`.

use rayon::prelude::*;

use super::copy::strided_copy;
use super::einsum::Geometry;
use crate::linalg::{GemmElem, MatRef, gemm};
use crate::strided::Strided;
use crate::tensor_access::contiguous_strides;

/// Products smaller than this many multiply-adds run one per task, several at once.
const SMALL_PRODUCT: usize = 1 << 18;

/// A batched matrix product and the walks that pack its operands and unpack its result.
pub(super) struct BatchedMatMul {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    pack_a: Strided<1>,
    pack_b: Strided<1>,
    unpack: Strided<1>,
}

impl BatchedMatMul {
    /// The product for `g`, when `g` is one.
    pub(super) fn of(g: &Geometry) -> Option<BatchedMatMul> {
        let [a, b] = g.inputs.as_slice() else {
            return None;
        };
        let distinct = |v: &[usize]| (0..v.len()).all(|i| !v[..i].contains(&v[i]));
        if !distinct(a) || !distinct(b) {
            return None;
        }
        let (mut batch, mut ms, mut ks, mut ns) = (vec![], vec![], vec![], vec![]);
        for l in 0..g.sizes.len() {
            let class = match (a.contains(&l), b.contains(&l), g.output.contains(&l)) {
                (true, true, true) => &mut batch,
                (true, true, false) => &mut ks,
                (true, false, true) => &mut ms,
                (false, true, true) => &mut ns,
                _ => return None,
            };
            class.push(l);
        }
        let size = |ls: &[usize]| ls.iter().map(|&l| g.sizes[l]).product::<usize>();
        let walk = |ls: Vec<usize>, strides: &[usize]| {
            let shape: Vec<usize> = ls.iter().map(|&l| g.sizes[l]).collect();
            let s: Vec<[isize; 1]> = ls.iter().map(|&l| [strides[l] as isize]).collect();
            Strided::new(&shape, &s, [0])
        };
        let prod: Vec<usize> = [&batch[..], &ms, &ns].concat();
        let prod_shape: Vec<usize> = prod.iter().map(|&l| g.sizes[l]).collect();
        let mut prod_strides = vec![0usize; g.sizes.len()];
        for (&l, s) in prod.iter().zip(contiguous_strides(&prod_shape)) {
            prod_strides[l] = s;
        }
        Some(BatchedMatMul {
            batch: size(&batch),
            m: size(&ms),
            k: size(&ks),
            n: size(&ns),
            pack_a: walk([&batch[..], &ms, &ks].concat(), &g.strides[0]),
            pack_b: walk([&batch[..], &ks, &ns].concat(), &g.strides[1]),
            unpack: walk(g.output.clone(), &prod_strides),
        })
    }

    /// `out` from the two inputs.
    pub(super) fn run<C: GemmElem>(&self, inputs: &[&[C]], out: &mut [C]) -> Result<(), String> {
        let [a, b] = inputs else {
            return Err(format!(
                "Einsum: a matrix product of {} inputs",
                inputs.len()
            ));
        };
        let (m, k, n) = (self.m, self.k, self.n);
        let mut pa = vec![C::ZERO; self.batch * m * k];
        let mut pb = vec![C::ZERO; self.batch * k * n];
        strided_copy(&self.pack_a, a, &mut pa);
        strided_copy(&self.pack_b, b, &mut pb);
        let mut prod = vec![C::ZERO; self.batch * m * n];
        if m * n > 0 {
            let product = |i: usize, dst: &mut [C], parallel: bool| {
                let lhs = MatRef::row_major(&pa[i * m * k..(i + 1) * m * k], m, k);
                let rhs = MatRef::row_major(&pb[i * k * n..(i + 1) * k * n], k, n);
                gemm(dst, lhs, rhs, false, parallel)
            };
            if self.batch > 1 && m * n * k < SMALL_PRODUCT {
                prod.par_chunks_mut(m * n)
                    .enumerate()
                    .try_for_each(|(i, dst)| product(i, dst, false))?;
            } else {
                prod.chunks_mut(m * n)
                    .enumerate()
                    .try_for_each(|(i, dst)| product(i, dst, true))?;
            }
        }
        strided_copy(&self.unpack, &prod, out);
        Ok(())
    }
}
