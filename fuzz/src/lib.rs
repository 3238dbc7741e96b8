//! What each fuzz target does with its bytes. Every target drives a public surface with
//! hostile input; an error is fine, a panic, abort or unbounded allocation is a finding.

#[allow(
    dead_code,
    reason = "only the .npy reader of the CLI's module is fuzzed"
)]
#[path = "../../crates/torchtrtc/src/npy.rs"]
mod npy;

use std::ffi::CString;
use std::sync::Once;

use torchtrt::plugin_api::{
    DType, FieldCollection, PluginKey, TensorDesc, const_shape, shape_values,
};
use torchtrt::{BuildConfig, Dim, Engine, Tensor};

/// The memory limit of every build and run under the fuzzer.
pub const LIMIT: u64 = 256 << 20;

fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        torchtrt::init_plugins().expect("built-in plugins register");
    });
}

/// An error that came from a caught panic is a finding.
fn no_panic(message: &str) {
    assert!(
        !message.contains("panic"),
        "a panic was caught and reported as an error: {message}"
    );
}

/// Runs `engine` once on inputs of its opt shapes, filled from `fill`.
fn run_engine(engine: &Engine, fill: &[u8]) {
    let Ok(mut ctx) = engine.create_context() else {
        return;
    };
    ctx.set_memory_limit(LIMIT);
    let mut inputs = Vec::new();
    for input in &engine.plan().inputs {
        let shape: Vec<usize> = input
            .dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(v) => *v,
                Dim::Dynamic { opt, .. } => *opt,
            })
            .map(|v| v.max(0) as usize)
            .collect();
        let Some(bytes) = shape
            .iter()
            .try_fold(input.dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b as u64 <= LIMIT / 4)
        else {
            return;
        };
        let data: Vec<u8> = (0..bytes)
            .map(|i| fill.get(i % fill.len().max(1)).copied().unwrap_or(1))
            .collect();
        let Ok(t) = Tensor::from_bytes(input.dtype, &shape, &data) else {
            return;
        };
        inputs.push(t);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    if let Err(e) = ctx.execute(&refs) {
        no_panic(&e.to_string());
    }
}

/// ONNX bytes → import → build (CPU, 256 MiB limit) → one run.
pub fn onnx_build(data: &[u8]) {
    init();
    let Ok(proto) = torchtrt::onnx::decode_model(data, "fuzz.onnx") else {
        return;
    };
    let options = torchtrt::onnx::ImportOptions {
        evaluator: Some(torchtrt::evaluator()),
        ..Default::default()
    };
    let net = match torchtrt::onnx::import_model(&proto, None, torchtrt::registry(), &options) {
        Ok(net) => net,
        Err(e) => return no_panic(&e.to_string()),
    };
    let config = BuildConfig {
        max_memory: Some(LIMIT),
        max_fold_elements: 1 << 16,
        ..BuildConfig::default()
    };
    match torchtrt::compile_for(&net, &config, "cpu") {
        Ok(engine) => run_engine(&engine, data),
        Err(e) => no_panic(&e.to_string()),
    }
}

/// `bytes` with the header's body length and checksum made to match its body, so that
/// mutations reach the plan decoder and the validator.
fn repair_engine(data: &[u8]) -> Vec<u8> {
    let mut bytes = data.to_vec();
    if bytes.len() >= 64 {
        let body = (bytes.len() - 64) as u64;
        bytes[24..32].copy_from_slice(&body.to_le_bytes());
        let sum = torchtrt_core::engine::checksum(&bytes[64..]);
        bytes[32..40].copy_from_slice(&sum.to_le_bytes());
    }
    bytes
}

/// Engine bytes (checksum repaired) → inspect summary, deserialize → one run.
pub fn engine_run(data: &[u8]) {
    init();
    let bytes = repair_engine(data);
    if let Ok(summary) = Engine::summarize_bytes(&bytes) {
        let _ = summary.to_string();
    }
    let Ok(runtime) = torchtrt::Runtime::new() else {
        return;
    };
    match runtime.deserialize(&bytes) {
        Ok(engine) => {
            let _ = engine.summary().to_string();
            run_engine(&engine, data);
        }
        Err(e) => no_panic(&e.to_string()),
    }
}

