//! Locating a plan decoding error: the plan is decoded whole by serde; when that fails it is
//! decoded again field by field, in the order the plan's fields are serialized, to name the
//! first field (and layer) that does not decode and its byte offset in the file.

use serde::de::DeserializeOwned;
use torchtrt_plugin_api::{DType, DeviceKind};

use super::{MemoryPlan, Target};
use crate::network::{Layer, NetworkInput, TensorId};

/// Decodes one `T` at `*at`, advancing it; on failure says which field at which offset.
fn field<T: DeserializeOwned>(meta: &[u8], at: &mut usize, name: &str) -> Result<T, String> {
    let rest = &meta[*at..];
    match postcard::take_from_bytes::<T>(rest) {
        Ok((v, tail)) => {
            *at += rest.len() - tail.len();
            Ok(v)
        }
        Err(e) => Err(format!("{name} (at plan byte {}): {e}", *at)),
    }
}

/// The first field of the encoded `(plan, weight records, blobs)` that does not decode, as
/// `layers[3] (at plan byte 812): <reason>`; `None` if every field decodes.
pub(crate) fn locate_error<R: DeserializeOwned, B: DeserializeOwned>(
    meta: &[u8],
) -> Option<String> {
    let mut at = 0usize;
    let mut steps = || -> Result<(), String> {
        field::<Target>(meta, &mut at, "target")?;
        field::<DType>(meta, &mut at, "precision")?;
        field::<Vec<NetworkInput>>(meta, &mut at, "inputs")?;
        field::<Vec<(String, TensorId)>>(meta, &mut at, "outputs")?;
        field::<Vec<String>>(meta, &mut at, "tensor_names")?;
        field::<Vec<DType>>(meta, &mut at, "tensor_dtypes")?;
        let count = field::<u64>(meta, &mut at, "layers (count)")?;
        let mut li = 0u64;
        while li < count {
            field::<Layer>(meta, &mut at, &format!("layers[{li}]"))?;
            li += 1;
        }
        field::<Vec<DeviceKind>>(meta, &mut at, "devices")?;
        field::<MemoryPlan>(meta, &mut at, "memory")?;
        field::<Vec<R>>(meta, &mut at, "weight records")?;
        field::<Vec<B>>(meta, &mut at, "blobs")?;
        Ok(())
    };
    steps().err()
}
