//! The engine file: a 64-byte header, then a postcard-encoded plan, then the weights, each
//! aligned to 64 bytes from the start of the file so the file can be memory-mapped.
//!
//! ```text
//! 0   magic "TTRTENG\0"      8   format version (u32 LE)   12  target kind (u32: 0 cpu, 1 cuda)
//! 16  cc major (u32)         20  cc minor (u32)            24  body length (u64)
//! 32  body checksum (u64)    40  flags (u32: bit 0 TF32)   44  reserved, zero up to 64
//! 64  body: meta length (u64), meta (postcard: plan, weight records, blobs), zero
//!     padding, weights
//! ```
//!
//! Blobs (since version 3) are named opaque byte strings the backend stores, e.g. compiled
//! GPU programs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use torchtrt_plugin_api::{DType, PluginCreator, PluginKey, create_plugin};

use super::decode::locate_error;
use super::validate::{WeightSpan, check_plan, check_weights};
use super::{EngineBlob, EnginePlan, Target};
use crate::backend::PrepareOptions;
use crate::error::{Error, Result};
use crate::kernel_plugin::{self, KernelPluginCreator};
use crate::layers::{Constant, LayerKind};
use crate::registry::PluginRegistry;
use crate::tensor::{ALIGN, Tensor};

/// The first bytes of every engine file.
pub const MAGIC: [u8; 8] = *b"TTRTENG\0";
/// The format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 5;
const HEADER: usize = 64;
/// Header flag: f32 matrix products may use TF32 ([`PrepareOptions::tf32`]).
const FLAG_TF32: u32 = 1;

#[derive(Serialize, Deserialize)]
struct WeightRecord {
    dtype: DType,
    shape: Vec<u64>,
    offset: u64,
    len: u64,
}

/// The header's body checksum: a 64-bit FNV-style hash over 8-byte words; any change within
/// one word changes it. Public for tools that rewrite engine files.
pub fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h ^ w).wrapping_mul(PRIME);
        h ^= h >> 29;
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(PRIME);
    h ^ (h >> 32)
}

fn pad_to(buf: &mut Vec<u8>, align: usize) {
    buf.resize(buf.len().div_ceil(align) * align, 0);
}

/// Serializes a plan with its weights and the backend's blobs.
pub(crate) fn serialize(plan: &EnginePlan, blobs: &[EngineBlob]) -> Vec<u8> {
    let mut plan = plan.clone();
    let mut values: Vec<Arc<Tensor>> = Vec::new();
    for layer in &mut plan.layers {
        if let LayerKind::Constant(c) = &mut layer.kind {
            c.slot = values.len() as u32;
            values.push(c.value.clone());
        }
    }
    let mut records: Vec<WeightRecord> = values
        .iter()
        .map(|v| WeightRecord {
            dtype: v.dtype(),
            shape: v.shape().iter().map(|&d| d as u64).collect(),
            offset: 0,
            len: v.bytes().len() as u64,
        })
        .collect();
    let encode = |records: &[WeightRecord], plan: &EnginePlan| {
        postcard::to_stdvec(&(plan, records, blobs)).unwrap_or_default()
    };
    let meta_len = |records: &[WeightRecord]| encode(records, &plan).len();
    let mut offset_base = (HEADER + 8 + meta_len(&records)).div_ceil(ALIGN) * ALIGN;
    loop {
        let mut off = offset_base as u64;
        for r in &mut records {
            r.offset = off;
            off += r.len.div_ceil(ALIGN as u64) * ALIGN as u64;
        }
        let needed = (HEADER + 8 + meta_len(&records)).div_ceil(ALIGN) * ALIGN;
        if needed <= offset_base {
            break;
        }
        offset_base = needed;
    }
    let meta = encode(&records, &plan);
    let mut body = Vec::new();
    body.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    body.extend_from_slice(&meta);
    for (r, v) in records.iter().zip(&values) {
        body.resize(r.offset as usize - HEADER, 0);
        body.extend_from_slice(v.bytes());
    }
    pad_to(&mut body, 8);
    let (kind, major, minor) = match plan.target {
        Target::Cpu => (0u32, 0u32, 0u32),
        Target::Cuda { major, minor } => (1, major, minor),
    };
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&major.to_le_bytes());
    out.extend_from_slice(&minor.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&body).to_le_bytes());
    out.extend_from_slice(&flags(&plan.options).to_le_bytes());
    out.resize(HEADER, 0);
    out.extend_from_slice(&body);
    out
}