/// `.npy` bytes → the CLI's reader.
pub fn npy_parse(data: &[u8]) {
    let _ = npy::read_npy(std::io::Cursor::new(data));
}

/// `.pt2` bytes → program → import.
pub fn pt2_read(data: &[u8]) {
    init();
    let program = match torchtrt::torch::load_program_bytes(data, "fuzz.pt2") {
        Ok(p) => p,
        Err(e) => return no_panic(&e.to_string()),
    };
    if let Err(e) = torchtrt::import_program(&program, Default::default()) {
        no_panic(&e.to_string());
    }
}

/// A creator index and postcard-encoded fields → create, shapes, configure, serialize.
pub fn plugin_fields(data: &[u8]) {
    init();
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok((fields, dims)) = postcard::from_bytes::<(FieldCollection, Vec<u8>)>(rest) else {
        return;
    };
    let creators = torchtrt::registry().creators();
    if creators.is_empty() {
        return;
    }
    let key: PluginKey = creators[pick as usize % creators.len()].key.clone();
    let plugin = match torchtrt::registry().create(&key, "fuzz", &fields) {
        Ok((p, _)) => p,
        Err(e) => return no_panic(&e.to_string()),
    };
    let shape: Vec<i64> = dims.iter().take(5).map(|&d| i64::from(d % 9)).collect();
    let input = TensorDesc::new(DType::F32, shape.clone());
    let exprs = vec![const_shape(&shape)];
    let outs = match plugin.output_shapes(&exprs) {
        Ok(o) => o,
        Err(e) => return no_panic(&e.to_string()),
    };
    let out_descs: Vec<TensorDesc> = outs
        .iter()
        .map(|s| TensorDesc::new(DType::F32, shape_values(s).unwrap_or_default()))
        .collect();
    let mut configured = plugin.clone_plugin();
    if let Err(e) = configured.configure(&[input], &out_descs) {
        no_panic(&e.to_string());
    }
    let _ = configured.fields_to_serialize();
}

fn c_string(bytes: &[u8]) -> CString {
    CString::new(
        bytes
            .iter()
            .copied()
            .filter(|&b| b != 0)
            .collect::<Vec<u8>>(),
    )
    .unwrap_or_default()
}

