//! `Conv`, `ConvTranspose` and the pools against plain references on random data, with a
//! dynamic batch dim, every `auto_pad`, and ConvTranspose's `output_shape`.

mod common;
mod compute;

use common::{int, ints, model, node, string, value};
use compute::{check, coords, fail, flat, random, run, values};
use proptest::prelude::*;

/// One random sliding-window setup over 1 or 2 spatial dims.
#[derive(Clone, Debug)]
struct Win {
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<usize>,
}

fn win() -> impl Strategy<Value = Win> {
    (1usize..=2).prop_flat_map(|n| {
        (
            prop::collection::vec(3usize..=8, n),
            prop::collection::vec(1usize..=3, n),
            prop::collection::vec(1usize..=2, n),
            prop::collection::vec(1usize..=2, n),
            prop::collection::vec(0usize..=2, 2 * n),
        )
            .prop_map(|(input, kernel, strides, dilations, pads)| Win {
                input,
                kernel,
                strides,
                dilations,
                pads,
            })
    })
}

impl Win {
    fn spatial(&self) -> usize {
        self.input.len()
    }

    fn span(&self, i: usize) -> usize {
        (self.kernel[i] - 1) * self.dilations[i] + 1
    }

    /// Pads `(begin, end)` per dim for `auto_pad`, by the ONNX formulas.
    fn resolved_pads(&self, auto_pad: &str) -> (Vec<usize>, Vec<usize>) {
        let n = self.spatial();
        match auto_pad {
            "VALID" => (vec![0; n], vec![0; n]),
            "SAME_UPPER" | "SAME_LOWER" => (0..n)
                .map(|i| {
                    let out = self.input[i].div_ceil(self.strides[i]);
                    let total =
                        ((out - 1) * self.strides[i] + self.span(i)).saturating_sub(self.input[i]);
                    let small = total / 2;
                    if auto_pad == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    }
                })
                .unzip(),
            _ => (self.pads[..n].to_vec(), self.pads[n..].to_vec()),
        }
    }

    /// Output extents for pads `(begin, end)`, `None` when one would be empty.
    fn out(&self, pb: &[usize], pe: &[usize]) -> Option<Vec<usize>> {
        (0..self.spatial())
            .map(|i| {
                let padded = self.input[i] + pb[i] + pe[i];
                (padded >= self.span(i)).then(|| (padded - self.span(i)) / self.strides[i] + 1)
            })
            .collect()
    }

    /// The input coordinates of tap `k` of output position `o`, `None` when it falls in
    /// the padding.
    fn tap(&self, o: &[usize], k: &[usize], pb: &[usize]) -> Option<Vec<usize>> {
        (0..self.spatial())
            .map(|i| {
                let p = (o[i] * self.strides[i] + k[i] * self.dilations[i]) as i64 - pb[i] as i64;
                (0..self.input[i] as i64).contains(&p).then_some(p as usize)
            })
            .collect()
    }

    fn attrs(&self, auto_pad: &str) -> Vec<torchtrt_onnx::proto::AttributeProto> {
        let i64s = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let mut a = vec![
            ints("kernel_shape", &i64s(&self.kernel)),
            ints("strides", &i64s(&self.strides)),
            ints("dilations", &i64s(&self.dilations)),
            string("auto_pad", auto_pad),
        ];
        if auto_pad == "NOTSET" {
            a.push(ints("pads", &i64s(&self.pads)));
        }
        a
    }
}

fn dims(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// Plain grouped cross-correlation plus bias.
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[f64],
    n: usize,
    c: usize,
    w: &[f64],
    m: usize,
    b: &[f64],
    groups: usize,
    win: &Win,
    pb: &[usize],
    out: &[usize],
) -> Vec<f64> {
    let (cg, mg) = (c / groups, m / groups);
    let (in_n, out_n, k_n) = (
        win.input.iter().product::<usize>(),
        out.iter().product::<usize>(),
        win.kernel.iter().product::<usize>(),
    );
    let mut y = vec![0.0; n * m * out_n];
    for (idx, yv) in y.iter_mut().enumerate() {
        let (b_i, oc, op) = (idx / (m * out_n), idx / out_n % m, idx % out_n);
        let o = coords(op, out);
        let g = oc / mg;
        let mut acc = b[oc];
        for ci in 0..cg {
            let ic = g * cg + ci;
            for kp in 0..k_n {
                let k = coords(kp, &win.kernel);
                if let Some(p) = win.tap(&o, &k, pb) {
                    acc += x[(b_i * c + ic) * in_n + flat(&p, &win.input)]
                        * w[(oc * cg + ci) * k_n + kp];
                }
            }
        }
        *yv = acc;
    }
    y
}

