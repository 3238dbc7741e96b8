//! Parameters, buffers and constants: raw storage bytes plus a tensor's sizes, strides,
//! storage offset and dtype. Tensors sharing a storage (tied weights, views) read the same
//! record; every index is checked against the storage before anything is copied.

use torchtrt_core::Tensor;

use crate::dtype::dtype_from_torch;
use crate::schema::{SymInt, TensorMeta};

fn ints(what: &str, v: &[SymInt]) -> Result<Vec<i64>, String> {
    v.iter()
        .map(|s| match s {
            SymInt::Int(i) => Ok(*i),
            SymInt::Expr(e, _) => Err(format!("{what} has a symbolic entry `{e}`")),
        })
        .collect()
}

/// The tensor `meta` describes inside `storage`.
pub fn tensor_from_storage(storage: &[u8], meta: &TensorMeta) -> Result<Tensor, String> {
    if meta.layout != 7 {
        return Err(format!(
            "layout {} is not strided (sparse tensors are not supported)",
            meta.layout
        ));
    }
    let dtype = dtype_from_torch(meta.dtype)?;
    let esize = dtype.size();
    let sizes = ints("sizes", &meta.sizes)?;
    let strides = if meta.strides.is_empty() {
        contiguous_strides(&sizes)
    } else {
        ints("strides", &meta.strides)?
    };
    let offset = ints("storage_offset", std::slice::from_ref(&meta.storage_offset))?[0];
    if strides.len() != sizes.len() {
        return Err(format!(
            "{} sizes but {} strides",
            sizes.len(),
            strides.len()
        ));
    }
    if sizes.iter().any(|&s| s < 0) || strides.iter().any(|&s| s < 0) || offset < 0 {
        return Err(format!(
            "negative sizes {sizes:?}, strides {strides:?} or offset {offset}"
        ));
    }
    let shape: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or("the element count overflows")?;
    if !storage.len().is_multiple_of(esize) {
        return Err(format!(
            "the storage has {} bytes, not a whole number of {dtype} elements",
            storage.len()
        ));
    }
    let elems = (storage.len() / esize) as u128;
    if numel > 0 {
        let last: u128 = offset as u128
            + sizes
                .iter()
                .zip(&strides)
                .map(|(&s, &st)| (s as u128 - 1) * st as u128)
                .sum::<u128>();
        if last >= elems {
            return Err(format!(
                "sizes {sizes:?}, strides {strides:?} and offset {offset} reach element {last}, \
                 but the storage holds {elems}"
            ));
        }
    }
    let mut out = Vec::with_capacity(numel * esize);
    if strides == contiguous_strides(&sizes) {
        let start = offset as usize * esize;
        out.extend_from_slice(&storage[start..start + numel * esize]);
    } else {
        let mut index = vec![0usize; shape.len()];
        for _ in 0..numel {
            let e: usize = offset as usize
                + index
                    .iter()
                    .zip(&strides)
                    .map(|(&i, &s)| i * s as usize)
                    .sum::<usize>();
            out.extend_from_slice(&storage[e * esize..(e + 1) * esize]);
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
    Tensor::from_bytes(dtype, &shape, &out).map_err(|e| e.to_string())
}

/// Row-major strides of `sizes`.
pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(sizes: &[i64], strides: &[i64], offset: i64) -> TensorMeta {
        TensorMeta {
            dtype: 7,
            sizes: sizes.iter().map(|&s| SymInt::Int(s)).collect(),
            strides: strides.iter().map(|&s| SymInt::Int(s)).collect(),
            storage_offset: SymInt::Int(offset),
            layout: 7,
        }
    }

    fn storage(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| (i as f32 * 1.5 - 3.0).to_le_bytes())
            .collect()
    }

    #[test]
    fn views_read_by_strides_and_offset() {
        let s = storage(12);
        let all = tensor_from_storage(&s, &meta(&[3, 4], &[4, 1], 0)).unwrap();
        let v: Vec<f32> = all.as_slice::<f32>().unwrap().to_vec();
        let t = tensor_from_storage(&s, &meta(&[4, 3], &[1, 4], 0)).unwrap();
        let got = t.as_slice::<f32>().unwrap();
        for r in 0..4 {
            for c in 0..3 {
                assert_eq!(got[r * 3 + c], v[c * 4 + r]);
            }
        }
        let tail = tensor_from_storage(&s, &meta(&[2, 2], &[4, 1], 5)).unwrap();
        assert_eq!(tail.as_slice::<f32>().unwrap(), &[v[5], v[6], v[9], v[10]]);
    }

    #[test]
    fn out_of_storage_views_are_refused() {
        let s = storage(12);
        let e = tensor_from_storage(&s, &meta(&[3, 4], &[4, 1], 1)).unwrap_err();
        assert!(e.contains("reach element 12"), "{e}");
        let e = tensor_from_storage(&s, &meta(&[1 << 20, 1 << 20], &[1, 1], 0)).unwrap_err();
        assert!(e.contains("storage holds"), "{e}");
        let e = tensor_from_storage(&s[..7], &meta(&[1], &[1], 0)).unwrap_err();
        assert!(e.contains("whole number"), "{e}");
    }
}
