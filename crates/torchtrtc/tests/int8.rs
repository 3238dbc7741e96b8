//! `--precision int8`: ResNet-18 (`.pt2`, seeded random weights) calibrated from a folder
//! of `.npy` batches compiles to an engine whose convolutions are integer ones (`inspect`),
//! which runs close to PyTorch's f32 logits; the calibration cache written on the way
//! builds the same engine without the folder. Missing or misplaced flags are clear errors.

mod support;

use std::path::{Path, PathBuf};

use support::{fails, scratch_in, succeeds, torchtrtc, write_npy};

fn resnet18() -> PathBuf {
    let root = std::env::var_os("TORCHTRT_TORCH_PROGRAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/torch-programs")
        });
    let dir = root.join("resnet18");
    assert!(
        dir.join("exported.pt2").is_file(),
        "PyTorch test programs missing at {}: run scripts/gen_torch_programs.py (scripts/test does)",
        root.display()
    );
    dir
}

/// Four batches of eight 64×64 images of roughly normal values (sums of four uniform
/// ones), like the test cases' `randn` images, one `.npy` file each.
fn calibration_folder() -> PathBuf {
    let dir = scratch_in("int8", "calibration");
    std::fs::create_dir_all(&dir).unwrap();
    let shape = [8, 3, 64, 64];
    let n: usize = shape.iter().product();
    let mut s = 17u64;
    let mut uniform = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    for b in 0..4 {
        let bytes: Vec<u8> = (0..n)
            .flat_map(|_| {
                let sum: f32 = (0..4).map(|_| uniform()).sum();
                (sum * 0.75f32.sqrt()).to_le_bytes()
            })
            .collect();
        write_npy(&dir.join(format!("batch{b}.npy")), "<f4", &shape, &bytes);
    }
    dir
}

#[test]
fn int8_engines_compile_from_a_calibration_folder_and_run_close_to_pytorch() {
    let program = resnet18();
    let model = program.join("exported.pt2").display().to_string();
    let folder = calibration_folder().display().to_string();
    let cache = scratch_in("int8", "resnet18.calibration");
    let _ = std::fs::remove_file(&cache);
    let cache = cache.display().to_string();
    let engines = [
        scratch_in("int8", "a.engine"),
        scratch_in("int8", "b.engine"),
    ];
    let [a, b] = engines.each_ref().map(|e| e.display().to_string());
    let int8 = ["--precision", "int8", "--calibration-cache", &cache];
    succeeds(&torchtrtc(
        [
            &["compile", &model, "-o", &a, "--calibration", &folder][..],
            &int8,
        ]
        .concat(),
    ));
    assert!(
        std::fs::read_to_string(&cache)
            .unwrap()
            .starts_with("torchtrt-int8-calibration")
    );
    succeeds(&torchtrtc(
        [&["compile", &model, "-o", &b][..], &int8].concat(),
    ));
    let inspect = succeeds(&torchtrtc(["inspect", &a]));
    assert!(inspect.contains("QuantizedConvolution"), "{inspect}");
    for engine in [&a, &b] {
        for case in ["case0", "case1"] {
            let case = program.join(case);
            let x = format!("x={}", case.join("inputs/x.npy").display());
            let want = format!("linear={}", case.join("outputs/linear.npy").display());
            succeeds(&torchtrtc([
                "run", engine, "--input", &x, "--check", &want, "--rtol", "0.1", "--atol", "0.1",
            ]));
        }
    }
}

#[test]
fn int8_flags_out_of_place_are_errors() {
    let model = resnet18().join("exported.pt2").display().to_string();
    let out = scratch_in("int8", "never.engine").display().to_string();
    fails(
        &torchtrtc(["compile", &model, "-o", &out, "--precision", "int8"]),
        1,
        &["--precision int8 needs --calibration DIR"],
    );
    fails(
        &torchtrtc(["compile", &model, "-o", &out, "--calibration", "somewhere"]),
        1,
        &["need --precision int8"],
    );
    let empty = scratch_in("int8", "empty");
    std::fs::create_dir_all(&empty).unwrap();
    fails(
        &torchtrtc([
            "compile",
            &model,
            "-o",
            &out,
            "--precision",
            "int8",
            "--calibration",
            &empty.display().to_string(),
        ]),
        1,
        &["no .npy files or batch folders"],
    );
}
