//! Checks a library file before the system loader maps it: a regular file, an ELF shared
//! object for this machine, with its program and section headers and every segment inside
//! the file. A truncated library otherwise crashes inside the loader (a bus error when a
//! mapped segment lies past the end of the file).

use std::io::Read;
use std::path::Path;

const EHDR64: usize = 64;
const PHDR64: usize = 56;
const ET_DYN: u16 = 3;

#[cfg(target_arch = "x86_64")]
const MACHINE: Option<u16> = Some(62);
#[cfg(target_arch = "aarch64")]
const MACHINE: Option<u16> = Some(183);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const MACHINE: Option<u16> = None;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Why the file at `path` cannot be a library for this host; `Ok` when it can be handed to
/// the loader. Hosts other than 64-bit little-endian Linux are not checked.
pub(crate) fn check_library(path: &Path) -> Result<(), String> {
    if !cfg!(all(
        target_os = "linux",
        target_pointer_width = "64",
        target_endian = "little"
    )) {
        return Ok(());
    }
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let size = meta.len();
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut head = Vec::with_capacity(EHDR64);
    (&mut file)
        .take(EHDR64 as u64)
        .read_to_end(&mut head)
        .map_err(|e| e.to_string())?;
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if head.len() < EHDR64 {
        return Err(format!("truncated ELF header ({} bytes)", head.len()));
    }
    if head[4] != 2 {
        return Err(format!(
            "ELF class {} (this host loads 64-bit objects)",
            head[4]
        ));
    }
    if head[5] != 1 {
        return Err("big-endian ELF (this host is little-endian)".into());
    }
    let kind = u16_at(&head, 16);
    if kind != ET_DYN {
        return Err(format!("ELF type {kind}, not a shared object"));
    }
    let machine = u16_at(&head, 18);
    if let Some(m) = MACHINE
        && machine != m
    {
        return Err(format!("ELF machine {machine}, this host is machine {m}"));
    }
    let table = |off: u64, count: u16, entry: u16, what: &str| -> Result<(), String> {
        let end = u64::from(count)
            .checked_mul(u64::from(entry))
            .and_then(|n| n.checked_add(off));
        match end {
            Some(end) if end <= size => Ok(()),
            _ => Err(format!(
                "truncated: the {what} ({count} × {entry} bytes at {off}) end past the file's {size} bytes"
            )),
        }
    };
    let (phoff, phentsize, phnum) = (u64_at(&head, 32), u16_at(&head, 54), u16_at(&head, 56));
    if phnum > 0 && usize::from(phentsize) != PHDR64 {
        return Err(format!(
            "program header size {phentsize}, expected {PHDR64}"
        ));
    }
    table(phoff, phnum, phentsize, "program headers")?;
    let (shoff, shentsize, shnum) = (u64_at(&head, 40), u16_at(&head, 58), u16_at(&head, 60));
    if shoff != 0 {
        table(shoff, shnum, shentsize, "section headers")?;
    }
    let mut phdrs = vec![0u8; usize::from(phnum) * PHDR64];
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(phoff)).map_err(|e| e.to_string())?;
    file.read_exact(&mut phdrs).map_err(|e| e.to_string())?;
    for (i, p) in phdrs.chunks_exact(PHDR64).enumerate() {
        let (offset, filesz) = (u64_at(p, 8), u64_at(p, 32));
        if offset.checked_add(filesz).is_none_or(|end| end > size) {
            return Err(format!(
                "truncated: segment {i} ({filesz} bytes at {offset}) ends past the file's {size} bytes"
            ));
        }
    }
    Ok(())
}