/// Plain pooling: max, average (`count_include_pad` divides by the window size) or Lp.
fn pool_ref(
    x: &[f64],
    rows: usize,
    win: &Win,
    pb: &[usize],
    out: &[usize],
    kind: &str,
) -> Vec<f64> {
    let (in_n, out_n, k_n) = (
        win.input.iter().product::<usize>(),
        out.iter().product::<usize>(),
        win.kernel.iter().product::<usize>(),
    );
    let mut y = vec![0.0; rows * out_n];
    for (idx, yv) in y.iter_mut().enumerate() {
        let (r, o) = (idx / out_n, coords(idx % out_n, out));
        let taps: Vec<f64> = (0..k_n)
            .filter_map(|kp| win.tap(&o, &coords(kp, &win.kernel), pb))
            .map(|p| x[r * in_n + flat(&p, &win.input)])
            .collect();
        *yv = match kind {
            "MaxPool" => taps.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            "AveragePool" => taps.iter().sum::<f64>() / taps.len() as f64,
            "AveragePoolIncludePad" => taps.iter().sum::<f64>() / k_n as f64,
            _ => taps.iter().map(|v| v.abs().powi(3)).sum::<f64>().cbrt(),
        };
    }
    y
}

const AUTO_PADS: [&str; 4] = ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn conv_matches_the_reference(
        win in win(),
        auto_pad in prop::sample::select(AUTO_PADS.to_vec()),
        (n, groups, cg, mg) in (1usize..=3, 1usize..=2, 1usize..=3, 1usize..=2),
        seed: u64,
    ) {
        let (pb, pe) = win.resolved_pads(auto_pad);
        let Some(out) = win.out(&pb, &pe) else {
            return Err(TestCaseError::reject("window larger than the padded input"));
        };
        let (c, m) = (cg * groups, mg * groups);
        let xs = [&[n, c][..], &win.input].concat();
        let ws = [&[m, cg][..], &win.kernel].concat();
        let (x, w, b) = (random(&xs, seed), random(&ws, seed ^ 1), random(&[m], seed ^ 2));
        let mut attrs = win.attrs(auto_pad);
        attrs.push(int("group", groups as i64));
        let mdl = model(
            vec![node("Conv", &["x", "w", "b"], &["y"], attrs)],
            vec![],
            vec![value("x", 1, &dims(&xs)), value("w", 1, &dims(&ws)), value("b", 1, &[m as i64])],
            vec![value("y", 1, &[])],
            22,
        );
        let got = run(&mdl, &[("x", &x), ("w", &w), ("b", &b)], &[("x", 0)]).map_err(fail)?;
        let want = conv_ref(&values(&x), n, c, &values(&w), m, &values(&b), groups, &win, &pb, &out);
        check(&got[0], &[&[n, m][..], &out].concat(), &want, 1e-4)?;
    }

    #[test]
    fn conv_transpose_reaches_the_asked_output_shape(
        win in win(),
        (c, mg, groups) in (1usize..=2, 1usize..=2, 1usize..=2),
        (grow, seed) in (-2i64..=2, any::<u64>()),
    ) {
        let spatial = win.spatial();
        let natural: Vec<usize> = (0..spatial)
            .map(|i| (win.input[i] - 1) * win.strides[i] + win.span(i))
            .collect();
        let target: Vec<usize> = natural.iter().map(|&v| (v as i64 + grow).max(1) as usize).collect();
        let (c, m) = (c * groups, mg * groups);
        let xs = [&[2, c][..], &win.input].concat();
        let ws = [&[c, mg][..], &win.kernel].concat();
        let (x, w, b) = (random(&xs, seed), random(&ws, seed ^ 1), random(&[m], seed ^ 2));
        let mut attrs = win.attrs("NOTSET");
        attrs.retain(|a| a.name() != "pads");
        attrs.push(int("group", groups as i64));
        attrs.push(ints("output_shape", &dims(&target)));
        let mdl = model(
            vec![node("ConvTranspose", &["x", "w", "b"], &["y"], attrs)],
            vec![],
            vec![value("x", 1, &dims(&xs)), value("w", 1, &dims(&ws)), value("b", 1, &[m as i64])],
            vec![value("y", 1, &[])],
            22,
        );
        let got = run(&mdl, &[("x", &x), ("w", &w), ("b", &b)], &[]).map_err(fail)?;
        let begin: Vec<usize> = natural
            .iter()
            .zip(&target)
            .map(|(&nat, &t)| nat.saturating_sub(t) - nat.saturating_sub(t) / 2)
            .collect();
        let want = conv_transpose_ref(&values(&x), c, &values(&w), mg, groups, &values(&b), &win, &begin, &target);
        check(&got[0], &[&[2, m][..], &target].concat(), &want, 1e-4)?;
    }

    #[test]
    fn pools_match_the_reference(
        win in win(),
        kind in prop::sample::select(vec!["MaxPool", "AveragePool", "AveragePoolIncludePad", "LpPool"]),
        auto_pad in prop::sample::select(AUTO_PADS.to_vec()),
        seed: u64,
    ) {
        let (pb, pe) = win.resolved_pads(auto_pad);
        let Some(out) = win.out(&pb, &pe) else {
            return Err(TestCaseError::reject("window larger than the padded input"));
        };
        let in_padding = (0..win.spatial()).any(|i| pb[i].max(pe[i]) >= win.span(i));
        prop_assume!(!in_padding);
        let xs = [&[2, 3][..], &win.input].concat();
        let x = random(&xs, seed);
        let mut attrs = win.attrs(auto_pad);
        let op = match kind {
            "AveragePoolIncludePad" => {
                attrs.push(int("count_include_pad", 1));
                "AveragePool"
            }
            "LpPool" => {
                attrs.push(int("p", 3));
                "LpPool"
            }
            k => k,
        };
        let mdl = model(
            vec![node(op, &["x"], &["y"], attrs)],
            vec![],
            vec![value("x", 1, &dims(&xs))],
            vec![value("y", 1, &[])],
            22,
        );
        let got = run(&mdl, &[("x", &x)], &[("x", 0)]).map_err(fail)?;
        let want = pool_ref(&values(&x), 6, &win, &pb, &out, kind);
        check(&got[0], &[&[2, 3][..], &out].concat(), &want, 1e-4)?;
    }
}

