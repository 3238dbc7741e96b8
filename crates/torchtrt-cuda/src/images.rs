//! Compiled GPU programs stored in engines. A CUDA engine carries, as engine blobs, the
//! images of every program compiled for it: the core layers' (`cuda/core/<program>`, from
//! the backend's [`crate::kernels::Programs`]) and those of libraries that compile their
//! own, such as the built-in plugin library (`cuda/<source>/<program>`), which a host
//! connects through [`KernelImageSource`]. Loading the engine installs them, so running it
//! needs the driver only.

use torchtrt_core::EngineBlob;

use crate::nvrtc::{Arch, KernelImage};

/// Blob-name prefix of every CUDA image.
pub(crate) const PREFIX: &str = "cuda/";
/// Source name of the core layers' programs.
pub(crate) const CORE: &str = "core";

/// A library that compiles its own GPU programs (e.g. a plugin library) and lets engines
/// store and reinstall them.
pub trait KernelImageSource: Send + Sync {
    /// A short unique name, part of the blob names (`plugins`).
    fn name(&self) -> &str;
    /// The programs compiled so far for `arch`.
    fn export(&self, arch: Arch) -> Vec<KernelImage>;
    /// Makes stored programs available so that they load without compiling.
    fn install(&self, images: Vec<KernelImage>) -> Result<(), String>;
}

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
