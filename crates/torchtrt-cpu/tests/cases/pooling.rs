//! Pooling: max and average, 1-D to 3-D, strides, dilations, padding, ceil mode,
//! count_include_pad.

use std::sync::OnceLock;

use proptest::prelude::*;
use torchtrt_core::Backend;
use torchtrt_core::layers::{PoolKind, Pooling};
use torchtrt_core::plugin_api::DType;
use torchtrt_cpu::CpuBackend;

use crate::reference::pooling::{PoolParams, pool};
use crate::support::{Rng, Tol, check, float_dtype, nd, pooled, random, run, run_on};

fn cases() -> impl Strategy<Value = (Vec<usize>, PoolParams)> {
    (1usize..=3, any::<u64>()).prop_map(|(spatial, seed)| {
        let mut rng = Rng::new(seed);
        let mut p = PoolParams {
            kernel: vec![],
            strides: vec![],
            dilations: vec![],
            pads_begin: vec![],
            pads_end: vec![],
            ceil_mode: rng.coin(),
            count_include_pad: rng.coin(),
            max: rng.coin(),
            lp: None,
        };
        if !p.max && rng.int(0, 2) == 0 {
            p.lp = Some(rng.int(1, 3));
        }
        let mut shape = vec![rng.int(1, 2) as usize, rng.int(1, 3) as usize];
        let max_in = [0, 12, 8, 6][spatial];
        for _ in 0..spatial {
            let k = rng.int(1, 3) as usize;
            let d = rng.int(1, 2) as usize;
            let pb = rng.int(0, (k as i64 - 1).min(1)) as usize;
            let pe = rng.int(0, (k as i64 - 1).min(1)) as usize;
            let span = d * (k - 1) + 1;
            let min_in = span.saturating_sub(pb + pe).max(1);
            shape.push(rng.int(min_in as i64, max_in.max(min_in) as i64) as usize);
            p.kernel.push(k);
            p.strides.push(rng.int(1, 3) as usize);
            p.dilations.push(d);
            p.pads_begin.push(pb);
            p.pads_end.push(pe);
        }
        (shape, p)
    })
}