/// Plain grouped transposed convolution: every input element scatters through every tap;
/// output position `o` of the asked extent collects what lands on `o + begin`.
#[allow(clippy::too_many_arguments)]
fn conv_transpose_ref(
    x: &[f64],
    c: usize,
    w: &[f64],
    mg: usize,
    groups: usize,
    b: &[f64],
    win: &Win,
    begin: &[usize],
    out: &[usize],
) -> Vec<f64> {
    let (cg, m) = (c / groups, mg * groups);
    let (in_n, out_n, k_n) = (
        win.input.iter().product::<usize>(),
        out.iter().product::<usize>(),
        win.kernel.iter().product::<usize>(),
    );
    let n = x.len() / (c * in_n);
    let mut y: Vec<f64> = (0..n * m * out_n).map(|i| b[i / out_n % m]).collect();
    for bi in 0..n {
        for ic in 0..c {
            let g = ic / cg;
            for ip in 0..in_n {
                let i = coords(ip, &win.input);
                for kp in 0..k_n {
                    let k = coords(kp, &win.kernel);
                    let o: Option<Vec<usize>> = (0..win.spatial())
                        .map(|d| {
                            let p = (i[d] * win.strides[d] + k[d] * win.dilations[d]) as i64
                                - begin[d] as i64;
                            (0..out[d] as i64).contains(&p).then_some(p as usize)
                        })
                        .collect();
                    let Some(o) = o else { continue };
                    for mi in 0..mg {
                        let oc = g * mg + mi;
                        y[(bi * m + oc) * out_n + flat(&o, out)] +=
                            x[(bi * c + ic) * in_n + ip] * w[(ic * mg + mi) * k_n + kp];
                    }
                }
            }
        }
    }
    y
}

#[test]
fn same_padding_needs_known_spatial_dims() {
    let x = random(&[1, 2, 5, 5], 3);
    let w = random(&[2, 2, 3, 3], 4);
    let mdl = model(
        vec![node(
            "Conv",
            &["x", "w"],
            &["y"],
            vec![string("auto_pad", "SAME_UPPER")],
        )],
        vec![],
        vec![value("x", 1, &[1, 2, 5, 5]), value("w", 1, &[2, 2, 3, 3])],
        vec![value("y", 1, &[])],
        22,
    );
    let err = run(&mdl, &[("x", &x), ("w", &w)], &[("x", 2)]).unwrap_err();
    assert!(
        err.contains("Conv_y") && err.contains("auto_pad SAME_*"),
        "{err}"
    );
    assert!(run(&mdl, &[("x", &x), ("w", &w)], &[("x", 0)]).is_ok());
}

#[test]
fn max_pool_indices_output_is_refused_by_name() {
    let x = random(&[1, 1, 4, 4], 5);
    let mdl = model(
        vec![node(
            "MaxPool",
            &["x"],
            &["y", "i"],
            vec![ints("kernel_shape", &[2, 2])],
        )],
        vec![],
        vec![value("x", 1, &[1, 1, 4, 4])],
        vec![value("y", 1, &[]), value("i", 7, &[])],
        22,
    );
    let err = run(&mdl, &[("x", &x)], &[]).unwrap_err();
    assert!(err.contains("Indices output"), "{err}");
}
