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

/// A `--device` value: `cpu`, `cuda` or `cuda:N`.
pub fn parse_device(spec: &str) -> Result<String> {
    let ok = spec == "cpu"
        || spec == "cuda"
        || spec
            .strip_prefix("cuda:")
            .is_some_and(|n| n.parse::<usize>().is_ok());
    if !ok {
        bail!("`{spec}`: expected cpu, cuda or cuda:N");
    }
    Ok(spec.to_string())
}

/// An INT8 calibration method: `minmax`, `percentile` (99.99) or `percentile:P`.
pub fn parse_calibrator(spec: &str) -> Result<torchtrt::Calibrator> {
    let percentile = |p: &str| -> Result<torchtrt::Calibrator> {
        let v: f64 = p
            .parse()
            .with_context(|| format!("`{spec}`: the percentile must be a number in (0, 100]"))?;
        torchtrt::Calibrator::Percentile(v)
            .validated()
            .map_err(|e| anyhow::anyhow!("`{spec}`: {e}"))
    };
    match spec {
        "minmax" => Ok(torchtrt::Calibrator::MinMax),
        "percentile" => percentile("99.99"),
        _ => match spec.strip_prefix("percentile:") {
            Some(p) => percentile(p),
            None => bail!("`{spec}`: expected minmax, percentile or percentile:P"),
        },
    }
}

/// A byte count: digits with an optional `K`, `M`, `G` or `T` suffix (powers of 1024,
/// `KiB`-style spellings accepted).
pub fn parse_bytes(spec: &str) -> Result<u64> {
    let s = spec.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n
        .parse()
        .with_context(|| format!("`{spec}`: expected a byte count such as 512M or 8G"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => bail!("`{spec}`: unknown unit `{unit}` (use K, M, G or T)"),
    };
    n.checked_mul(1u64 << shift)
        .with_context(|| format!("`{spec}`: too large"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_shapes_fixed_and_dynamic() {
        let (name, dims) = parse_input_shape("x=1x3x224x224").unwrap();
        assert_eq!(name, "x");
        assert_eq!(dims, [1, 3, 224, 224].map(Dim::Fixed).to_vec());
        let (_, dims) = parse_input_shape("img=1x3x8;4x3x16;8x3x32").unwrap();
        assert_eq!(dims[0], Dim::dynamic("img.0", 1, 4, 8));
        assert_eq!(dims[1], Dim::Fixed(3));
        assert_eq!(dims[2], Dim::dynamic("img.2", 8, 16, 32));
    }

    #[test]
    fn bad_input_shapes_name_the_problem() {
        for (spec, why) in [
            ("x", "expected NAME=SHAPE"),
            ("x=1xQ", "`Q` is not a dimension"),
            ("x=1;2", "give one shape or three"),
            ("x=1x2;1;1x2", "different ranks"),
            ("x=4;2;8", "MIN ≤ OPT ≤ MAX"),
        ] {
            let err = parse_input_shape(spec).unwrap_err().to_string();
            assert!(err.contains(why), "{spec}: {err}");
        }
    }

    #[test]
    fn file_safe_names() {
        assert_eq!(file_safe("normalize/div:0 x"), "normalize_div_0_x");
        assert_eq!(file_safe("a.b-c_d"), "a.b-c_d");
    }
}
