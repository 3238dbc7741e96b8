//! Bounded file reads: at most what a format allows, from regular files, devices and
//! pipes alike, so `/dev/zero` or an endless pipe is an error rather than a read that
//! fills memory.

use std::io::Read;
use std::path::Path;

/// Reads at most `limit` bytes of `path`; a longer file is an `InvalidData` error that
/// names `what` and the limit (nothing past `limit + 1` bytes is read).
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let hint = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(0, |m| m.len().min(limit));
    let mut out = Vec::new();
    out.try_reserve_exact(hint as usize)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
    file.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes, the limit for {what}"),
        ));
    }
    Ok(out)
}

/// Reads an engine file: the header, then at most the body length the header announces
/// (one byte more, so a padded file is still recognised as such by the engine reader).
/// A file that does not start with an engine header is returned as its first 64 bytes.
pub fn read_engine(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    (&mut file).take(64).read_to_end(&mut out)?;
    if out.len() < 64 || out[..8] != crate::engine::MAGIC {
        return Ok(out);
    }
    let body = u64::from_le_bytes(out[24..32].try_into().unwrap_or([0; 8]));
    let limit = body.min(crate::limits::physical_memory());
    file.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    Ok(out)
}
