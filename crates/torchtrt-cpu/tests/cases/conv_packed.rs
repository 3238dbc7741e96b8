//! f32 convolutions on the packed (AVX-512) products, or their fallback elsewhere: output
//! channels, positions and taps that are not multiples of the register tile (8 × 48) or
//! of the inner block (128), strides, padding, dilations and groups, with or without bias,
//! every fused activation, a residual input, on one, two and three threads; and layers of
//! 64 output channels or more on small images, which take the channel-vectorised product
//! (up to 64 output positions) or not (more); layers on wide rows, whose padded image the
//! product reads in place at stride 1 (kernels up to 7 wide, dilations, uneven padding,
//! more than one block of inner steps); large dilations on small images, whose taps that
//! read only padding are cut away; and dilated layers whose output plane is cut into
//! rectangles of the taps they read.

use std::sync::OnceLock;

use proptest::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{ActivationKind, Convolution};
use torchtrt_core::plugin_api::DType;
use torchtrt_cpu::CpuBackend;

use crate::reference::convolution::{ConvParams, conv};
use crate::support::{Rng, Tol, check, nd, pooled, random, run_on};

/// A backend with one thread and one with two.
fn threads(n: usize) -> &'static CpuBackend {
    static ONE: OnceLock<CpuBackend> = OnceLock::new();
    static TWO: OnceLock<CpuBackend> = OnceLock::new();
    let cell = if n == 1 { &ONE } else { &TWO };
    cell.get_or_init(|| CpuBackend::with_threads(n).expect("thread pool"))
}

/// The kind of random layer [`case`] makes.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Any window of up to 3 taps, stride and dilation up to 2.
    Any,
    /// 1×1, stride 1, no padding: the input read in place.
    Pointwise,
    /// One group of 64 to 140 output channels on images of at most 10×10.
    Wide,
    /// Rows of 24 to 70 with windows up to 7 wide, most of stride 1: the padded image read
    /// in place.
    Grid,
    /// Dilations of 3 to 8 with as much padding on images of at most 9×9, so that taps
    /// read only padding for every output (the layer is cut to the others).
    Dilated,
    /// One group, dilations of 2 to 6 with up to the window's span of padding on images of
    /// up to 30×30: taps read padding for some outputs and the input for others (the plane
    /// is cut into rectangles by the taps they read).
    Banded,
}

/// A random 2-D layer of `kind`: input shape, weight shape and parameters.
fn case(rng: &mut Rng, kind: Kind) -> (Vec<usize>, Vec<usize>, ConvParams) {
    let mut r = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
    let (pointwise, wide, grid, dilated, banded) = (
        matches!(kind, Kind::Pointwise),
        matches!(kind, Kind::Wide),
        matches!(kind, Kind::Grid),
        matches!(kind, Kind::Dilated),
        matches!(kind, Kind::Banded),
    );
    let groups = if !wide && !banded && r(0, 3) == 0 {
        r(2, 3)
    } else {
        1
    };
    let (cg, mg) = (r(1, 40), if wide { r(64, 140) } else { r(1, 27) });
    let side = if wide { 10 } else { 17 };
    let mut x = vec![r(1, 2), cg * groups];
    let mut w = vec![mg * groups, cg];
    let mut p = ConvParams {
        strides: vec![],
        dilations: vec![],
        pads_begin: vec![],
        pads_end: vec![],
        groups,
    };
    for dim in 0..2 {
        let (k, d, s) = if pointwise {
            (1, 1, 1)
        } else if grid {
            (r(1, 7), r(1, 2), if r(0, 4) == 0 { 2 } else { 1 })
        } else if dilated {
            (r(2, 3), r(3, 8), r(1, 2))
        } else if banded {
            (r(2, 3), r(2, 6), if r(0, 3) == 0 { 2 } else { 1 })
        } else {
            (r(1, 3), r(1, 2), r(1, 2))
        };
        let (pb, pe) = if pointwise {
            (0, 0)
        } else if dilated {
            let most = (d * (k - 1)) as i64;
            (r(most / 2, most), r(most / 2, most))
        } else if banded {
            let most = (d * (k - 1)) as i64;
            (r(0, most), r(0, most))
        } else {
            (r(0, 2), r(0, 3))
        };
        let span = d * (k - 1) + 1;
        let min_in = span.saturating_sub(pb + pe).max(1);
        let (lo, hi) = match (grid, dilated, dim) {
            (true, _, 0) => (min_in, 9),
            (true, _, _) => (min_in.max(24), 70),
            (_, true, _) => (min_in, 9),
            _ if banded => (min_in.max(4), 30),
            _ => (min_in, side as usize),
        };
        x.push(r(lo as i64, hi.max(lo) as i64));
        w.push(k);
        p.strides.push(s);
        p.dilations.push(d);
        p.pads_begin.push(pb);
        p.pads_end.push(pe);
    }
    (x, w, p)
}

