//! Attention (blocked, online softmax) and RotaryEmbedding against their definitions, on
//! random shapes: grouped heads, both layouts, masks of both kinds and broadcast shapes,
//! past keys, valid-key counts, causal masking, windows and soft caps; key counts that
//! span several blocks.

use proptest::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{Attention, RotaryEmbedding, ScoreStage};
use torchtrt_core::plugin_api::DType;

use crate::reference::Nd;
use crate::reference::attention::{Keys, Rules, attention, rotary, scores};
use crate::support::{Rng, Tol, check, float_dtype, global, nd, random, run, run_on};

/// `[batch, heads, seq, head]` as `[batch, seq, heads · head]`.
fn heads_last(t: &Nd) -> Nd {
    let (b, h, s, d) = (t.shape[0], t.shape[1], t.shape[2], t.shape[3]);
    Nd::from_fn(vec![b, s, h * d], |i| {
        t.at(&[i[0], i[2] / d, i[1], i[2] % d])
    })
}

fn concat_keys(past: &Nd, new: &Nd) -> Nd {
    let p = past.shape[2];
    let mut shape = new.shape.clone();
    shape[2] += p;
    Nd::from_fn(shape, |i| {
        if i[2] < p {
            past.at(i)
        } else {
            new.at(&[i[0], i[1], i[2] - p, i[3]])
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn attention_matches_definition(dtype in float_dtype(), rank3: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let (b, hk, group, sq, skv, d, dv) = (n(1, 2), n(1, 2), n(1, 3), n(1, 200), n(1, 300), n(1, 20), n(1, 20));
        let hq = hk * group;
        let mut rng = Rng::new(seed ^ 7);
        let q4 = random(dtype, &[b, hq, sq, d], &mut rng, -1.5, 1.5);
        let k4 = random(dtype, &[b, hk, skv, d], &mut rng, -1.5, 1.5);
        let v4 = random(dtype, &[b, hk, skv, dv], &mut rng, -2.0, 2.0);
        let mask_kind = rng.int(0, 2);
        let past = !rank3 && rng.coin();
        let nonpad = !past && rng.coin();
        let p = if past { rng.int(1, 20) as usize } else { 0 };
        let total = p + skv;
        let layer = Attention {
            q_heads: if rank3 { hq } else { 0 },
            kv_heads: if rank3 { hk } else { 0 },
            scale: rng.coin().then(|| rng.uniform(0.05, 0.5) as f32),
            causal: rng.coin(),
            softcap: if rng.coin() { rng.uniform(1.0, 5.0) as f32 } else { 0.0 },
            mask: mask_kind > 0,
            past,
            nonpad,
            left_window: if rng.coin() { rng.int(0, 30) } else { -1 },
            right_window: if rng.coin() { rng.int(0, 30) } else { -1 },
            scores: [None, Some(ScoreStage::Product), Some(ScoreStage::Biased), Some(ScoreStage::Weights)][rng.int(0, 3) as usize],
        };
        let mlen = total - rng.int(0, total as i64 / 3) as usize;
        let mshape = if rng.coin() { vec![sq, mlen] } else { vec![b, 1, sq, mlen] };
        let mut mask = match mask_kind {
            1 => random(DType::Bool, &mshape, &mut rng, 0.0, 1.0),
            _ => random(dtype, &mshape, &mut rng, -2.0, 2.0),
        };
        if rng.coin() {
            // A padded tail: the last keys masked for every query (float masks at −∞).
            let tail = rng.int(0, mlen as i64) as usize;
            let mut m = nd(&mask);
            for row in m.data.chunks_exact_mut(mlen) {
                row[mlen - tail..].fill(if mask_kind == 1 { 0.0 } else { f64::NEG_INFINITY });
            }
            mask = crate::support::from_f64(mask.dtype(), &mshape, &m.data);
        }
        if rng.coin() {
            // A padding mask expanded over the queries: every query's row the same.
            let row = mlen * mask.dtype().size();
            for plane in mask.bytes_mut().chunks_exact_mut(sq * row) {
                let (first, rest) = plane.split_at_mut(row);
                for r in rest.chunks_exact_mut(row) {
                    r.copy_from_slice(first);
                }
            }
        }
        let pk = random(dtype, &[b, hk, p, d], &mut rng, -1.5, 1.5);
        let pv = random(dtype, &[b, hk, p, dv], &mut rng, -2.0, 2.0);
        let valid: Vec<i64> = (0..b).map(|_| rng.int(0, total as i64)).collect();
        let counts = Tensor::from_vec(&[b], valid.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (q, k, v) = if rank3 {
            let f = |t: &Tensor| crate::support::from_f64(dtype, &heads_last(&nd(t)).shape, &heads_last(&nd(t)).data);
            (f(&q4), f(&k4), f(&v4))
        } else {
            (q4.clone(), k4.clone(), v4.clone())
        };
        let mut inputs = vec![&q, &k, &v];
        if layer.mask {
            inputs.push(&mask);
        }
        if past {
            inputs.extend([&pk, &pv]);
        }
        if nonpad {
            inputs.push(&counts);
        }
        let mut outs = run_on(global(), layer.clone(), &inputs).map_err(TestCaseError::fail)?;
        prop_assert_eq!(outs.len(), 1 + usize::from(layer.scores.is_some()));
        let got = outs.remove(0);
        let (keys, values) = if past {
            (concat_keys(&nd(&pk), &nd(&k4)), concat_keys(&nd(&pv), &nd(&v4)))
        } else {
            (nd(&k4), nd(&v4))
        };
        let rules = Rules {
            scale: f64::from(layer.scale.unwrap_or(1.0 / (d as f32).sqrt())),
            softcap: f64::from(layer.softcap),
            causal: layer.causal,
            window: (layer.left_window, layer.right_window),
        };
        let m = nd(&mask);
        let bias = |bi: usize, _h: usize, i: usize, j: usize| {
            if !layer.mask {
                return 0.0;
            }
            if j >= mlen {
                return f64::NEG_INFINITY;
            }
            let at: Vec<usize> = if m.shape.len() == 2 { vec![i, j] } else { vec![bi, 0, i, j] };
            let x = m.at(&at);
            if mask_kind == 1 { if x != 0.0 { 0.0 } else { f64::NEG_INFINITY } } else { x }
        };
        let offset = |bi: usize| if nonpad { valid[bi] - sq as i64 } else { p as i64 };
        let limit = |bi: usize| if nonpad { valid[bi] } else { total as i64 };
        let rows = Keys { bias: &bias, offset: &offset, valid: &limit };
        let want = attention(&nd(&q4), &keys, &values, &rules, &rows);
        let want = if rank3 { heads_last(&want) } else { want };
        check(&got, &want, Tol::of(dtype).scaled(4.0))?;
        if let Some(stage) = layer.scores {
            let stage = match stage { ScoreStage::Product => 0, ScoreStage::Biased => 1, ScoreStage::Weights => 2 };
            let want = scores(&nd(&q4), &keys, &rules, &rows, stage);
            check(&outs[0], &want, Tol::of(dtype).scaled(8.0))?;
        }
    }

    #[test]
    fn rotary_matches_definition(dtype in float_dtype(), rank3: bool, interleaved: bool, with_positions: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let (b, h, s, half) = (n(1, 3), n(1, 4), n(1, 9), n(1, 8));
        let head = 2 * half + 2 * n(0, 3);
        let rotary_dim = if rng.coin() { 0 } else { 2 * half };
        let rot = if rotary_dim == 0 { head } else { rotary_dim };
        let cache_rows = if with_positions { rng.int(1, 20) as usize } else { b * s };
        let x4 = random(dtype, &[b, h, s, head], &mut rng, -2.0, 2.0);
        let cshape = if with_positions { vec![cache_rows, rot / 2] } else { vec![b, s, rot / 2] };
        let cos = random(dtype, &cshape, &mut rng, -1.0, 1.0);
        let sin = random(dtype, &cshape, &mut rng, -1.0, 1.0);
        let pos: Vec<i64> = (0..b * s).map(|_| rng.int(0, cache_rows as i64 - 1)).collect();
        let pt = Tensor::from_vec(&[b, s], pos.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let layer = RotaryEmbedding { interleaved, num_heads: if rank3 { h } else { 0 }, rotary_dim };
        let x = if rank3 {
            let t = heads_last(&nd(&x4));
            crate::support::from_f64(dtype, &t.shape, &t.data)
        } else {
            x4.clone()
        };
        let mut inputs = vec![&x, &cos, &sin];
        if with_positions {
            inputs.push(&pt);
        }
        let got = run(layer, &inputs)?;
        let row = |bi: usize, si: usize| if with_positions { pos[bi * s + si] as usize } else { bi * s + si };
        let want = rotary(&nd(&x4), &nd(&cos).data, &nd(&sin).data, rot, interleaved, &row);
        let want = if rank3 { heads_last(&want) } else { want };
        check(&got, &want, Tol::of(dtype).scaled(4.0))?;
    }
}
