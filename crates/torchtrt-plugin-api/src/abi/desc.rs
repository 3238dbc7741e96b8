//! Tensor and port descriptions across the ABI.

use super::ptr;
use super::types::{TTRT_MAX_DIMS, TtrtPortDesc, TtrtTensorDesc};
use crate::dtype::{DType, PortDesc, TensorDesc, TensorFormat};

/// The C form of `desc`; an error beyond [`TTRT_MAX_DIMS`] dimensions.
pub(crate) fn to_raw(desc: &TensorDesc) -> Result<TtrtTensorDesc, String> {
    let rank = desc.rank();
    if rank > TTRT_MAX_DIMS {
        return Err(format!(
            "tensor {desc} has {rank} dimensions; the ABI carries at most {TTRT_MAX_DIMS}"
        ));
    }
    let mut dims = [0i64; TTRT_MAX_DIMS];
    dims[..rank].copy_from_slice(&desc.shape);
    Ok(TtrtTensorDesc {
        dtype: desc.dtype as i32,
        format: desc.format as i32,
        nb_dims: ptr::to_count(rank, "dimensions")?,
        reserved: 0,
        dims,
    })
}

/// The C forms of `descs`.
pub(crate) fn to_raw_all(descs: &[TensorDesc]) -> Result<Vec<TtrtTensorDesc>, String> {
    descs.iter().map(to_raw).collect()
}

/// Reads a C description, checking dtype, format and rank.
pub(crate) fn from_raw(raw: &TtrtTensorDesc) -> Result<TensorDesc, String> {
    let dtype = DType::from_raw(raw.dtype).ok_or_else(|| format!("unknown dtype {}", raw.dtype))?;
    let format = TensorFormat::from_raw(raw.format)
        .ok_or_else(|| format!("unknown tensor format {}", raw.format))?;
    let rank = ptr::count(raw.nb_dims, "nb_dims")?;
    let dims = raw
        .dims
        .get(..rank)
        .ok_or_else(|| format!("{rank} dimensions; the ABI carries at most {TTRT_MAX_DIMS}"))?;
    Ok(TensorDesc {
        dtype,
        shape: dims.to_vec(),
        format,
    })
}

/// Reads `nb` C descriptions at `descs`.
///
/// # Safety
/// A non-NULL `descs` must point to `nb` descriptions.
pub(crate) unsafe fn from_raw_all(
    descs: *const TtrtTensorDesc,
    nb: i32,
    what: &str,
) -> Result<Vec<TensorDesc>, String> {
    let nb = ptr::count(nb, what)?;
    // SAFETY: forwarded from the caller.
    let raw = unsafe { ptr::slice(descs, nb, what) }?;
    raw.iter()
        .enumerate()
        .map(|(i, d)| from_raw(d).map_err(|e| format!("{what} {i}: {e}")))
        .collect()
}

/// The C form of a port.
pub(crate) fn port_to_raw(port: &PortDesc) -> TtrtPortDesc {
    TtrtPortDesc {
        dtype: port.dtype as i32,
        format: port.format as i32,
    }
}

/// Reads a C port; `None` for unknown discriminants.
pub(crate) fn port_from_raw(raw: &TtrtPortDesc) -> Option<PortDesc> {
    Some(PortDesc {
        dtype: DType::from_raw(raw.dtype)?,
        format: TensorFormat::from_raw(raw.format)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_high_rank() {
        let d = TensorDesc::new(DType::BF16, vec![2, -1, 5]);
        assert_eq!(to_raw(&d).and_then(|r| from_raw(&r)), Ok(d));
        assert!(to_raw(&TensorDesc::new(DType::F32, vec![1; 9])).is_err());
        let mut bad = to_raw(&TensorDesc::new(DType::F32, vec![1])).expect("rank 1");
        bad.dtype = 77;
        assert_eq!(from_raw(&bad), Err("unknown dtype 77".to_string()));
        bad.dtype = 0;
        bad.nb_dims = 9;
        assert!(from_raw(&bad).is_err());
    }
}