/// The activation `which` (0: none) and its function.
fn activation(which: usize) -> (Option<ActivationKind>, fn(f64) -> f64) {
    match which {
        0 => (None, |v| v),
        1 => (Some(ActivationKind::Relu), |v| v.max(0.0)),
        2 => (Some(ActivationKind::LeakyRelu { alpha: 0.25 }), |v| {
            if v < 0.0 { v * 0.25 } else { v }
        }),
        3 => (
            Some(ActivationKind::Clip {
                min: -0.5,
                max: 0.75,
            }),
            |v| v.clamp(-0.5, 0.75),
        ),
        _ => (Some(ActivationKind::Silu), |v| v / (1.0 + (-v).exp())),
    }
}

/// One random layer against the reference (see [`case`]).
fn matches(
    seed: u64,
    kind: Kind,
    (bias, residual): (bool, bool),
    which: usize,
    pool: usize,
) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    let (xs, ws, p) = case(&mut rng, kind);
    let x = random(DType::F32, &xs, &mut rng, -1.0, 1.0);
    let w = random(DType::F32, &ws, &mut rng, -1.0, 1.0);
    let b = random(DType::F32, &[ws[0]], &mut rng, -1.0, 1.0);
    let mut want = conv(&nd(&x), &nd(&w), bias.then(|| nd(&b)).as_ref(), &p);
    let r = random(DType::F32, &want.shape, &mut rng, -1.0, 1.0);
    let (kind, f) = activation(which);
    let rv = r.to_f64_vec();
    for (i, v) in want.data.iter_mut().enumerate() {
        *v = f(*v + if residual { rv[i] } else { 0.0 });
    }
    let layer = Convolution {
        strides: p.strides.iter().map(|&v| v as i64).collect(),
        pads_begin: p.pads_begin.iter().map(|&v| v as i64).collect(),
        pads_end: p.pads_end.iter().map(|&v| v as i64).collect(),
        dilations: p.dilations.iter().map(|&v| v as i64).collect(),
        groups: p.groups as i64,
        activation: kind,
        channels_last: false,
    };
    let no_bias = Tensor::zeros(DType::F32, &[ws[0]]);
    let inputs = match (bias, residual) {
        (true, true) => vec![&x, &w, &b, &r],
        (false, true) => vec![&x, &w, &no_bias, &r],
        (true, false) => vec![&x, &w, &b],
        (false, false) => vec![&x, &w],
    };
    let backend: &dyn torchtrt_core::Backend = if pool == 3 { pooled() } else { threads(pool) };
    let got = run_on(backend, layer, &inputs).map_err(TestCaseError::fail)?;
    let taps: usize = ws[1..].iter().product();
    check(
        &got[0],
        &want,
        Tol::of(DType::F32).scaled((taps as f64).sqrt() * 2.0),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn matches_reference(pointwise: bool, bias: bool, residual: bool, which in 0usize..5,
                         pool in 1usize..=3, seed: u64) {
        let kind = if pointwise { Kind::Pointwise } else { Kind::Any };
        matches(seed, kind, (bias, residual), which, pool)?;
    }

    #[test]
    fn wide_layers_on_small_images_match_reference(pointwise: bool, bias: bool, residual: bool,
                                                   which in 0usize..5, pool in 1usize..=3,
                                                   seed: u64) {
        let kind = if pointwise { Kind::Pointwise } else { Kind::Wide };
        matches(seed, kind, (bias, residual), which, pool)?;
    }

    #[test]
    fn large_dilations_on_small_images_match_reference(bias: bool, residual: bool,
                                                       which in 0usize..5, pool in 1usize..=3,
                                                       seed: u64) {
        matches(seed, Kind::Dilated, (bias, residual), which, pool)?;
    }

    #[test]
    fn dilated_layers_in_bands_of_taps_match_reference(bias: bool, residual: bool,
                                                       which in 0usize..5, pool in 1usize..=3,
                                                       seed: u64) {
        matches(seed, Kind::Banded, (bias, residual), which, pool)?;
    }

    #[test]
    fn layers_on_wide_rows_match_reference(bias: bool, residual: bool,
                                                      which in 0usize..5, pool in 1usize..=3,
                                                      seed: u64) {
        matches(seed, Kind::Grid, (bias, residual), which, pool)?;
    }
}

