//! `torchtrtc run`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use torchtrt::Tensor;

use crate::BuildOptions;
use crate::args::{file_safe, parse_pair};
use crate::npy::{read_tensor, write_npy};
use crate::progress::Progress;

/// Arguments of `run`.
#[derive(Args)]
pub struct RunArgs {
    /// An ONNX model, a `.pt2` program or an engine file.
    model: PathBuf,
    /// Input data: NAME=FILE.npy or NAME=FILE.pb (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Write every output to DIR/<name>.npy.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Compare an output with a reference: NAME=FILE (repeatable).
    #[arg(long = "check", value_name = "NAME=FILE")]
    checks: Vec<String>,
    /// Absolute tolerance of --check.
    #[arg(long, default_value_t = 1e-5)]
    atol: f64,
    /// Relative tolerance of --check.
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    #[command(flatten)]
    build: BuildOptions,
}

/// Runs the model once.
pub fn run(a: RunArgs) -> Result<()> {
    let inputs: Vec<(String, Tensor)> = a
        .inputs
        .iter()
        .map(|s| {
            let (name, file) = parse_pair(s)?;
            Ok((name, read_tensor(file.as_ref())?))
        })
        .collect::<Result<_>>()?;
    for (i, (name, _)) in inputs.iter().enumerate() {
        if inputs[..i].iter().any(|(n, _)| n == name) {
            bail!("--input {name}=… is given twice");
        }
    }
    let shapes: Vec<(String, Vec<usize>)> = inputs
        .iter()
        .map(|(n, t)| (n.clone(), t.shape().to_vec()))
        .collect();
    let progress = Progress::stages(4);
    let engine = super::load_or_compile(&a.model, &a.build, &shapes, &progress)?;
    progress.finish();
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut ctx = engine.create_context()?;
    ctx.set_memory_limit(super::build_config(&a.build).memory_limit());
    let outputs = ctx.execute_named(&named)?;
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (name, t) in &outputs {
        println!("{name}: {t}");
        if let Some(dir) = &a.output_dir {
            write_npy(&dir.join(format!("{}.npy", file_safe(name))), t)?;
        }
    }
    print_plugins(&engine);
    println!("device: {}", ctx.device());
    let mut failed = Vec::new();
    for spec in &a.checks {
        let (name, file) = parse_pair(spec)?;
        let want = read_tensor(file.as_ref())?;
        let got = outputs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .with_context(|| format!("--check {name}: the model has no such output"))?;
        match worst(got, &want, a.atol, a.rtol) {
            Ok((i, g, w)) => println!("check {name}: ok (worst element {i}: {g} vs {w})"),
            Err(msg) => {
                println!("check {name}: FAILED: {msg}");
                failed.push(name);
            }
        }
    }
    if !failed.is_empty() {
        bail!("--check failed for {}", failed.join(", "));
    }
    Ok(())
}

/// One line naming the plugins the engine ran, with how many layers of each and their source.
fn print_plugins(engine: &torchtrt::Engine) {
    let summary = engine.summary();
    if summary.plugins.is_empty() {
        println!("plugins: none");
        return;
    }
    let mut seen: Vec<(String, usize)> = Vec::new();
    for p in &summary.plugins {
        let key = p.key.to_string();
        let key = key.strip_prefix("::").unwrap_or(&key).to_string();
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => seen.push((key, 1)),
        }
    }
    let list: Vec<String> = seen
        .iter()
        .map(|(k, n)| {
            if *n > 1 {
                format!("{k} ×{n}")
            } else {
                k.clone()
            }
        })
        .collect();
    println!(
        "plugins: {} ({} plugin layers of {})",
        list.join(", "),
        summary.plugins.len(),
        summary.layers.len()
    );
}

/// The worst element by how far it is outside or inside the tolerance.
fn worst(got: &Tensor, want: &Tensor, atol: f64, rtol: f64) -> Result<(usize, f64, f64), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, reference {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut worst = (0usize, f64::NEG_INFINITY);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let excess = if a == b || (a.is_nan() && b.is_nan()) {
            f64::NEG_INFINITY
        } else {
            (a - b).abs() - (atol + rtol * b.abs())
        };
        let excess = if excess.is_nan() {
            f64::INFINITY
        } else {
            excess
        };
        if excess > worst.1 {
            worst = (i, excess);
        }
    }
    let (i, e) = worst;
    if g.is_empty() {
        return Ok((0, 0.0, 0.0));
    }
    if e > 0.0 {
        Err(format!(
            "element {i}: {} vs reference {} (atol {atol}, rtol {rtol})",
            g[i], w[i]
        ))
    } else {
        Ok((i, g[i], w[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(&[v.len()], v).unwrap()
    }

    #[test]
    fn infinities_match_only_the_same_infinity() {
        let (inf, ninf) = (f32::INFINITY, f32::NEG_INFINITY);
        assert!(worst(&t(&[inf, ninf, 1.0]), &t(&[inf, ninf, 1.0]), 0.0, 0.0).is_ok());
        assert!(worst(&t(&[ninf]), &t(&[inf]), 1.0, 1.0).is_err());
        assert!(worst(&t(&[1e30]), &t(&[inf]), 1.0, 1.0).is_err());
        assert!(worst(&t(&[f32::NAN]), &t(&[1.0]), 1.0, 1.0).is_err());
        assert!(worst(&t(&[f32::NAN]), &t(&[f32::NAN]), 0.0, 0.0).is_ok());
    }
}
