//! The CPU benchmark table shared by `benches/plugins.rs` (criterion) and
//! `examples/bench_plugins.rs` (the onnxruntime comparison): each case's plugin, fields and
//! input shape, and a prepared, configured plugin with its buffers.

#![allow(dead_code)]

use torchtrt_plugin_api::{
    CpuLaunch, DType, FieldCollection, HostTensor, HostTensorMut, Launch, Plugin, TensorDesc,
    const_shape, create_plugin, numel, shape_values,
};

/// One row of the benchmark table.
pub struct Case {
    /// Case name (also used by `bench/cpu_plugins_vs_onnxruntime.py`).
    pub name: &'static str,
    /// Plugin name in the built-in set.
    pub plugin: &'static str,
    /// Creation fields.
    pub fields: FieldCollection,
    /// Input shape (f32).
    pub shape: Vec<i64>,
}

/// The table: `[8, 64, 64, 64]` f32 inputs (`[8, 64, 30, 45]` for the last).
pub fn cases() -> Vec<Case> {
    let big = vec![8, 64, 64, 64];
    let interp = |mode: &str, size: [i64; 2]| {
        FieldCollection::new()
            .with("mode", mode)
            .with("out_size", size.to_vec())
            .with("align_corners", 0i32)
            .with("use_scales", 0i32)
    };
    let scales: Vec<f32> = (0..64).map(|c| 0.5 + c as f32 / 64.0).collect();
    let shifts: Vec<f32> = (0..64).map(|c| c as f32 / 32.0 - 1.0).collect();
    let case = |name, plugin, fields, shape: &Vec<i64>| Case {
        name,
        plugin,
        fields,
        shape: shape.clone(),
    };
    vec![
        case(
            "resize_linear_x2",
            "Interpolate",
            interp("bilinear", [128, 128]),
            &big,
        ),
        case(
            "resize_linear_align_corners_x2",
            "Interpolate",
            interp("bilinear", [128, 128]).with("align_corners", 1i32),
            &big,
        ),
        case(
            "resize_nearest_x2",
            "Interpolate",
            interp("nearest", [128, 128]),
            &big,
        ),
        case(
            "lp_normalization_p2_axis1",
            "NormalizePlugin",
            FieldCollection::new()
                .with("order", 2.0f32)
                .with("axes", vec![1i32])
                .with("mode", "normalize"),
            &big,
        ),
        case(
            "instance_normalization",
            "InstanceNormalization_TRT",
            FieldCollection::new()
                .with("epsilon", 1e-5f32)
                .with("scales", scales)
                .with("bias", shifts),
            &big,
        ),
        case(
            "gelu_erf",
            "CustomGeluPluginDynamic",
            FieldCollection::new().with("approximate", "none"),
            &big,
        ),
        case(
            "gelu_tanh",
            "CustomGeluPluginDynamic",
            FieldCollection::new().with("approximate", "tanh"),
            &big,
        ),
        case(
            "global_max_pool",
            "Interpolate",
            interp("adaptive_max_pool2d", [1, 1]),
            &big,
        ),
        case(
            "adaptive_max_pool_64_to_32",
            "Interpolate",
            interp("adaptive_max_pool2d", [32, 32]),
            &big,
        ),
        case(
            "adaptive_max_pool_30x45_to_7x7",
            "Interpolate",
            interp("adaptive_max_pool2d", [7, 7]),
            &vec![8, 64, 30, 45],
        ),
    ]
}

/// Deterministic values in `[-3, 3)`.
pub fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 6.0 - 3.0
        })
        .collect()
}

/// A created and configured plugin with its input and output buffers.
pub struct Prepared {
    plugin: Box<dyn Plugin>,
    in_desc: TensorDesc,
    out_desc: TensorDesc,
    x: Vec<f32>,
    y: Vec<f32>,
}

impl Prepared {
    /// Creates the case's plugin through its built-in creator (an error when the plugin is
    /// missing or refuses the fields), configures it and fills the input.
    pub fn new(case: &Case) -> Result<Prepared, String> {
        let creator = torchtrt_plugins::register::creators()
            .into_iter()
            .find(|c| c.key().name == case.plugin)
            .ok_or_else(|| format!("no built-in plugin `{}`", case.plugin))?;
        let mut plugin =
            create_plugin(creator.as_ref(), case.name, &case.fields).map_err(|e| e.to_string())?;
        let out = plugin
            .output_shapes(&[const_shape(&case.shape)])
            .map_err(|e| e.to_string())?;
        let out_shape = out
            .first()
            .and_then(|s| shape_values(s))
            .ok_or("output shape is not constant")?;
        let in_desc = TensorDesc::new(DType::F32, case.shape.clone());
        let out_desc = TensorDesc::new(DType::F32, out_shape);
        plugin
            .configure(
                std::slice::from_ref(&in_desc),
                std::slice::from_ref(&out_desc),
            )
            .map_err(|e| e.to_string())?;
        let n_in = numel(&in_desc.shape).ok_or("bad input shape")?;
        let n_out = numel(&out_desc.shape).ok_or("bad output shape")?;
        Ok(Prepared {
            plugin,
            in_desc,
            out_desc,
            x: random_values(n_in, 0x9e37_79b9_7f4a_7c15),
            y: vec![0.0; n_out],
        })
    }

    /// Runs the plugin once on `threads` threads.
    pub fn run(&mut self, threads: usize) -> Result<(), String> {
        let inputs = [HostTensor {
            desc: self.in_desc.clone(),
            data: bytemuck::cast_slice(&self.x),
        }];
        let mut outputs = [HostTensorMut {
            desc: self.out_desc.clone(),
            data: bytemuck::cast_slice_mut(&mut self.y),
        }];
        self.plugin
            .enqueue(Launch::Cpu(CpuLaunch {
                inputs: &inputs,
                outputs: &mut outputs,
                workspace: &mut [],
                threads,
            }))
            .map_err(|e| e.to_string())
    }

    /// Input and output bytes.
    pub fn bytes(&self) -> (usize, usize) {
        (self.x.len() * 4, self.y.len() * 4)
    }

    /// Output shape.
    pub fn out_shape(&self) -> &[i64] {
        &self.out_desc.shape
    }
}
