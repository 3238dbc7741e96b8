//! Every generated program, as exported and as decomposed, compiled for the CPU and run at
//! each of its cases (two sizes for the dynamic ones), against PyTorch's outputs; where a
//! CUDA device is present, the exported form also for `cuda` in f32 and in f16.

use std::collections::HashMap;

use torchtrt::plugin_api::DType;
use torchtrt::torch::ImportOptions;
use torchtrt::{BuildConfig, Tensor};

use super::data::{Program, manifest, read_npy, relative_error, root};

/// Where a program is compiled and how close it must come to PyTorch's f32 outputs
/// (`relative_error`: the largest difference over the largest reference magnitude).
#[derive(Clone, Copy)]
struct Target {
    device: &'static str,
    precision: DType,
    rtol: f64,
}

const CPU: Target = Target {
    device: "cpu",
    precision: DType::F32,
    rtol: 1e-4,
};

/// The CUDA targets: f32 as strict as the CPU; f16 within a few of its roundings (2^-11)
/// accumulated over a network's depth.
const CUDA: [Target; 2] = [
    Target {
        device: "cuda",
        precision: DType::F32,
        rtol: 1e-4,
    },
    Target {
        device: "cuda",
        precision: DType::F16,
        rtol: 2e-2,
    },
];

fn run_program(p: &Program, form: &str, target: Target) -> Result<String, String> {
    let dir = root().join(&p.name);
    let net = torchtrt::import_pt2(dir.join(format!("{form}.pt2")), ImportOptions::default())
        .map_err(|e| format!("import: {e}"))?;
    let names: Vec<String> = net.outputs().iter().map(|(n, _)| n.clone()).collect();
    let want_names = if form == "exported" {
        &p.outputs
    } else {
        &p.decomposed_outputs
    };
    if names != *want_names {
        return Err(format!("outputs {names:?}, the program's {want_names:?}"));
    }
    let config = BuildConfig {
        precision: target.precision,
        ..BuildConfig::default()
    };
    let engine =
        torchtrt::compile_for(&net, &config, target.device).map_err(|e| format!("compile: {e}"))?;
    let keys: Vec<String> = engine
        .summary()
        .plugins
        .iter()
        .map(|pl| match pl.key.namespace.as_str() {
            "" => pl.key.name.clone(),
            ns => format!("{ns}::{}", pl.key.name),
        })
        .collect();
    if form == "exported" {
        for want in &p.plugins {
            if !keys.contains(want) {
                return Err(format!("plugin {want} not used (plugins: {keys:?})"));
            }
        }
    }
    let mut report = Vec::new();
    for case in &p.cases {
        let inputs: Vec<(String, Tensor)> = p
            .inputs
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    read_npy(&dir.join(case).join("inputs").join(format!("{n}.npy"))),
                )
            })
            .collect();
        let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let outs: HashMap<String, Tensor> = engine
            .create_context()
            .unwrap()
            .execute_named(&named)
            .map_err(|e| format!("{case}: run: {e}"))?
            .into_iter()
            .collect();
        for (o, ours) in p.outputs.iter().zip(&names) {
            let want = read_npy(&dir.join(case).join("outputs").join(format!("{o}.npy")));
            let got = outs
                .get(ours)
                .ok_or_else(|| format!("{case}: no output {ours}"))?;
            if got.shape() != want.shape() {
                return Err(format!(
                    "{case}: {o} has shape {:?}, PyTorch's {:?}",
                    got.shape(),
                    want.shape()
                ));
            }
            let err = relative_error(got, &want);
            if err.is_nan() || err > target.rtol {
                return Err(format!(
                    "{case}: {o}: relative error {err:.3e} > {:e}",
                    target.rtol
                ));
            }
            report.push(format!("{case}/{o} {err:.1e}"));
        }
    }
    Ok(report.join(", "))
}

fn check(name: &str) {
    let programs = manifest();
    let p = programs
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("program {name} is not in the manifest"));
    let mut runs = vec![("exported", CPU), ("decomposed", CPU)];
    if torchtrt::cuda::probe::available() {
        runs.extend(CUDA.map(|t| ("exported", t)));
    } else {
        eprintln!("{name}: CUDA skipped: no CUDA device");
    }
    let mut failures = Vec::new();
    for (form, target) in runs {
        let what = format!("{name}/{form} on {} {}", target.device, target.precision);
        match run_program(p, form, target) {
            Ok(r) => eprintln!("{what}: {r}"),
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_manifest_program_has_a_test() {
    let tested = [
        "resnet18",
        "mobilenet_v3_small",
        "efficientnet_b0",
        "lraspp_mobilenet_v3",
        "vit_tiny",
        "bert_tiny",
        "gpt2_tiny",
        "plugin_interpolate",
        "plugin_normalize",
        "plugin_instance_norm",
        "plugin_gelu",
        "plugin_nms",
    ];
    for p in manifest() {
        assert!(
            tested.contains(&p.name.as_str()),
            "program {} has no test",
            p.name
        );
    }
}

#[test]
fn resnet18() {
    check("resnet18");
}

#[test]
fn mobilenet_v3_small() {
    check("mobilenet_v3_small");
}

#[test]
fn efficientnet_b0_silu() {
    check("efficientnet_b0");
}

#[test]
fn lraspp_mobilenet_v3_dynamic_batch_and_image() {
    check("lraspp_mobilenet_v3");
}

#[test]
fn vit_tiny() {
    check("vit_tiny");
}

#[test]
fn bert_tiny_dynamic_batch_and_sequence() {
    check("bert_tiny");
}

#[test]
fn gpt2_tiny_dynamic_batch_and_sequence() {
    check("gpt2_tiny");
}

#[test]
fn interpolate_plugin() {
    check("plugin_interpolate");
}

#[test]
fn normalize_plugin() {
    check("plugin_normalize");
}

#[test]
fn instance_norm_plugin() {
    check("plugin_instance_norm");
}

#[test]
fn gelu_plugin() {
    check("plugin_gelu");
}

#[test]
fn nms_plugin_with_data_dependent_output() {
    check("plugin_nms");
}