/// Engine bytes and garbage arguments through the C runtime API.
pub fn capi(data: &[u8]) {
    use torchtrt::plugin_api::abi::{TTRT_ERROR_PANIC, TTRT_OK};
    use torchtrt_capi::*;
    let status_ok = |s: TtrtStatus, what: &str| -> bool {
        if s == TTRT_ERROR_PANIC {
            // SAFETY: the API's own thread-local message.
            let msg = unsafe { std::ffi::CStr::from_ptr(ttrt_last_error()) };
            panic!("{what}: {}", msg.to_string_lossy());
        }
        s == TTRT_OK
    };
    let split = data
        .len()
        .min(usize::from(data.first().copied().unwrap_or(0)) * 4);
    let (args, engine_bytes) = data.split_at(split);
    let bytes = repair_engine(engine_bytes);
    // SAFETY: every pointer passed below is valid for what the header promises (or NULL).
    unsafe {
        let mut runtime = std::ptr::null_mut();
        if !status_ok(ttrt_runtime_create(&mut runtime), "runtime_create") {
            return;
        }
        let mut engine = std::ptr::null_mut();
        let ok = status_ok(
            ttrt_engine_deserialize(runtime, bytes.as_ptr().cast(), bytes.len(), &mut engine),
            "engine_deserialize",
        );
        if ok {
            let mut ctx = std::ptr::null_mut();
            if status_ok(ttrt_context_create(engine, &mut ctx), "context_create") {
                let mut words = args.chunks(8).map(|c| {
                    let mut w = [0u8; 8];
                    w[..c.len()].copy_from_slice(c);
                    i64::from_le_bytes(w)
                });
                let name = c_string(args.get(..args.len().min(6)).unwrap_or_default());
                let dims: Vec<i64> = words.by_ref().take(4).collect();
                status_ok(
                    ttrt_context_set_input_shape(
                        ctx,
                        name.as_ptr(),
                        dims.as_ptr(),
                        dims.len() as i32 - i32::from(args.len() % 3 == 0) * 7,
                    ),
                    "set_input_shape",
                );
                let mut desc = std::mem::zeroed();
                status_ok(
                    ttrt_context_output_desc(ctx, name.as_ptr(), &mut desc),
                    "output_desc",
                );
                let mut buffers: Vec<Vec<u8>> = Vec::new();
                let mut tensors: Vec<TtrtTensor> = Vec::new();
                for k in 0..3 {
                    let w = words.next().unwrap_or(k);
                    let size = (w.unsigned_abs() % 4096) as usize;
                    buffers.push(vec![0x3f; size]);
                    let mut t: TtrtTensor = std::mem::zeroed();
                    t.index = (w % 4) as i32;
                    t.dtype = ((w >> 8) % 12) as i32;
                    t.device = ((w >> 16) % 3) as i32;
                    t.nb_dims = ((w >> 24) % 10) as i32 - 1;
                    for (i, d) in t.dims.iter_mut().enumerate() {
                        *d = (w >> (i * 3)) % 7;
                    }
                    t.data = buffers[k as usize].as_mut_ptr().cast();
                    t.size = size;
                    tensors.push(t);
                }
                let (ins, outs) = tensors.split_at_mut(1 + (args.len() % 2));
                status_ok(
                    ttrt_context_execute(
                        ctx,
                        ins.as_ptr(),
                        ins.len() as i32,
                        outs.as_mut_ptr(),
                        outs.len() as i32,
                        std::ptr::null_mut(),
                    ),
                    "context_execute",
                );
                ttrt_context_destroy(ctx);
            }
            ttrt_engine_destroy(engine);
        }
        ttrt_runtime_destroy(runtime);
    }
}

/// Source files for specs read from fuzz input: none exist.
struct NoFiles;

impl torchtrt::kernel_plugin::SourceFiles for NoFiles {
    fn read(&self, name: &str) -> Result<String, String> {
        Err(format!("no file {name}"))
    }
}

/// Kernel-plugin spec text (what an engine carries, TOML) → parse and check; for a spec
/// without a CPU part (nothing to compile), a creator, a plugin with default fields, and its
/// dtypes and shapes for inputs of rank 0-4 with a symbolic first dimension.
pub fn kernel_spec(data: &[u8]) {
    use torchtrt::plugin_api::{DType, DimExpr, FieldCollection, PluginCreator, create_plugin};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Nothing here catches panics (a panic is a crash the fuzzer reports), and errors echo
    // the input, so they are not searched for the word "panic" as other targets' are.
    let Ok(spec) = torchtrt::kernel_plugin::KernelSpec::parse(text, &NoFiles) else {
        return;
    };
    if spec.cpu.is_some() {
        return;
    }
    let Ok(creator) = torchtrt::kernel_plugin::load_spec_text(text, &[]) else {
        return;
    };
    let _ = creator.field_schema();
    let Ok(plugin) = create_plugin(&creator, "fuzz", &FieldCollection::new()) else {
        return;
    };
    let n = spec.inputs.len();
    for rank in 0..5usize {
        let shape: Vec<DimExpr> = (0..rank)
            .map(|d| {
                if d == 0 {
                    DimExpr::sym("batch")
                } else {
                    DimExpr::Const(data.len() as i64 % 7 + d as i64)
                }
            })
            .collect();
        let _ = plugin.output_shapes(&vec![shape; n]);
    }
    for d in [DType::F32, DType::F16, DType::I64] {
        let _ = plugin.output_dtypes(&vec![d; n]);
    }
}