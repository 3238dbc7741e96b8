//! Shared by the integration tests: compiling the C sources under `tests/c` with the system
//! `cc`, reading back the extension a test binary exports, and running plugins on the CPU
//! with aligned buffers.

#![allow(dead_code, reason = "each test binary uses its own subset")]
#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use torchtrt_plugin_api::abi::{Extension, TtrtEntryPoint};
use torchtrt_plugin_api::{
    CpuLaunch, HostTensor, HostTensorMut, Launch, Plugin, PluginResult, TensorDesc,
};

/// The extension of the entry point `export_plugins!` generated in this test binary, read
/// back through its C tables once (one entry point per binary: later calls return the first
/// one's extension).
///
/// # Safety
/// `entry` keeps the contract of `torchtrt_plugin.h`, as the generated one does.
pub unsafe fn in_process(entry: TtrtEntryPoint) -> &'static Extension {
    static EXT: OnceLock<Extension> = OnceLock::new();
    EXT.get_or_init(|| {
        // SAFETY: forwarded from the caller.
        unsafe { Extension::from_entry(entry, "in-process") }.expect("reads back")
    })
}

/// The flags every C file of the tests must compile cleanly with.
pub const STRICT_C: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A per-process scratch folder under the target directory.
pub fn scratch_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("plugin-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder can be created");
    dir
}

fn cc(args: &[&str], out: &Path) {
    let include = workspace_root().join("include");
    let output = Command::new("cc")
        .args(STRICT_C)
        .arg("-I")
        .arg(&include)
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("-lm")
        .output()
        .expect("the system C compiler `cc` runs");
    assert!(
        output.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Compiles `tests/c/<name>.c` with `defines` into a shared library (once per process).
pub fn shared_library(name: &str, defines: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let tag: String = defines
        .iter()
        .flat_map(|d| d.chars().filter(char::is_ascii_alphanumeric).chain(['_']))
        .collect();
    let key = format!("{name}_{tag}");
    let built = BUILT.get_or_init(Mutex::default);
    let mut built = built.lock().expect("no test panicked while compiling");
    if let Some(p) = built.get(&key) {
        return p.clone();
    }
    let out = scratch_dir().join(format!("lib{key}.so"));
    let src = c_source(name);
    let mut args = vec!["-shared", "-fPIC"];
    args.extend_from_slice(defines);
    args.push(src.to_str().expect("UTF-8 path"));
    cc(&args, &out);
    built.insert(key, out.clone());
    out
}

/// Compiles `tests/c/<name>.c` into an executable.
pub fn executable(name: &str) -> PathBuf {
    let out = scratch_dir().join(name);
    let src = c_source(name);
    cc(&[src.to_str().expect("UTF-8 path")], &out);
    out
}

/// The path of `tests/c/<name>.c`.
pub fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"))
}

/// A 16-byte aligned byte buffer, as `enqueue` promises plugins.
pub struct Buffer {
    words: Vec<u128>,
    len: usize,
}

impl Buffer {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Buffer {
        Buffer {
            words: vec![0; len.div_ceil(16)],
            len,
        }
    }

    /// `len` bytes of the shared sentinel (a NaN for floats, `0xA5` otherwise), for an
    /// output the plugin must write.
    pub fn sentinel(len: usize, is_float: bool) -> Buffer {
        let mut b = Buffer::zeroed(len);
        b.bytes_mut()
            .fill(torchtrt_testing::sentinel::byte(is_float));
        b
    }

    /// A copy of `values`' bytes.
    pub fn from_values<T: bytemuck::Pod>(values: &[T]) -> Buffer {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let mut b = Buffer::zeroed(bytes.len());
        b.bytes_mut().copy_from_slice(bytes);
        b
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// The bytes as values of `T`.
    pub fn values<T: bytemuck::Pod>(&self) -> Vec<T> {
        bytemuck::pod_collect_to_vec(self.bytes())
    }
}

/// Runs `plugin` on the CPU with a workspace of the size it asks for; returns the outputs.
pub fn run_cpu(
    plugin: &dyn Plugin,
    inputs: &[(TensorDesc, Buffer)],
    outputs: &[TensorDesc],
) -> PluginResult<Vec<Buffer>> {
    let in_descs: Vec<TensorDesc> = inputs.iter().map(|(d, _)| d.clone()).collect();
    let mut ws = Buffer::zeroed(plugin.workspace_size(&in_descs, outputs));
    let mut out_bufs: Vec<Buffer> = outputs
        .iter()
        .map(|d| Buffer::sentinel(d.byte_len().expect("concrete output"), d.dtype.is_float()))
        .collect();
    let host_in: Vec<HostTensor<'_>> = inputs
        .iter()
        .map(|(desc, b)| HostTensor {
            desc: desc.clone(),
            data: b.bytes(),
        })
        .collect();
    let mut host_out: Vec<HostTensorMut<'_>> = outputs
        .iter()
        .zip(out_bufs.iter_mut())
        .map(|(desc, b)| HostTensorMut {
            desc: desc.clone(),
            data: b.bytes_mut(),
        })
        .collect();
    plugin.enqueue(Launch::Cpu(CpuLaunch {
        inputs: &host_in,
        outputs: &mut host_out,
        workspace: ws.bytes_mut(),
        threads: 2,
    }))?;
    drop(host_out);
    Ok(out_bufs)
}

/// Asserts `got` is within `rel` relative (and `rel` absolute near zero) of `want`, with the
/// shared comparison.
pub fn assert_close(got: &[f32], want: &[f32], rel: f32) {
    let rel = f64::from(rel);
    torchtrt_testing::check_floats(got, want, torchtrt_testing::Tol::new(rel, rel))
        .unwrap_or_else(|m| panic!("{m}"));
}