fn layer(p: &PoolParams) -> Pooling {
    let v = |x: &[usize]| x.iter().map(|&v| v as i64).collect();
    Pooling {
        kind: match (p.max, p.lp) {
            (true, _) => PoolKind::Max,
            (false, Some(p)) => PoolKind::Lp { p },
            (false, None) => PoolKind::Average,
        },
        kernel: v(&p.kernel),
        strides: v(&p.strides),
        pads_begin: v(&p.pads_begin),
        pads_end: v(&p.pads_end),
        dilations: v(&p.dilations),
        ceil_mode: p.ceil_mode,
        count_include_pad: p.count_include_pad,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_reference((shape, p) in cases(), dtype in float_dtype(), seed: u64) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -2.0, 2.0);
        let got = run(layer(&p), &[&x])?;
        check(&got, &pool(&nd(&x), &p), Tol::of(dtype).scaled(2.0))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Inputs big enough to split into parallel tasks: strided max pools (squeezenet's ceil
    /// mode on odd sizes, 1-D), padded average pools on wide and on small planes (7×7, where
    /// most windows touch padding), a window spanning a whole small plane, and LRN's window
    /// over a channel axis made spatial ([N, 1, C, H, W]).
    #[test]
    fn larger_inputs(c in 8usize..24, hw in 20usize..40, dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let odd = hw | 1;
        let cases = [
            (vec![2, c, hw, hw + 1], vec![3, 3], vec![2, 2], vec![0, 0], true, false, false),
            (vec![1, c, odd, odd + 2], vec![3, 3], vec![2, 2], vec![0, 0], true, false, true),
            (vec![1, c, hw * 3], vec![3], vec![2], vec![1], true, false, false),
            (vec![1, c, hw + 2, hw], vec![3, 3], vec![1, 1], vec![1, 1], false, false, false),
            (vec![1, c * 8, 7, 7], vec![3, 3], vec![1, 1], vec![1, 1], false, true, false),
            (vec![1, c * 8, 7, 7], vec![3, 3], vec![1, 1], vec![1, 1], true, false, false),
            (vec![2, c * 8, 7, 7], vec![7, 7], vec![1, 1], vec![0, 0], false, false, false),
            (vec![1, 1, c, hw, hw], vec![5, 1, 1], vec![1, 1, 1], vec![2, 0, 0], false, true, false),
        ];
        for (shape, kernel, strides, pads, max, count_include_pad, ceil_mode) in cases {
            let p = PoolParams {
                dilations: vec![1; kernel.len()],
                kernel,
                strides,
                pads_begin: pads.clone(),
                pads_end: pads,
                ceil_mode,
                count_include_pad,
                max,
                lp: None,
            };
            let x = random(dtype, &shape, &mut rng, -2.0, 2.0);
            let got = run(layer(&p), &[&x])?;
            check(&got, &pool(&nd(&x), &p), Tol::of(dtype).scaled(2.0))?;
        }
    }
}

/// A backend with one thread and one with two.
fn threads(n: usize) -> &'static CpuBackend {
    static ONE: OnceLock<CpuBackend> = OnceLock::new();
    static TWO: OnceLock<CpuBackend> = OnceLock::new();
    let cell = if n == 1 { &ONE } else { &TWO };
    cell.get_or_init(|| CpuBackend::with_threads(n).expect("thread pool"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// f32 3×3 max pools (column stride 2 takes the dedicated row-then-column path, column
    /// stride 1 the general plane path): strides 1 and 2 on each axis,
    /// odd and even sizes that are not multiples of the vector width, padding 0 or 1 on each
    /// side, ceil mode on and off, on one, two and three threads, with inputs that are all
    /// negative half the time (padding must not put 0 into a max).
    #[test]
    fn max_3x3_f32(
        n in 1usize..=2,
        c in 1usize..=24,
        h in 1usize..=70,
        w in 1usize..=70,
        strides in (1usize..=2, 1usize..=2),
        pads in (0usize..=1, 0usize..=1, 0usize..=1, 0usize..=1),
        ceil_mode: bool,
        negative: bool,
        pool_threads in 1usize..=3,
        seed: u64,
    ) {
        let (pt, pl, pb, pr) = pads;
        let h = h.max(3usize.saturating_sub(pt + pb));
        let w = w.max(3usize.saturating_sub(pl + pr));
        let p = PoolParams {
            kernel: vec![3, 3],
            strides: vec![strides.0, strides.1],
            dilations: vec![1, 1],
            pads_begin: vec![pt, pl],
            pads_end: vec![pb, pr],
            ceil_mode,
            count_include_pad: false,
            max: true,
            lp: None,
        };
        let hi = if negative { -0.5 } else { 2.0 };
        let x = random(DType::F32, &[n, c, h, w], &mut Rng::new(seed), -3.0, hi);
        let backend: &dyn Backend = if pool_threads == 3 { pooled() } else { threads(pool_threads) };
        let mut got = run_on(backend, layer(&p), &[&x]).map_err(TestCaseError::fail)?;
        let got = got.pop().ok_or_else(|| TestCaseError::fail("no output"))?;
        check(&got, &pool(&nd(&x), &p), Tol::of(DType::F32))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Wide 2-D windows (up to 9 taps, strides up to 7, dilation 1 or 2, padding or none,
    /// ceil mode on and off) as adaptive pooling's ONNX stand-ins use (k(6,8) s(4,6) on
    /// 30×45), on rows from 1 to 78 wide: windows that lie inside the input are read in
    /// place, the others from a padded copy; max pools reduce columns by doubling
    /// power-of-two runs, average pools tap by tap.
    #[test]
    fn wide_windows(
        kernel in (1usize..=9, 1usize..=9),
        strides in (1usize..=7, 1usize..=7),
        dilations in (1usize..=2, 1usize..=2),
        padded: bool,
        ceil_mode: bool,
        max: bool,
        extra in (0usize..=12, 0usize..=60),
        dtype in float_dtype(),
        seed: u64,
    ) {
        let (kh, kw) = kernel;
        let pad = |k: usize| if padded { (k - 1) / 2 } else { 0 };
        let h = dilations.0 * (kh - 1) + 1 + extra.0;
        let w = dilations.1 * (kw - 1) + 1 + extra.1;
        let p = PoolParams {
            kernel: vec![kh, kw],
            strides: vec![strides.0, strides.1],
            dilations: vec![dilations.0, dilations.1],
            pads_begin: vec![pad(kh), pad(kw)],
            pads_end: vec![pad(kh), 0],
            ceil_mode,
            count_include_pad: false,
            max,
            lp: None,
        };
        let x = random(dtype, &[1, 5, h, w], &mut Rng::new(seed), -3.0, 2.0);
        let got = run(layer(&p), &[&x])?;
        check(&got, &pool(&nd(&x), &p), Tol::of(dtype).scaled(2.0))?;
    }
}
