//! Builds a small network that uses the built-in plugins next to core layers, serializes it,
//! deserializes it with a fresh runtime, runs it and prints what ran.
//!
//! `cargo run --release -p torchtrt --example demo`

use torchtrt::layers::{Convolution, Reduce, ReduceOp};
use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Runtime, Tensor, registry};

fn pseudo_random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn main() -> Result<(), torchtrt::Error> {
    torchtrt::init_plugins()?;
    let reg = registry();
    let mut net = NetworkDefinition::new();
    let x = net.add_input(
        "image",
        DType::F32,
        &[
            Dim::dynamic("batch", 1, 2, 8),
            3.into(),
            16.into(),
            16.into(),
        ],
    )?;
    let w = net.add_constant(
        "conv.weight",
        Tensor::from_vec(&[8, 3, 3, 3], pseudo_random(216, 1))?,
    )?;
    let b = net.add_constant("conv.bias", Tensor::from_vec(&[8], pseudo_random(8, 2))?)?;
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let c = net.add("conv", conv, &[x, w, b])?;

    let norm = FieldCollection::new()
        .with("epsilon", 1e-5f32)
        .with("scales", vec![1.0f32; 8])
        .with("bias", vec![0.1f32; 8])
        .with("relu", 1i32)
        .with("alpha", 0.1f32);
    let key = |ns: &str, name: &str| PluginKey::new(ns, name, "1");
    let n = net.add_plugin(
        "instance_norm",
        reg,
        &key("", "InstanceNormalization_TRT"),
        &norm,
        &[c],
    )?[0];
    let up = FieldCollection::new()
        .with("mode", "bilinear")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net.add_plugin(
        "upsample",
        reg,
        &key("torch_tensorrt", "Interpolate"),
        &up,
        &[n],
    )?[0];
    let g = net.add_plugin(
        "gelu",
        reg,
        &key("", "CustomGeluPluginDynamic"),
        &FieldCollection::new(),
        &[u],
    )?[0];
    let pool = FieldCollection::new()
        .with("mode", "adaptive_max_pool2d")
        .with("out_size", vec![7i64, 7]);
    let p = net.add_plugin(
        "adaptive_max_pool",
        reg,
        &key("torch_tensorrt", "Interpolate"),
        &pool,
        &[g],
    )?[0];
    let l2 = FieldCollection::new()
        .with("order", 2.0f32)
        .with("axes", vec![1i32])
        .with("mode", "normalize")
        .with("eps", 1e-12f32);
    let z = net.add_plugin(
        "normalize",
        reg,
        &key("torch_tensorrt", "NormalizePlugin"),
        &l2,
        &[p],
    )?[0];
    let mean = Reduce {
        op: ReduceOp::Mean,
        axes: vec![2, 3],
        keep_dims: false,
    };
    let y = net.add("spatial_mean", mean, &[z])?;
    net.mark_output(y, "features")?;

    let engine = torchtrt::compile(&net, &BuildConfig::default())?;
    let bytes = engine.serialize();
    println!(
        "compiled: {} layers, engine file {} bytes",
        engine.plan().layers.len(),
        bytes.len()
    );

    let engine = Runtime::new()?.deserialize(&bytes)?;
    let input = Tensor::from_vec(&[2, 3, 16, 16], pseudo_random(2 * 3 * 16 * 16, 3))?;
    let outputs = engine
        .create_context()
        .unwrap()
        .execute_named(&[("image", &input)])?;
    for (name, t) in &outputs {
        let v = t.as_slice::<f32>()?;
        println!("{name}: {t}");
        for row in v.chunks(8) {
            let cells: Vec<String> = row.iter().map(|x| format!("{x:+.4}")).collect();
            println!("  {}", cells.join(" "));
        }
    }
    println!();
    print!("{}", engine.summary());
    Ok(())
}