/// The header flags of `options`.
fn flags(options: &PrepareOptions) -> u32 {
    if options.tf32 { FLAG_TF32 } else { 0 }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Reads the header and the body; re-creates plugins through `registry`.
pub(crate) fn deserialize(
    bytes: &[u8],
    registry: &PluginRegistry,
) -> Result<(EnginePlan, Vec<EngineBlob>)> {
    let (mut plan, blobs) = read(bytes)?;
    let carried = carried_plugins(&plan, &blobs)?;
    for layer in &mut plan.layers {
        if let LayerKind::Plugin(p) = &mut layer.kind {
            if let Some(creator) = carried.get(&p.key) {
                let plugin = create_plugin(creator, &layer.name, &p.fields).map_err(|source| {
                    Error::Plugin {
                        context: format!("layer `{}`", layer.name),
                        source,
                    }
                })?;
                p.package = Some(creator.package());
                p.set_plugin(Arc::from(plugin));
                continue;
            }
            let (plugin, _) =
                registry
                    .create(&p.key, &layer.name, &p.fields)
                    .map_err(|e| match e {
                        Error::PluginNotFound {
                            namespace,
                            name,
                            version,
                            ..
                        } => Error::PluginNotFound {
                            namespace,
                            name,
                            version,
                            library: p.library.clone().or_else(|| p.provider.clone()),
                        },
                        other => other,
                    })?;
            p.set_plugin(Arc::from(plugin));
        }
    }
    super::configure_plugins(&mut plan)?;
    Ok((plan, blobs))
}

/// The kernel plugins the engine carries, for its plugin layers of their keys (they win
/// over the registry: the engine runs the code it was built with).
fn carried_plugins(
    plan: &EnginePlan,
    blobs: &[EngineBlob],
) -> Result<BTreeMap<PluginKey, KernelPluginCreator>> {
    let used: BTreeSet<String> = plan
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Plugin(p) => Some(p.key.to_string()),
            _ => None,
        })
        .collect();
    let mut out = BTreeMap::new();
    for blob in blobs {
        let Some(name) = blob.name.strip_prefix(kernel_plugin::BLOB_PREFIX) else {
            continue;
        };
        if !used.contains(name) {
            continue;
        }
        let creator = kernel_plugin::from_blob(blob).map_err(Error::Engine)?;
        out.insert(creator.key(), creator);
    }
    Ok(out)
}

