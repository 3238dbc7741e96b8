//! The `.pt2` zip archive (`torch.export.save`): records stored uncompressed under one
//! root folder — `models/<name>.json` (the program), `data/weights/…` and
//! `data/constants/…` (raw tensor bytes with a `*_config.json` each). Every read is
//! bounded: an entry larger than the archive itself, or than the caller's limit, is refused
//! before anything is allocated.

use std::io::{Read, Seek};
use std::path::Path;

use zip::ZipArchive;

use crate::error::{Result, TorchError};

/// Largest JSON record read (the program, payload configs).
pub const MAX_JSON_BYTES: u64 = 1 << 30;

/// An open archive.
pub struct Archive<R: Read + Seek> {
    label: String,
    zip: ZipArchive<R>,
    len: u64,
    root: String,
}

/// Opens `path` as an archive.
pub fn open_file(path: &Path) -> Result<Archive<std::fs::File>> {
    let label = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| TorchError::Io {
        path: label.clone(),
        source,
    })?;
    let len = file
        .metadata()
        .map_err(|source| TorchError::Io {
            path: label.clone(),
            source,
        })?
        .len();
    Archive::new(file, len, label)
}

impl<R: Read + Seek> Archive<R> {
    /// Reads the archive's directory from `reader` (`len` bytes long); `label` names it in
    /// errors.
    pub fn new(reader: R, len: u64, label: String) -> Result<Archive<R>> {
        let zip = ZipArchive::new(reader).map_err(|e| TorchError::Archive {
            path: label.clone(),
            reason: format!("not a zip archive (a torch.export `.pt2` file is one): {e}"),
        })?;
        let mut archive = Archive {
            label,
            zip,
            len,
            root: String::new(),
        };
        archive.root = archive.find_root()?;
        Ok(archive)
    }

    /// The archive's name in errors.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// An error about this archive.
    pub fn err(&self, reason: impl Into<String>) -> TorchError {
        TorchError::Archive {
            path: self.label.clone(),
            reason: reason.into(),
        }
    }

    /// Every record's full path.
    pub fn names(&self) -> Vec<String> {
        self.zip.file_names().map(str::to_string).collect()
    }

    fn find_root(&self) -> Result<String> {
        let names = self.names();
        let legacy = names
            .iter()
            .any(|n| n.rsplit('/').next() == Some("serialized_exported_program.json"));
        if legacy {
            return Err(self.err(
                "a legacy torch.export archive (torch ≤ 2.5: `serialized_exported_program.json` \
                 with pickled weights), which this reader does not read: load it with \
                 torch.export.load and save it again with torch ≥ 2.6",
            ));
        }
        let models: Vec<&String> = names
            .iter()
            .filter(|n| {
                let parts: Vec<&str> = n.split('/').collect();
                parts.len() == 3 && parts[1] == "models" && parts[2].ends_with(".json")
            })
            .collect();
        match models.as_slice() {
            [one] => Ok(one.split('/').next().unwrap_or_default().to_string()),
            [] => Err(self.err(format!(
                "no `<root>/models/<name>.json` record: not a torch.export archive \
                 (records: {})",
                preview(&names)
            ))),
            many => Err(self.err(format!(
                "{} programs in one archive ({}); this reader takes archives with one",
                many.len(),
                preview(&many.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            ))),
        }
    }

    /// The `models/<name>.json` record's path.
    pub fn model_record(&self) -> String {
        let prefix = format!("{}/models/", self.root);
        self.zip
            .file_names()
            .find(|n| n.starts_with(&prefix) && n.ends_with(".json"))
            .unwrap_or_default()
            .to_string()
    }

    /// The full path of `rel` under the archive's root folder.
    pub fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }

    /// Whether the record `name` (a full path) exists.
    pub fn contains(&self, name: &str) -> bool {
        self.zip.index_for_name(name).is_some()
    }

    /// Reads the record `name` (a full path), refusing one larger than `limit` bytes or than
    /// the archive, or stored compressed.
    pub fn read(&mut self, name: &str, limit: u64) -> Result<Vec<u8>> {
        let len = self.len;
        let label = self.label.clone();
        let err = |reason: String| TorchError::Archive {
            path: label.clone(),
            reason: format!("record `{name}`: {reason}"),
        };
        let mut entry = self.zip.by_name(name).map_err(|e| err(e.to_string()))?;
        if entry.compression() != zip::CompressionMethod::Stored {
            return Err(err(format!(
                "stored with {:?} compression; torch.export.save stores records uncompressed",
                entry.compression()
            )));
        }
        let size = entry.size();
        if size > len {
            return Err(err(format!(
                "declares {size} bytes, more than the whole archive ({len} bytes)"
            )));
        }
        if size > limit {
            return Err(err(format!(
                "declares {size} bytes, over the limit of {limit}"
            )));
        }
        let mut out = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(size)
            .read_to_end(&mut out)
            .map_err(|e| err(e.to_string()))?;
        if out.len() as u64 != size {
            return Err(err(format!(
                "holds {} bytes, its header says {size}",
                out.len()
            )));
        }
        Ok(out)
    }

    /// Reads and parses a JSON record.
    pub fn json<T: serde::de::DeserializeOwned>(&mut self, name: &str) -> Result<T> {
        let bytes = self.read(name, MAX_JSON_BYTES)?;
        serde_json::from_slice(&bytes).map_err(|e| self.err(format!("record `{name}`: {e}")))
    }
}

fn preview(names: &[String]) -> String {
    let mut s: Vec<&str> = names.iter().take(6).map(String::as_str).collect();
    if names.len() > 6 {
        s.push("…");
    }
    s.join(", ")
}