/// Images wider than one register tile with few channels (several im2col lines per tile,
/// Winograd-sized planes), on one and two threads: every output against the reference.
#[test]
fn large_planes_with_few_channels_match_reference() {
    let shapes: [(&[usize], &[usize]); 3] = [
        (&[1, 4, 64, 64], &[8, 4, 3, 3]),
        (&[2, 3, 57, 50], &[5, 3, 3, 3]),
        (&[1, 16, 40, 72], &[24, 16, 1, 1]),
    ];
    for (i, (xs, ws)) in shapes.into_iter().enumerate() {
        let mut rng = Rng::new(40 + i as u64);
        let x = random(DType::F32, xs, &mut rng, -1.0, 1.0);
        let w = random(DType::F32, ws, &mut rng, -1.0, 1.0);
        let b = random(DType::F32, &[ws[0]], &mut rng, -1.0, 1.0);
        let pad = ws[2] / 2;
        let p = ConvParams {
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads_begin: vec![pad, pad],
            pads_end: vec![pad, pad],
            groups: 1,
        };
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &p);
        want.data.iter_mut().for_each(|v| *v = v.max(0.0));
        let layer = Convolution {
            strides: vec![1, 1],
            pads_begin: vec![pad as i64; 2],
            pads_end: vec![pad as i64; 2],
            dilations: vec![1, 1],
            groups: 1,
            activation: Some(ActivationKind::Relu),
            channels_last: false,
        };
        for n in [1, 2] {
            let got = run_on(threads(n), layer.clone(), &[&x, &w, &b]).unwrap();
            let taps: usize = ws[1..].iter().product();
            check(
                &got[0],
                &want,
                Tol::of(DType::F32).scaled((taps as f64).sqrt() * 2.0),
            )
            .unwrap_or_else(|e| panic!("x{xs:?} w{ws:?} on {n} threads: {e}"));
        }
    }
}

/// Unfolded layers whose weights (over 1 MiB a group) do not stay in L2, which take each
/// image as one tile of columns: strided 3×3 and 1×1 layers, two groups, asymmetric
/// padding, output channels that fill no whole panel, batches of one to three (one image
/// splits its rows over the threads and shares its unfolded columns), with bias, residual
/// and activation, on one, two and three threads.
#[test]
fn heavy_weights_take_whole_images_match_reference() {
    type Shapes = (&'static [usize], &'static [usize], [usize; 4], usize);
    let shapes: [Shapes; 4] = [
        (&[2, 128, 15, 15], &[290, 128, 3, 3], [1, 1, 1, 1], 1),
        (&[1, 128, 13, 16], &[290, 128, 3, 3], [1, 0, 1, 2], 1),
        (&[1, 512, 8, 9], &[300, 256, 3, 3], [1, 0, 1, 2], 2),
        (&[3, 600, 9, 9], &[500, 600, 1, 1], [0; 4], 1),
    ];
    for (i, (xs, ws, pads, groups)) in shapes.into_iter().enumerate() {
        let mut rng = Rng::new(60 + i as u64);
        let x = random(DType::F32, xs, &mut rng, -1.0, 1.0);
        let w = random(DType::F32, ws, &mut rng, -1.0, 1.0);
        let b = random(DType::F32, &[ws[0]], &mut rng, -1.0, 1.0);
        let p = ConvParams {
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads_begin: pads[..2].to_vec(),
            pads_end: pads[2..].to_vec(),
            groups,
        };
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &p);
        let r = random(DType::F32, &want.shape, &mut rng, -1.0, 1.0);
        let (kind, f) = activation(i % 5);
        for (v, r) in want.data.iter_mut().zip(r.to_f64_vec()) {
            *v = f(*v + r);
        }
        let layer = Convolution {
            strides: vec![2, 2],
            pads_begin: pads[..2].iter().map(|&v| v as i64).collect(),
            pads_end: pads[2..].iter().map(|&v| v as i64).collect(),
            dilations: vec![1, 1],
            groups: groups as i64,
            activation: kind,
            channels_last: false,
        };
        for n in 1..=3 {
            let backend: &dyn torchtrt_core::Backend = if n == 3 { pooled() } else { threads(n) };
            let got = run_on(backend, layer.clone(), &[&x, &w, &b, &r]).unwrap();
            let taps: usize = ws[1..].iter().product();
            check(
                &got[0],
                &want,
                Tol::of(DType::F32).scaled((taps as f64).sqrt() * 2.0),
            )
            .unwrap_or_else(|e| panic!("x{xs:?} w{ws:?} on pool {n}: {e}"));
        }
    }
}
