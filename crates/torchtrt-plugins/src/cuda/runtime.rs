//! Driver probing, NVRTC compilation, per-device module caches and kernel launches.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result as cu, sys as cusys};
use cudarc::nvrtc::{result as rtc, sys as rtcsys};
use torchtrt_plugin_api::{CudaLaunch, PluginError, PluginResult};

use super::COMMON;
use torchtrt_plugin_api::cuda_c::ELEMENTS;

/// One plugin's CUDA C program: a name (unique among the built-in plugins) and its source,
/// compiled after [`COMMON`].
pub(crate) struct Program {
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
}

/// A compiled program for one architecture, as stored by hosts that keep images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelImage {
    /// The program's name, e.g. `gelu`.
    pub program: String,
    /// Compute capability `(major, minor)` the image is for.
    pub arch: (u32, u32),
    /// A cubin for exactly `arch`.
    pub cubin: Vec<u8>,
}

type ImageKey = (String, (u32, u32));

fn images() -> &'static Mutex<HashMap<ImageKey, Vec<u8>>> {
    static IMAGES: OnceLock<Mutex<HashMap<ImageKey, Vec<u8>>>> = OnceLock::new();
    IMAGES.get_or_init(Default::default)
}

/// Every image compiled or installed in this process so far.
pub fn kernel_images() -> Vec<KernelImage> {
    let map = images().lock().unwrap_or_else(|p| p.into_inner());
    map.iter()
        .map(|((program, arch), cubin)| KernelImage {
            program: program.clone(),
            arch: *arch,
            cubin: cubin.clone(),
        })
        .collect()
}

/// Makes stored images available, so that launches on their architecture need no NVRTC.
pub fn install_kernel_images(list: impl IntoIterator<Item = KernelImage>) {
    let mut map = images().lock().unwrap_or_else(|p| p.into_inner());
    for image in list {
        map.insert((image.program, image.arch), image.cubin);
    }
}

fn unsupported(msg: impl Into<String>) -> PluginError {
    PluginError::Unsupported(format!("no CUDA device: {}", msg.into()))
}

fn drv(call: &str, e: cu::DriverError) -> PluginError {
    PluginError::Execution(format!("CUDA {call} failed: {e:?}"))
}

fn driver() -> PluginResult<()> {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            // SAFETY: only tries to dlopen the driver by its candidate names.
            if !unsafe { cusys::is_culib_present() } {
                return Err("the CUDA driver library was not found".into());
            }
            std::panic::catch_unwind(cu::init)
                .map_err(|_| "the CUDA driver lacks an entry point".to_string())?
                .map_err(|e| format!("cuInit failed: {e:?}"))
        })
        .clone()
        .map_err(unsupported)
}

struct Loaded {
    module: cusys::CUmodule,
    functions: HashMap<String, Kernel>,
}

/// A loaded kernel and the byte sizes of its parameters (`None` where the driver cannot
/// tell: `cuFuncGetParamInfo` is CUDA 12.4+). Shared, so a launch's lookup copies no list.
#[derive(Clone)]
struct Kernel {
    f: cusys::CUfunction,
    params: Option<Arc<[usize]>>,
}

/// The byte size of each of `f`'s parameters, from the driver.
fn param_sizes(f: cusys::CUfunction) -> Option<Arc<[usize]>> {
    let mut sizes = Vec::new();
    loop {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `f` is a loaded kernel; an index past its parameters is an error result.
        // A driver without the entry point makes cudarc panic: caught, and nothing is known.
        let index = sizes.len();
        let query = std::panic::AssertUnwindSafe(|| unsafe {
            cusys::cuFuncGetParamInfo(f, index, &mut offset, &mut size)
        });
        let r = std::panic::catch_unwind(query).ok()?;
        if r != cusys::CUresult::CUDA_SUCCESS || sizes.len() > 1024 {
            break;
        }
        sizes.push(size);
    }
    (!sizes.is_empty()).then(|| sizes.into())
}

