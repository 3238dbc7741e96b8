//! Compiled GPU programs stored in engines. A CUDA engine carries, as engine blobs, the
//! images of every program compiled for it: the core layers' (`cuda/core/<program>`) and
//! the plugins' (`cuda/plugins/<program>-<source hash>`, compiled through the backend's
//! plugin runtime). Loading the engine installs them, so running it needs the driver only.

use torchtrt_core::EngineBlob;

use crate::nvrtc::KernelImage;

/// Blob-name prefix of every CUDA image.
pub(crate) const PREFIX: &str = "cuda/";
/// Source name of the core layers' programs.
pub(crate) const CORE: &str = "core";
/// Source name of the plugins' programs.
pub(crate) const PLUGINS: &str = "plugins";

/// `image` as a blob of `source`.
pub(crate) fn to_blob(source: &str, image: &KernelImage) -> EngineBlob {
    EngineBlob {
        name: format!("{PREFIX}{source}/{}", image.name),
        data: postcard::to_stdvec(image).unwrap_or_default(),
    }
}

/// The source and image of a CUDA blob; `None` for other backends' blobs, `Err` for a
/// CUDA blob that does not decode.
pub(crate) fn from_blob(blob: &EngineBlob) -> Option<Result<(&str, KernelImage), String>> {
    let rest = blob.name.strip_prefix(PREFIX)?;
    let (source, _) = rest.split_once('/')?;
    Some(
        postcard::from_bytes::<KernelImage>(&blob.data)
            .map(|image| (source, image))
            .map_err(|e| format!("blob `{}` is not a kernel image: {e}", blob.name)),
    )
}
