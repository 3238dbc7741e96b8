//! Parsing of `--input` specifications.

use anyhow::{Context, Result, bail};
use torchtrt::Dim;

/// `NAME=SHAPE` (`1x3x224x224`) or `NAME=MIN;OPT;MAX` into dims; dims that differ between
/// min and max become dynamic, named `NAME.AXIS`.
pub fn parse_input_shape(spec: &str) -> Result<(String, Vec<Dim>)> {
    let (name, shapes) = spec
        .split_once('=')
        .with_context(|| format!("`{spec}`: expected NAME=SHAPE or NAME=MIN;OPT;MAX"))?;
    let parse = |s: &str| -> Result<Vec<i64>> {
        s.split(['x', ','])
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .with_context(|| format!("`{spec}`: `{d}` is not a dimension"))
            })
            .collect()
    };
    let parts: Vec<Vec<i64>> = shapes.split(';').map(parse).collect::<Result<_>>()?;
    let (min, opt, max) = match parts.as_slice() {
        [s] => (s.clone(), s.clone(), s.clone()),
        [a, b, c] => (a.clone(), b.clone(), c.clone()),
        _ => bail!("`{spec}`: give one shape or three (MIN;OPT;MAX)"),
    };
    if min.len() != opt.len() || opt.len() != max.len() {
        bail!("`{spec}`: MIN, OPT and MAX have different ranks");
    }
    let dims = (0..min.len())
        .map(|i| {
            if min[i] == max[i] && opt[i] == min[i] {
                Ok(Dim::Fixed(min[i]))
            } else if 0 <= min[i] && min[i] <= opt[i] && opt[i] <= max[i] {
                Ok(Dim::dynamic(&format!("{name}.{i}"), min[i], opt[i], max[i]))
            } else {
                bail!("`{spec}`: dim {i} needs MIN ≤ OPT ≤ MAX")
            }
        })
        .collect::<Result<_>>()?;
    Ok((name.to_string(), dims))
}

/// `NAME=VALUE` pairs.
pub fn parse_pair(spec: &str) -> Result<(String, String)> {
    let (a, b) = spec
        .split_once('=')
        .with_context(|| format!("`{spec}`: expected NAME=VALUE"))?;
    Ok((a.to_string(), b.to_string()))
}

/// File-name-safe form of a tensor name: characters outside `A-Za-z0-9._-` become `_`.
pub fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
