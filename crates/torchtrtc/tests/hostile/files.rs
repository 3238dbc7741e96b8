//! Endless and damaged files: `/dev/zero` as every kind of file, `.npy` headers NumPy
//! refuses, damaged engines and libraries.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::onnx::{F32, f32_init, model, node, value};
use super::support::{fails, succeeds, torchtrtc};
use super::{arg, f32_npy, npy, scratch, write};

/// A model with one input `x: f32[2,3]`: y = x + c.
fn add_model() -> PathBuf {
    let m = model(
        vec![node("Add", &["x", "c"], &["y"], vec![])],
        vec![f32_init("c", &[3], &[0.5, -1.0, 2.0])],
        vec![value("x", F32, &[2, 3])],
        vec![value("y", F32, &[])],
    );
    write("add.onnx", &m)
}

fn engine() -> PathBuf {
    let path = scratch("add.engine");
    succeeds(&torchtrtc([
        "compile".as_ref(),
        add_model().as_os_str(),
        "-o".as_ref(),
        path.as_os_str(),
    ]));
    path
}

/// Runs `args`, which must fail with exit 1 naming `needles`, within 20 s.
fn refused_quickly(args: &[&std::ffi::OsStr], needles: &[&str]) {
    let start = Instant::now();
    let out = torchtrtc(args);
    fails(&out, 1, needles);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn dev_zero_as_engine_model_or_input_is_refused_at_once() {
    let zero = std::ffi::OsStr::new("/dev/zero");
    refused_quickly(&["inspect".as_ref(), zero], &["not a torchtrt engine"]);
    refused_quickly(
        &[
            "compile".as_ref(),
            zero,
            "-o".as_ref(),
            scratch("z.engine").as_os_str(),
        ],
        &["cannot begin a protobuf field"],
    );
    let x = f32_npy("x23.npy", &[2, 3]);
    refused_quickly(
        &[
            "run".as_ref(),
            zero,
            "--input".as_ref(),
            arg("x", &x).as_ref(),
        ],
        &["cannot begin a protobuf field"],
    );
    let model = add_model();
    refused_quickly(
        &[
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            "x=/dev/zero".as_ref(),
        ],
        &["NUMPY magic"],
    );
    let pb = scratch("zero.pb");
    let _ = std::fs::remove_file(&pb);
    std::os::unix::fs::symlink("/dev/zero", &pb).unwrap();
    refused_quickly(
        &[
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            arg("x", &pb).as_ref(),
        ],
        &["zero.pb", "cannot begin a protobuf field"],
    );
}

#[test]
fn npy_declared_data_is_read_exactly() {
    let model = add_model();
    let run = |file: &PathBuf| {
        torchtrtc([
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            arg("x", file).as_ref(),
        ])
    };
    let mut data = vec![0u8; 24];
    data.extend_from_slice(&[7u8; 1000]);
    let long = npy("long.npy", "<f4", &[2, 3], &data);
    fails(&run(&long), 1, &["24+ data bytes", "needs 24"]);
    let huge = npy("huge.npy", "<f4", &[1 << 40, 1 << 40], &[]);
    fails(&run(&huge), 1, &["overflows"]);
    let big = npy("big.npy", "<f4", &[1 << 40], &[]);
    fails(&run(&big), 1, &["more than this machine's"]);
}

/// A `.npy` file whose header text is `header` (padded as NumPy does).
fn npy_with_header(name: &str, header: &str) -> PathBuf {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend_from_slice(&[0u8; 24]);
    write(name, &bytes)
}

#[test]
fn npy_headers_numpy_refuses_are_refused() {
    let model = add_model();
    let run = |file: &PathBuf| {
        torchtrtc([
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            arg("x", file).as_ref(),
        ])
    };
    let open = npy_with_header(
        "open.npy",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
    );
    fails(&run(&open), 1, &["not a dict"]);
    for (i, v) in ["0", "'False'", "Falsey", "None"].iter().enumerate() {
        let bad = npy_with_header(
            &format!("order{i}.npy"),
            &format!("{{'descr': '<f4', 'fortran_order': {v}, 'shape': (2, 3), }}"),
        );
        fails(
            &run(&bad),
            1,
            &["fortran_order is", "expected True or False"],
        );
    }
    let good = npy_with_header(
        "good.npy",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
    );
    succeeds(&run(&good));
}

#[test]
fn run_on_an_engine_with_damaged_magic_names_a_damaged_engine() {
    let mut bytes = std::fs::read(engine()).unwrap();
    bytes[1] ^= 0x20;
    let damaged = write("damaged.engine", &bytes);
    let x = f32_npy("x23b.npy", &[2, 3]);
    let out = torchtrtc([
        "run".as_ref(),
        damaged.as_os_str(),
        "--input".as_ref(),
        arg("x", &x).as_ref(),
    ]);
    fails(&out, 1, &["damaged engine", "magic"]);
    fails(
        &torchtrtc(["inspect".as_ref(), damaged.as_os_str()]),
        1,
        &["damaged.engine"],
    );
}

#[test]
fn input_shape_of_another_rank_is_refused() {
    let m = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![],
        vec![value("x", F32, &[-1, -1])],
        vec![value("y", F32, &[])],
    );
    let path = write("relu_ab.onnx", &m);
    let out = torchtrtc([
        "compile".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        scratch("relu_ab.engine").as_os_str(),
        "--input-shape".as_ref(),
        "x=1x1x1".as_ref(),
    ]);
    fails(&out, 1, &["x=1x1x1", "rank 3", "rank 2"]);
}

/// Compiles a plain C shared library (no torchtrt entry point).
fn c_library(name: &str) -> PathBuf {
    let c = scratch(&format!("{name}.c"));
    std::fs::write(
        &c,
        "int plain_answer(void);\nint plain_answer(void) { return 42; }\n",
    )
    .unwrap();
    let lib = scratch(name);
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1"])
        .arg(&c)
        .arg("-o")
        .arg(&lib)
        .status()
        .expect("the system C compiler runs");
    assert!(status.success(), "cc failed on {name}");
    lib
}

#[test]
fn truncated_or_unreadable_libraries_are_refused_before_loading() {
    let lib = std::fs::read(c_library("libplain_full.so")).unwrap();
    for (flag, cut) in [
        ("--plugins", 4096usize),
        ("--custom-converters", lib.len() / 2),
        ("--custom-torch-ops", 100),
    ] {
        let cut = cut.min(lib.len() - 1);
        let path = write(&format!("libcut_{cut}.so"), &lib[..cut]);
        let model = add_model();
        let engine = scratch("never.engine");
        let out = torchtrtc([
            "compile".as_ref(),
            model.as_os_str(),
            "-o".as_ref(),
            engine.as_os_str(),
            flag.as_ref(),
            path.as_os_str(),
        ]);
        fails(&out, 1, &[flag, "not a loadable shared library"]);
    }
    let inside_a_file = add_model().join("libx.so");
    let out = torchtrtc([
        "plugins".as_ref(),
        "--plugins".as_ref(),
        inside_a_file.as_os_str(),
    ]);
    let err = fails(&out, 1, &["cannot read plugin library"]);
    assert!(!err.contains("does not exist"), "{err}");
}
