//! The host's CUDA runtime across the C ABI: a Rust plugin exported through the tables asks
//! the host for constants, occupancy and kernel launches on a CUDA `enqueue`; a recording
//! runtime on the host side must see exactly what the plugin asked for, and the host's
//! answers and errors must come back to the plugin unchanged. Needs no GPU: nothing here
//! touches a device.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::{Arc, Mutex};

use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{
    CudaLaunch, CudaProgram, CudaRuntime, DType, DeviceKind, DeviceTensor, FieldCollection,
    FieldSpec, KernelLaunch, Launch, Plugin, PluginCreator, PluginError, PluginKey, PluginResult,
    PortDesc, ShapeExpr, TensorDesc, create_plugin,
};

const SOURCE: &str =
    "extern \"C\" __global__ void scale(const float* x, float* y, long n, float s) {}";

/// `test_cuda::Scale@1`: launches `scale` over its one input with a grid from the occupancy
/// the host reports, passing a constant table's address after the scalars.
struct ScaleCreator;

impl PluginCreator for ScaleCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test_cuda", "Scale", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::with_default("scale", 2.5f32, "factor").scalar()]
    }

    fn create(&self, _layer: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Scale {
            scale: fields.f32("scale").unwrap_or(2.5),
        }))
    }
}

#[derive(Clone)]
struct Scale {
    scale: f32,
}

impl Plugin for Scale {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(inputs.to_vec())
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(inputs.to_vec())
    }

    fn supports(&self, _pos: usize, io: &[PortDesc], _n: usize, _d: DeviceKind) -> bool {
        io.iter().all(|p| p.dtype == DType::F32)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cuda(c) = launch else {
            return Err(PluginError::Unsupported("CUDA only".into()));
        };
        let program = CudaProgram {
            name: "scale",
            source: SOURCE,
        };
        let table = c.runtime.constant(&[1, 2, 3, 4, 5])?;
        let blocks = c.runtime.resident_blocks(program, "scale", 256, 64)?;
        let n = c.inputs[0].desc.shape.iter().product::<i64>();
        let (x, y, s) = (c.inputs[0].ptr, c.outputs[0].ptr, self.scale);
        c.runtime.launch(&KernelLaunch {
            program,
            kernel: "scale",
            grid: [blocks, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 64,
            args: &[
                &x.to_le_bytes(),
                &y.to_le_bytes(),
                &n.to_le_bytes(),
                &s.to_le_bytes(),
                &table.to_le_bytes(),
            ],
        })
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new().with("scale", self.scale)
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

fn test_creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(ScaleCreator)]
}

torchtrt_plugin_api::export_plugins!(
    provider = "cuda_runtime_test 0.0.1",
    creators = test_creators
);

fn extension() -> &'static Extension {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    unsafe { common::in_process(torchtrt_extension_v1) }
}

/// What the recording runtime saw: one line per call.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    refuse_launch: Option<String>,
}

impl CudaRuntime for Recorder {
    fn launch(&self, l: &KernelLaunch<'_>) -> PluginResult<()> {
        let args: Vec<String> = l.args.iter().map(|a| format!("{a:?}")).collect();
        self.calls.lock().unwrap().push(format!(
            "launch {} {} {:?} {:?} {} {} [{}]",
            l.program.name,
            l.kernel,
            l.grid,
            l.block,
            l.shared_bytes,
            l.program.source == SOURCE,
            args.join(" ")
        ));
        match &self.refuse_launch {
            Some(m) => Err(PluginError::InvalidInput(m.clone())),
            None => Ok(()),
        }
    }

    fn resident_blocks(
        &self,
        program: CudaProgram<'_>,
        kernel: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> PluginResult<u32> {
        self.calls.lock().unwrap().push(format!(
            "resident {} {kernel} {threads} {shared_bytes}",
            program.name
        ));
        Ok(132 * 3)
    }

    fn constant(&self, bytes: &[u8]) -> PluginResult<u64> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("constant {bytes:?}"));
        Ok(0xdead_0000)
    }
}

fn enqueue(runtime: &dyn CudaRuntime) -> PluginResult<()> {
    let creator = extension()
        .creators()
        .into_iter()
        .next()
        .expect("one creator");
    let fields = FieldCollection::new().with("scale", 0.5f32);
    let plugin = create_plugin(creator.as_ref(), "s", &fields).expect("creates");
    let desc = TensorDesc::new(DType::F32, vec![2, 3]);
    plugin.enqueue(Launch::Cuda(CudaLaunch {
        inputs: &[DeviceTensor {
            desc: desc.clone(),
            ptr: 0x1000,
        }],
        outputs: &[DeviceTensor { desc, ptr: 0x2000 }],
        workspace: 0,
        device: 0,
        stream: std::ptr::null_mut(),
        runtime,
        shape_values: &[],
    }))
}

#[test]
fn launches_reach_the_host_unchanged() {
    let rec = Recorder::default();
    enqueue(&rec).expect("enqueues");
    let calls = rec.calls.lock().unwrap().clone();
    let bytes = |v: &[u8]| format!("{v:?}");
    assert_eq!(
        calls,
        vec![
            "constant [1, 2, 3, 4, 5]".to_string(),
            "resident scale scale 256 64".to_string(),
            format!(
                "launch scale scale [396, 1, 1] [256, 1, 1] 64 true [{} {} {} {} {}]",
                bytes(&0x1000u64.to_le_bytes()),
                bytes(&0x2000u64.to_le_bytes()),
                bytes(&6i64.to_le_bytes()),
                bytes(&0.5f32.to_le_bytes()),
                bytes(&0xdead_0000u64.to_le_bytes()),
            ),
        ]
    );
}

#[test]
fn host_errors_come_back_to_the_plugin() {
    let rec = Recorder {
        refuse_launch: Some("kernel `scale` takes 4 parameters, the launch passed 5".into()),
        ..Recorder::default()
    };
    let err = enqueue(&rec).expect_err("the host refused the launch");
    assert!(
        err.to_string()
            .contains("kernel `scale` takes 4 parameters, the launch passed 5"),
        "{err}"
    );
}