/// [`resident_blocks`] answers by (program, threads, shared bytes), then kernel name.
type Resident = HashMap<(&'static str, u32, u32), Vec<(String, u32)>>;

struct DeviceState {
    ctx: cusys::CUcontext,
    arch: (u32, u32),
    sms: u32,
    modules: HashMap<&'static str, Loaded>,
    resident: Resident,
}

// SAFETY: the handles are process-wide driver objects, used only under the mutex below and
// with their context made current.
unsafe impl Send for DeviceState {}

fn devices() -> &'static Mutex<HashMap<i32, DeviceState>> {
    static DEVICES: OnceLock<Mutex<HashMap<i32, DeviceState>>> = OnceLock::new();
    DEVICES.get_or_init(Default::default)
}

fn open_device(ordinal: i32) -> PluginResult<DeviceState> {
    let dev = cu::device::get(ordinal).map_err(|e| drv("cuDeviceGet", e))?;
    // SAFETY: `dev` is a valid device; the primary context is retained for the process.
    let ctx =
        unsafe { cu::primary_ctx::retain(dev) }.map_err(|e| drv("cuDevicePrimaryCtxRetain", e))?;
    let attr = |a| {
        // SAFETY: valid device and attribute.
        unsafe { cu::device::get_attribute(dev, a) }.map_err(|e| drv("cuDeviceGetAttribute", e))
    };
    use cusys::CUdevice_attribute::*;
    let major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceState {
        ctx,
        arch: (major as u32, minor as u32),
        sms: sms.max(1) as u32,
        modules: HashMap::new(),
        resident: HashMap::new(),
    })
}

fn device_state(
    devices: &mut HashMap<i32, DeviceState>,
    ordinal: i32,
) -> PluginResult<&mut DeviceState> {
    Ok(match devices.entry(ordinal) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(v) => v.insert(open_device(ordinal)?),
    })
}

/// The kernel `kernel` of `program` on the launch's device, compiling and loading the
/// program on first use. Leaves the device's primary context current.
fn function(program: &Program, kernel: &str, ordinal: i32) -> PluginResult<Kernel> {
    driver()?;
    let mut devices = devices().lock().unwrap_or_else(|p| p.into_inner());
    let state = device_state(&mut devices, ordinal)?;
    // SAFETY: a retained primary context.
    unsafe { cu::ctx::set_current(state.ctx) }.map_err(|e| drv("cuCtxSetCurrent", e))?;
    if !state.modules.contains_key(program.name) {
        let cubin = image(program, state.arch)?;
        // SAFETY: a cubin NVRTC produced for this device's architecture.
        let module = unsafe { cu::module::load_data(cubin.as_ptr() as *const c_void) }
            .map_err(|e| drv("cuModuleLoadData", e))?;
        state.modules.insert(
            program.name,
            Loaded {
                module,
                functions: HashMap::new(),
            },
        );
    }
    let loaded = state
        .modules
        .get_mut(program.name)
        .ok_or_else(|| PluginError::Execution("module cache lost an entry".into()))?;
    if let Some(k) = loaded.functions.get(kernel) {
        return Ok(k.clone());
    }
    let name = CString::new(kernel).map_err(|_| PluginError::Execution("kernel name".into()))?;
    // SAFETY: the module is loaded for the process's life.
    let f = unsafe { cu::module::get_function(loaded.module, name) }.map_err(|e| {
        PluginError::Execution(format!(
            "CUDA program `{}` has no kernel `{kernel}`: {e:?}",
            program.name
        ))
    })?;
    let k = Kernel {
        f,
        params: param_sizes(f),
    };
    loaded.functions.insert(kernel.to_string(), k.clone());
    Ok(k)
}

fn image(program: &Program, arch: (u32, u32)) -> PluginResult<Vec<u8>> {
    let key = (program.name.to_string(), arch);
    if let Some(found) = images().lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    let cubin = compile(program, arch)?;
    images()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, cubin.clone());
    Ok(cubin)
}