/// Reads and checks the header and the body, weights included, leaving plugin layers as
/// records (key, fields, provenance) without plugins; with the stored blobs.
pub(crate) fn read(bytes: &[u8]) -> Result<(EnginePlan, Vec<EngineBlob>)> {
    let err = |m: String| Error::Engine(m);
    if bytes.len() < HEADER {
        return Err(err(format!(
            "truncated: {} bytes, shorter than the {HEADER}-byte header",
            bytes.len()
        )));
    }
    if bytes[..8] != MAGIC {
        let same = bytes[..8]
            .iter()
            .zip(&MAGIC)
            .filter(|(a, b)| a == b)
            .count();
        return Err(err(if same >= MAGIC.len() - 2 {
            format!(
                "damaged engine: the magic bytes are {:?}, expected {:?}",
                bytes[..8].escape_ascii().to_string(),
                MAGIC.escape_ascii().to_string()
            )
        } else {
            "not a torchtrt engine (bad magic bytes)".into()
        }));
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(err(format!(
            "format version {version}; this build reads version {FORMAT_VERSION}"
        )));
    }
    let target = match (u32_at(bytes, 12), u32_at(bytes, 16), u32_at(bytes, 20)) {
        (0, 0, 0) => Target::Cpu,
        (1, major, minor) => Target::Cuda { major, minor },
        (k, _, _) => return Err(err(format!("unknown target kind {k} in the header"))),
    };
    let body_len = u64_at(bytes, 24);
    let body = &bytes[HEADER..];
    if body_len != body.len() as u64 {
        return Err(err(format!(
            "truncated or padded: the header announces {body_len} body bytes, the file has {}",
            body.len()
        )));
    }
    let flags = u32_at(bytes, 40);
    if flags & !FLAG_TF32 != 0 {
        return Err(err(format!(
            "unknown header flags {flags:#x} (this build knows {FLAG_TF32:#x}: TF32)"
        )));
    }
    if bytes[44..HEADER].iter().any(|&b| b != 0) {
        return Err(err("reserved header bytes are not zero".into()));
    }
    if checksum(body) != u64_at(bytes, 32) {
        return Err(err("checksum mismatch: the file is corrupted".into()));
    }
    if body.len() < 8 {
        return Err(err("body too short".into()));
    }
    let meta_len = u64_at(body, 0);
    let meta = usize::try_from(meta_len)
        .ok()
        .and_then(|n| body.get(8..8usize.checked_add(n)?))
        .ok_or_else(|| err(format!("plan length {meta_len} exceeds the body")))?;
    let (mut plan, weights, blobs): (EnginePlan, Vec<WeightRecord>, Vec<EngineBlob>) =
        postcard::from_bytes(meta).map_err(|e| {
            let at =
                locate_error::<WeightRecord, EngineBlob>(meta).unwrap_or_else(|| e.to_string());
            err(format!("cannot decode the plan: {at}"))
        })?;
    plan.options.tf32 = flags & FLAG_TF32 != 0;
    if plan.target != target {
        return Err(err(format!(
            "the header says {target}, the plan says {}",
            plan.target
        )));
    }
    let spans: Vec<WeightSpan> = weights
        .iter()
        .map(|r| WeightSpan {
            offset: r.offset,
            len: r.len,
        })
        .collect();
    let meta_end = (HEADER + 8 + meta.len()) as u64;
    check_weights(&spans, meta_end..bytes.len() as u64, ALIGN as u64)?;
    check_plan(&plan, weights.len())?;
    let values = weights
        .iter()
        .enumerate()
        .map(|(i, r)| read_weight(bytes, i, r).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    for layer in &mut plan.layers {
        if let LayerKind::Constant(c) = &mut layer.kind {
            let v = values.get(c.slot as usize).ok_or_else(|| {
                err(format!(
                    "layer `{}` refers to missing weight {}",
                    layer.name, c.slot
                ))
            })?;
            *c = Constant {
                value: v.clone(),
                slot: c.slot,
            };
        }
    }
    Ok((plan, blobs))
}

fn read_weight(file: &[u8], index: usize, r: &WeightRecord) -> Result<Tensor> {
    let err = |m: String| Error::Engine(format!("weight {index}: {m}"));
    let shape: Vec<usize> = r
        .shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("dim {d} too large"))))
        .collect::<Result<_>>()?;
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err("element count overflows".into()))?;
    if numel.checked_mul(r.dtype.size()) != Some(r.len as usize) {
        return Err(err(format!(
            "{} bytes do not hold {:?} of {}",
            r.len, r.shape, r.dtype
        )));
    }
    let bytes = usize::try_from(r.offset)
        .ok()
        .zip(usize::try_from(r.len).ok())
        .and_then(|(o, n)| file.get(o..o.checked_add(n)?))
        .ok_or_else(|| {
            err(format!(
                "bytes {}..+{} lie outside the file",
                r.offset, r.len
            ))
        })?;
    Tensor::from_bytes(r.dtype, &shape, bytes)
}
