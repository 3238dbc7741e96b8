//! The CPU half of a kernel plugin: its C source compiled by the system C compiler into a
//! shared object when the spec is loaded (`$CC`, else `cc`), the object's bytes kept so an
//! engine can carry them, and the object loaded from those bytes wherever the engine runs.
//!
//! The user writes plain C functions (`void swiglu_f32(const float* x, float* y, int64_t n)`);
//! torchtrt appends one entry point per kernel and dtype combination that unpacks an array
//! of argument addresses into that call, so the compiler checks the user's signature
//! against the spec (pointer types must match: `-Werror=incompatible-pointer-types`).

use std::ffi::c_void;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use torchtrt_plugin_api::{DType, FieldType};

use super::spec::{Arg, DeviceSpec, KernelSpec};

/// Largest compiled object accepted, in bytes.
pub const MAX_OBJECT_BYTES: usize = 64 << 20;

/// The signature of every generated entry point: the addresses of the arguments in order.
pub(crate) type Entry = unsafe extern "C" fn(*const *mut c_void);

/// The C type of a dtype's elements.
fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "int64_t",
        DType::I32 => "int32_t",
        DType::I16 => "int16_t",
        DType::I8 => "int8_t",
        DType::U8 | DType::Bool => "uint8_t",
        DType::F16 | DType::BF16 | DType::U16 => "uint16_t",
        DType::U32 => "uint32_t",
        DType::U64 => "uint64_t",
    }
}

/// The name of the entry point of kernel `k` under dtype combination `c`.
pub(crate) fn entry_name(k: usize, c: usize) -> String {
    format!("ttrt_kernel_entry_{k}_{c}")
}

/// The user's source with the entry points appended.
pub(crate) fn translation_unit(spec: &KernelSpec, device: &DeviceSpec) -> String {
    let mut out = String::from("#include <stdint.h>\n#line 1 \"kernel-plugin source\"\n");
    out.push_str(&device.source);
    out.push_str("\n\n/* torchtrt: entry points, one per kernel and dtype combination */\n");
    let n_in = spec.inputs.len();
    let ports: Vec<_> = spec.inputs.iter().chain(&spec.outputs).collect();
    for (k, kernel) in device.kernels.iter().enumerate() {
        for (c, combo) in spec.combos(device).iter().enumerate() {
            let args: Vec<String> = kernel
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Arg::Port(p) => {
                        let t = c_type(spec.port_dtype(ports[*p], combo));
                        let constness = if *p < n_in { "const " } else { "" };
                        format!("({constness}{t}*)a[{i}]")
                    }
                    Arg::Float(_, FieldType::F64) => format!("*(const double*)a[{i}]"),
                    Arg::Float(..) => format!("*(const float*)a[{i}]"),
                    Arg::Int(_) => format!("*(const int64_t*)a[{i}]"),
                })
                .collect();
            let _ = writeln!(
                out,
                "void {}(void* const* a) {{ {}({}); }}",
                entry_name(k, c),
                spec.kernel_name(kernel, combo),
                args.join(", ")
            );
        }
    }
    out
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A private scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "torchtrt-kernel-plugin-{}-{n}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create the scratch folder {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The C compiler: `$CC`, else `cc`.
pub fn compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into())
}

/// Compiles the CPU part of `spec` into a shared object and returns its bytes.
pub(crate) fn compile(spec: &KernelSpec, device: &DeviceSpec) -> Result<Vec<u8>, String> {
    let scratch = Scratch::new()?;
    let src = scratch.path("kernel.c");
    let obj = scratch.path("kernel.so");
    std::fs::write(&src, translation_unit(spec, device))
        .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let cc = compiler();
    let mut parts = cc.split_whitespace();
    let program = parts.next().unwrap_or("cc");
    let output = Command::new(program)
        .args(parts)
        .args(["-std=c11", "-O2", "-fPIC", "-shared"])
        .args([
            "-Werror=incompatible-pointer-types",
            "-Werror=implicit-function-declaration",
            "-Werror=int-conversion",
        ])
        .args(&device.cflags)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .arg("-lm")
        .output()
        .map_err(|e| {
            format!(
                "cannot run the C compiler `{cc}` ({e}); set CC to a C compiler, or build for \
                 CUDA only"
            )
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(format!(
            "the C compiler `{cc}` failed ({}):\n{tail}",
            output.status
        ));
    }
    let len = std::fs::metadata(&obj).map(|m| m.len()).unwrap_or(0);
    if len > MAX_OBJECT_BYTES as u64 {
        return Err(format!(
            "the compiled object has {len} bytes (at most {MAX_OBJECT_BYTES})"
        ));
    }
    std::fs::read(&obj).map_err(|e| format!("cannot read {}: {e}", obj.display()))
}

/// A loaded CPU object and its entry points, `[kernel][combo]`.
pub(crate) struct CpuObject {
    entries: Vec<Vec<Entry>>,
    _library: libloading::Library,
}

impl std::fmt::Debug for CpuObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CpuObject({} kernels)", self.entries.len())
    }
}

impl CpuObject {
    /// Loads `bytes` (a shared object from [`compile`]) and finds every entry point.
    ///
    /// # Safety
    /// Loading runs the object's initialisers and calling its entries runs its code: the
    /// bytes must come from a source the caller trusts (a spec it compiled, or an engine
    /// whose host code it allowed).
    pub(crate) unsafe fn load(
        spec: &KernelSpec,
        device: &DeviceSpec,
        bytes: &[u8],
    ) -> Result<CpuObject, String> {
        if bytes.len() > MAX_OBJECT_BYTES || !bytes.starts_with(b"\x7fELF") {
            return Err("the CPU object is not a shared object of this platform".into());
        }
        let scratch = Scratch::new()?;
        let path = scratch.path("kernel.so");
        std::fs::write(&path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        // SAFETY: the caller vouches for the object (see the function's contract).
        let library = unsafe { open(&path) }?;
        let combos = spec.combos(device).len();
        let mut entries = Vec::with_capacity(device.kernels.len());
        for k in 0..device.kernels.len() {
            let mut row = Vec::with_capacity(combos);
            for c in 0..combos {
                let name = entry_name(k, c);
                // SAFETY: the symbol was generated by `translation_unit` with type `Entry`.
                let entry: libloading::Symbol<'_, Entry> = unsafe { library.get(name.as_bytes()) }
                    .map_err(|e| format!("the CPU object lacks `{name}`: {e}"))?;
                row.push(*entry);
            }
            entries.push(row);
        }
        Ok(CpuObject {
            entries,
            _library: library,
        })
    }

    /// The entry of kernel `k` under combination `c`.
    pub(crate) fn entry(&self, k: usize, c: usize) -> Option<Entry> {
        self.entries.get(k)?.get(c).copied()
    }
}

/// # Safety
/// As [`CpuObject::load`].
unsafe fn open(path: &Path) -> Result<libloading::Library, String> {
    // SAFETY: forwarded from the caller.
    unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("cannot load the CPU object: {e}"))
}