/// Compiles `program` with NVRTC for every architecture whose code paths differ (sm_75,
/// sm_80, sm_90), panicking with the compiler's log on an error; skipped when NVRTC is not
/// installed, unless `TORCHTRT_REQUIRE_NVRTC=1` (as `scripts/test` sets). Needs no GPU.
/// With `TORCHTRT_CUBIN_DIR` set, the cubins are written there (`scripts/kernel_resources`).
#[cfg(test)]
pub(crate) fn assert_compiles(program: &Program) {
    // SAFETY: only tries to dlopen NVRTC by its candidate names.
    if !unsafe { rtcsys::is_culib_present() } {
        let required = std::env::var("TORCHTRT_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(!required, "NVRTC not found but TORCHTRT_REQUIRE_NVRTC=1");
        eprintln!("NVRTC not found: `{}` not compiled", program.name);
        return;
    }
    for arch in [(7, 5), (8, 0), (9, 0)] {
        let cubin = compile(program, arch).unwrap_or_else(|e| panic!("{e}"));
        if let Ok(dir) = std::env::var("TORCHTRT_CUBIN_DIR") {
            let path = format!("{dir}/{}_sm{}{}.cubin", program.name, arch.0, arch.1);
            std::fs::write(&path, cubin).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        }
    }
}

fn compile(program: &Program, arch: (u32, u32)) -> PluginResult<Vec<u8>> {
    // SAFETY: only tries to dlopen NVRTC by its candidate names.
    if !unsafe { rtcsys::is_culib_present() } {
        return Err(PluginError::Unsupported(format!(
            "CUDA program `{}` for sm_{}{} is neither stored nor compilable: NVRTC was not found",
            program.name, arch.0, arch.1
        )));
    }
    let fail = |what: String| {
        PluginError::Execution(format!(
            "NVRTC could not compile `{}` for sm_{}{}: {what}",
            program.name, arch.0, arch.1
        ))
    };
    let src = CString::new(format!("{ELEMENTS}{COMMON}\n{}", program.source))
        .map_err(|_| fail("NUL in source".into()))?;
    let name = CString::new(program.name).map_err(|_| fail("NUL in name".into()))?;
    let prog = rtc::create_program(&src, Some(&name)).map_err(|e| fail(format!("{e:?}")))?;
    let opts = [
        format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
        "--std=c++17".to_string(),
    ];
    // SAFETY: `prog` is live until destroyed at the end; `src` and `name` outlive it.
    unsafe {
        let out = match rtc::compile_program(prog, &opts) {
            Ok(()) => {
                let mut size = 0usize;
                rtcsys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .and_then(|()| {
                        let mut buf = vec![0u8; size];
                        rtcsys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                            .result()
                            .map(|()| buf)
                    })
                    .map_err(|e| fail(format!("{e:?}")))
            }
            Err(e) => {
                let log = rtc::get_program_log(prog)
                    .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
                    .unwrap_or_default();
                Err(fail(format!("{e:?}\n{log}")))
            }
        };
        let _ = rtc::destroy_program(prog);
        out
    }
}

/// A kernel's arguments, each in its own 8-byte-aligned storage (scalars sit at the start,
/// little endian, as the driver reads them at the parameter's size).
#[derive(Clone, Default)]
pub(crate) struct Args(Vec<Box<[u64]>>);

impl Args {
    fn word(mut self, v: u64) -> Args {
        self.0.push(Box::new([v]));
        self
    }

    pub(crate) fn ptr(self, p: u64) -> Args {
        self.word(p)
    }

    pub(crate) fn i64(self, v: i64) -> Args {
        self.word(v as u64)
    }

    pub(crate) fn i32(self, v: i32) -> Args {
        self.word(u64::from(v as u32))
    }

    pub(crate) fn f32(self, v: f32) -> Args {
        self.word(u64::from(v.to_bits()))
    }

    /// A struct passed by value, given as its bytes in the C layout.
    pub(crate) fn bytes(mut self, b: &[u8]) -> Args {
        let mut words = vec![0u64; b.len().div_ceil(8)].into_boxed_slice();
        for (w, chunk) in words.iter_mut().zip(b.chunks(8)) {
            let mut le = [0u8; 8];
            le[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(le);
        }
        self.0.push(words);
        self
    }
}

/// Queues `kernel` of `program` on the launch's stream. Where the driver describes the
/// kernel's parameters, a launch whose argument count or sizes differ is refused with an
/// error instead of letting the kernel read past its arguments.
///
/// # Safety
/// `args` must match the kernel's parameters, and every pointer in them must be valid device
/// memory of the launch's device for as long as the stream runs the kernel.
pub(crate) unsafe fn launch(
    program: &Program,
    kernel: &str,
    cuda: &CudaLaunch<'_>,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    mut args: Args,
) -> PluginResult<()> {
    if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
        return Ok(());
    }
    let k = function(program, kernel, cuda.device)?;
    if let Some(sizes) = &k.params {
        let fits = sizes.len() == args.0.len()
            && sizes
                .iter()
                .zip(&args.0)
                .all(|(&size, a)| a.len() * 8 >= size);
        if !fits {
            return Err(PluginError::Execution(format!(
                "kernel `{kernel}` of `{}` takes parameters of {sizes:?} bytes, the launch passed {:?}",
                program.name,
                args.0.iter().map(|a| a.len() * 8).collect::<Vec<_>>()
            )));
        }
    }
    let mut params: Vec<*mut c_void> = args
        .0
        .iter_mut()
        .map(|s| s.as_mut_ptr() as *mut c_void)
        .collect();
    // SAFETY: per the function's contract; the stream is the caller's, on this device.
    unsafe { cu::launch_kernel(k.f, grid, block, shared, cuda.stream.cast(), &mut params) }
        .map_err(|e| drv("cuLaunchKernel", e))
}

/// Blocks of `threads` threads with `shared` bytes of dynamic shared memory that `kernel` of
/// `program` keeps resident on the launch's whole device at once (at least one), for kernels
/// whose blocks stride over their work in whole waves. Asked of the driver once per device
/// and shape, then answered from the device's cache.
pub(crate) fn resident_blocks(
    program: &Program,
    kernel: &str,
    cuda: &CudaLaunch<'_>,
    threads: u32,
    shared: u32,
) -> PluginResult<u32> {
    let key = (program.name, threads, shared);
    {
        let mut devices = devices().lock().unwrap_or_else(|p| p.into_inner());
        let state = device_state(&mut devices, cuda.device)?;
        let mut known = state.resident.get(&key).into_iter().flatten();
        if let Some(&(_, n)) = known.find(|(k, _)| k == kernel) {
            return Ok(n);
        }
    }
    let k = function(program, kernel, cuda.device)?;
    // SAFETY: a loaded kernel; `function` left its device's context current.
    let per_sm = unsafe {
        cu::occupancy::max_active_block_per_multiprocessor(k.f, threads as i32, shared as usize)
    }
    .map_err(|e| drv("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?;
    let mut devices = devices().lock().unwrap_or_else(|p| p.into_inner());
    let state = device_state(&mut devices, cuda.device)?;
    let n = (per_sm.max(1) as u32).saturating_mul(state.sms);
    let ks = state.resident.entry(key).or_default();
    if !ks.iter().any(|(k, _)| k == kernel) {
        ks.push((kernel.to_string(), n));
    }
    Ok(n)
}

type Constants = Mutex<HashMap<(i32, Vec<u8>), u64>>;

fn constants() -> &'static Constants {
    static CONSTANTS: OnceLock<Constants> = OnceLock::new();
    CONSTANTS.get_or_init(Default::default)
}

/// A device copy of `bytes` (tap tables, per-channel parameters) on the launch's device,
/// uploaded once per distinct content and kept for the process's life.
pub(crate) fn constant(cuda: &CudaLaunch<'_>, bytes: &[u8]) -> PluginResult<u64> {
    driver()?;
    let key = (cuda.device, bytes.to_vec());
    let mut map = constants().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&ptr) = map.get(&key) {
        return Ok(ptr);
    }
    let ctx = {
        let mut devices = devices().lock().unwrap_or_else(|p| p.into_inner());
        device_state(&mut devices, cuda.device)?.ctx
    };
    // SAFETY: a retained primary context; the allocation is owned by the cache.
    let ptr = unsafe {
        cu::ctx::set_current(ctx).map_err(|e| drv("cuCtxSetCurrent", e))?;
        let ptr = cu::malloc_sync(bytes.len().max(16)).map_err(|e| drv("cuMemAlloc", e))?;
        cu::memcpy_htod_sync(ptr, bytes).map_err(|e| drv("cuMemcpyHtoD", e))?;
        cu::ctx::synchronize().map_err(|e| drv("cuCtxSynchronize", e))?;
        ptr
    };
    map.insert(key, ptr);
    Ok(ptr)
}
