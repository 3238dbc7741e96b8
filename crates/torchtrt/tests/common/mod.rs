#![allow(dead_code)]

use std::path::PathBuf;

pub mod examples;

/// Deterministic pseudo-random f32 values in [-1, 1).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace exists")
}

/// `|a - b| <= atol + rtol·|b|` element-wise with the shared comparison (NaN only NaN,
/// infinities only themselves), the worst element in the message.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    let tol = torchtrt_testing::Tol::new(f64::from(rtol), f64::from(atol));
    torchtrt_testing::check_floats(got, want, tol).unwrap_or_else(|m| panic!("{m}"));
}

/// The kernel-plugin spec of `tests::KvWrite`: `out` aliases `cache` [B, S, D] and gets
/// `update` [B, 1, D] written into row `pos` (an i64 [1]).
pub const KV_WRITE_SPEC: &str = include_str!("kv_write.toml");

/// A network computing `KvWrite(cache, update, pos)` as output `out` and, from the same
/// `cache` read after the plugin, `cache + cache` as output `twice`; B is dynamic (1..8).
pub fn kv_write_network(
    registry: &torchtrt::PluginRegistry,
    s: usize,
    d: usize,
) -> torchtrt::NetworkDefinition {
    use torchtrt::layers::{Elementwise, ElementwiseOp};
    use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
    use torchtrt::{Dim, NetworkDefinition};
    let mut net = NetworkDefinition::new();
    let b = || Dim::dynamic("B", 1, 2, 8);
    let cache = net
        .add_input(
            "cache",
            DType::F32,
            &[b(), Dim::Fixed(s as i64), Dim::Fixed(d as i64)],
        )
        .expect("cache");
    let update = net
        .add_input(
            "update",
            DType::F32,
            &[b(), Dim::Fixed(1), Dim::Fixed(d as i64)],
        )
        .expect("update");
    let pos = net
        .add_input("pos", DType::I64, &[Dim::Fixed(1)])
        .expect("pos");
    let key = PluginKey::new("tests", "KvWrite", "1");
    let out = net
        .add_plugin(
            "kv",
            registry,
            &key,
            &FieldCollection::new(),
            &[cache, update, pos],
        )
        .expect("plugin")[0];
    let twice = net
        .add_layer(
            "twice",
            Elementwise::new(ElementwiseOp::Add),
            &[cache, cache],
        )
        .expect("add")[0];
    net.mark_output(out, "out").expect("out");
    net.mark_output(twice, "twice").expect("twice");
    net
}

/// Runs a `kv_write_network` engine at batch `b` and checks both outputs.
pub fn check_kv_write(engine: &torchtrt::Engine, b: usize, s: usize, d: usize, p: i64, seed: u64) {
    use torchtrt::Tensor;
    let cache_v = random_f32(b * s * d, seed);
    let update_v = random_f32(b * d, seed + 1);
    let cache = Tensor::from_vec(&[b, s, d], cache_v.clone()).expect("cache");
    let update = Tensor::from_vec(&[b, 1, d], update_v.clone()).expect("update");
    let pos = Tensor::from_vec(&[1], vec![p]).expect("pos");
    let got = engine
        .create_context()
        .expect("context")
        .execute(&[&cache, &update, &pos])
        .expect("runs");
    let mut want = cache_v.clone();
    if (0..s as i64).contains(&p) {
        for i in 0..b {
            let row = (i * s + p as usize) * d;
            want[row..row + d].copy_from_slice(&update_v[i * d..(i + 1) * d]);
        }
    }
    assert_eq!(got[0].as_slice::<f32>().expect("f32"), want, "out");
    let twice: Vec<f32> = cache_v.iter().map(|v| v + v).collect();
    assert_eq!(
        got[1].as_slice::<f32>().expect("f32"),
        twice,
        "the input is left as it was"
    );
}

/// The example kernel plugin's SwiGLU: `a · sigmoid(alpha · a) · b` over the halves of each
/// last-axis row of `x`, in f64.
pub fn swiglu_reference(x: &[f32], row: usize, alpha: f64) -> Vec<f32> {
    let d = row / 2;
    x.chunks_exact(row)
        .flat_map(|r| {
            (0..d).map(move |i| {
                let (a, b) = (f64::from(r[i]), f64::from(r[d + i]));
                (a / (1.0 + (-alpha * a).exp()) * b) as f32
            })
        })
        .collect()
}
