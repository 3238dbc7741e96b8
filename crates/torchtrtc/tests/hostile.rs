//! Hostile input through the built `torchtrtc`: models whose shapes are valid but enormous,
//! damaged engines and libraries, endless files. Each must end in one `error:` line and
//! exit 1 — never an abort, a panic, a bus error or an allocation that eats the machine.

mod support;

#[path = "hostile/onnx.rs"]
mod onnx;

use std::path::{Path, PathBuf};

use onnx::{F32, I64, f32_init, i64_init, ints, model, node, value};
use support::{fails, scratch_in, torchtrtc, write_npy};

/// 2^40: every size below is about a tebibyte or more.
const HUGE: i64 = 1 << 40;

fn scratch(name: &str) -> PathBuf {
    scratch_in("hostile", name)
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Writes a version-1.0 `.npy` file of `descr` values.
fn npy(name: &str, descr: &str, shape: &[usize], data: &[u8]) -> PathBuf {
    let path = scratch(name);
    write_npy(&path, descr, shape, data);
    path
}

fn f32_npy(name: &str, shape: &[usize]) -> PathBuf {
    let n: usize = shape.iter().product();
    let data: Vec<u8> = (0..n)
        .flat_map(|i| (0.25 + i as f32 * 0.5).to_le_bytes())
        .collect();
    npy(name, "<f4", shape, &data)
}

fn arg(name: &str, path: &Path) -> String {
    format!("{name}={}", path.display())
}

/// `compile` refuses the model with exit 1 and one line naming `needles`.
fn compile_refuses(name: &str, model: Vec<u8>, needles: &[&str]) {
    let path = write(&format!("{name}.onnx"), &model);
    let out = torchtrtc([
        "compile".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        scratch(&format!("{name}.engine")).as_os_str(),
    ]);
    fails(&out, 1, needles);
}

#[test]
fn pad_by_a_tebi_element_is_refused() {
    let m = model(
        vec![node("Pad", &["x", "pads"], &["y"], vec![])],
        vec![i64_init("pads", &[4], &[0, HUGE, 0, 0])],
        vec![value("x", F32, &[1, 4])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("pad", m, &["Pad_0", "bytes", "memory limit"]);
}

#[test]
fn expand_to_a_tebi_element_is_refused() {
    let m = model(
        vec![node("Expand", &["x", "shape"], &["y"], vec![])],
        vec![i64_init("shape", &[2], &[HUGE, 1])],
        vec![value("x", F32, &[1, 1])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("expand", m, &["Expand_0", "memory limit"]);
}

#[test]
fn tile_by_a_tebi_element_is_refused() {
    let m = model(
        vec![node("Tile", &["x", "repeats"], &["y"], vec![])],
        vec![i64_init("repeats", &[1], &[HUGE])],
        vec![value("x", F32, &[4])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("tile", m, &["Tile_0", "memory limit"]);
}

#[test]
fn constant_of_shape_of_a_tebi_element_is_refused() {
    let m = model(
        vec![
            node("ConstantOfShape", &["shape"], &["c"], vec![]),
            node("Add", &["c", "x"], &["y"], vec![]),
        ],
        vec![i64_init("shape", &[2], &[HUGE, 4])],
        vec![value("x", F32, &[1])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("cos", m, &["memory limit"]);
}

#[test]
fn range_of_a_tebi_element_is_refused() {
    let m = model(
        vec![
            node("Range", &["start", "limit", "delta"], &["r"], vec![]),
            node("Add", &["r", "x"], &["y"], vec![]),
        ],
        vec![
            f32_init("start", &[], &[0.0]),
            f32_init("limit", &[], &[HUGE as f32]),
            f32_init("delta", &[], &[1.0]),
        ],
        vec![value("x", F32, &[1])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("range", m, &["memory limit"]);
}

#[test]
fn conv_and_max_pool_with_tebi_padding_are_refused() {
    let conv = model(
        vec![node(
            "Conv",
            &["x", "w"],
            &["y"],
            vec![ints("pads", &[HUGE, HUGE, HUGE, HUGE])],
        )],
        vec![f32_init("w", &[1, 1, 1, 1], &[0.5])],
        vec![value("x", F32, &[1, 1, 4, 4])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("conv", conv, &["Conv_0", "memory limit"]);
    let pool = model(
        vec![node(
            "MaxPool",
            &["x"],
            &["y"],
            vec![
                ints("kernel_shape", &[1, 1]),
                ints("pads", &[HUGE, HUGE, HUGE, HUGE]),
            ],
        )],
        vec![],
        vec![value("x", F32, &[1, 1, 4, 4])],
        vec![value("y", F32, &[])],
    );
    compile_refuses("maxpool", pool, &["MaxPool_0", "memory limit"]);
}

#[test]
fn max_memory_flag_lowers_the_limit() {
    let m = model(
        vec![node("Tile", &["x", "repeats"], &["y"], vec![])],
        vec![i64_init("repeats", &[1], &[1 << 20])],
        vec![value("x", F32, &[4])],
        vec![value("y", F32, &[])],
    );
    let path = write("tile_16m.onnx", &m);
    let engine = scratch("tile_16m.engine");
    let compile = |limit: &str| {
        torchtrtc([
            "compile".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            engine.as_os_str(),
            "--max-memory".as_ref(),
            limit.as_ref(),
        ])
    };
    fails(
        &compile("1000000"),
        1,
        &["Tile_0", "16777216 bytes", "memory limit"],
    );
    support::succeeds(&compile("1G"));
}

#[test]
fn shape_from_an_input_value_is_checked_at_run_time() {
    let m = model(
        vec![node("Expand", &["x", "shape"], &["y"], vec![])],
        vec![],
        vec![value("x", F32, &[1]), value("shape", I64, &[1])],
        vec![value("y", F32, &[])],
    );
    let path = write("expand_by_input.onnx", &m);
    let x = f32_npy("x1.npy", &[1]);
    let shape = npy("shape.npy", "<i8", &[1], &HUGE.to_le_bytes());
    let out = torchtrtc([
        "run".as_ref(),
        path.as_os_str(),
        "--input".as_ref(),
        arg("x", &x).as_ref(),
        "--input".as_ref(),
        arg("shape", &shape).as_ref(),
    ]);
    fails(&out, 1, &["Expand_0", "memory limit"]);
}

#[path = "hostile/files.rs"]
mod files;

#[path = "hostile/attributes.rs"]
mod attributes;
