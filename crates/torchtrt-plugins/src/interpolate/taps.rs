//! Per-axis resampling tables: for every output index a fixed number of (input index,
//! weight) taps, built once per launch and shared by every plane.

use std::ops::Range;

use super::poly::Periodic;
#[cfg(target_arch = "x86_64")]
use super::rows_x86::TwoTapRows;

/// The taps of one axis: output `o` reads `index[o·n + k]` with `weight[o·n + k]`,
/// `k < n`. Indices are already clamped into the input.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisTaps {
    /// Taps per output.
    pub n: usize,
    /// Input length.
    pub input: usize,
    /// Input indices, `n` per output.
    pub index: Vec<usize>,
    /// Weights, `n` per output.
    pub weight: Vec<f32>,
    /// True when the table maps every output to the same input index with weight 1.
    pub identity: bool,
    /// Per output, the smallest and one past the largest input index it reads.
    reach: Vec<(usize, usize)>,
    /// True when both ends of `reach` never decrease from one output to the next.
    monotone: bool,
    /// The table's periodic interior, if it has one.
    pub periodic: Option<Periodic>,
    /// The AVX-512 blocks of a two-tap table, when the CPU runs them (ahead of the
    /// periodic kernels, which they outrun).
    #[cfg(target_arch = "x86_64")]
    pub two_tap: Option<TwoTapRows>,
}

impl AxisTaps {
    /// An empty table of `n` taps per output over an input of length `input`.
    pub fn with_taps(n: usize, input: usize, outputs: usize) -> AxisTaps {
        AxisTaps {
            n,
            input,
            index: Vec::with_capacity(n * outputs),
            weight: Vec::with_capacity(n * outputs),
            identity: false,
            reach: Vec::new(),
            monotone: false,
            periodic: None,
            #[cfg(target_arch = "x86_64")]
            two_tap: None,
        }
    }

    /// The identity table of an axis of length `len`.
    pub fn identity(len: usize) -> AxisTaps {
        AxisTaps {
            n: 1,
            input: len,
            index: (0..len).collect(),
            weight: vec![1.0; len],
            identity: true,
            reach: (0..len).map(|i| (i, i + 1)).collect(),
            monotone: true,
            periodic: None,
            #[cfg(target_arch = "x86_64")]
            two_tap: None,
        }
    }

    /// Number of outputs.
    pub fn outputs(&self) -> usize {
        self.index.len().checked_div(self.n).unwrap_or(0)
    }

    /// Appends the taps of one output: weights `w` for the consecutive input positions
    /// `base, base + 1, …` (which may lie outside the input). With `exclude`, positions
    /// outside the input get weight 0 and the others are rescaled to sum to 1 (unless all
    /// are 0); then positions are clamped to the input (edge replication).
    pub fn push_window(&mut self, base: i64, w: &mut [f64], exclude: bool) {
        let last = self.input as i64 - 1;
        if exclude {
            for (k, wk) in w.iter_mut().enumerate() {
                let p = base + k as i64;
                if p < 0 || p > last {
                    *wk = 0.0;
                }
            }
            let sum: f64 = w.iter().sum();
            if sum != 0.0 {
                w.iter_mut().for_each(|wk| *wk /= sum);
            }
        }
        for (k, &wk) in w.iter().enumerate() {
            self.index
                .push((base + k as i64).clamp(0, last.max(0)) as usize);
            self.weight.push(wk as f32);
        }
    }

    /// Appends one output's taps as they are.
    pub fn push_taps(&mut self, index: &[usize], weight: &[f32]) {
        self.index.extend_from_slice(index);
        self.weight.extend_from_slice(weight);
    }

    /// Marks the table as the identity when it is one, records what each output reads, and
    /// finds its periodic interior (whose weights are then made exactly periodic, so every
    /// kernel computes the same sums).
    pub fn finish(mut self) -> AxisTaps {
        let n = self.n;
        self.reach = self
            .index
            .chunks_exact(n)
            .map(|idx| {
                let lo = idx.iter().copied().min().unwrap_or(0);
                let hi = idx.iter().copied().max().map_or(0, |m| m + 1);
                (lo, hi)
            })
            .collect();
        self.monotone = self
            .reach
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
        self.identity = self.outputs() == self.input
            && self
                .index
                .chunks_exact(n)
                .zip(self.weight.chunks_exact(n))
                .enumerate()
                .all(|(o, (idx, w))| {
                    idx.iter()
                        .zip(w)
                        .all(|(&i, &wk)| wk == 0.0 || (i == o && wk == 1.0))
                        && w.contains(&1.0)
                });
        if !self.identity {
            self.periodic = Periodic::detect(&self.index, &self.weight, n);
        }
        if let Some(p) = &self.periodic {
            for (i, o) in p.outputs().enumerate() {
                let ph = i % p.p;
                self.weight[o * n..(o + 1) * n].copy_from_slice(&p.weight[ph * n..(ph + 1) * n]);
            }
        }
        #[cfg(target_arch = "x86_64")]
        if n == 2 && !self.identity {
            self.two_tap = TwoTapRows::new(&self.index, &self.weight);
        }
        self
    }

    /// The input indices `[lo, hi)` read by the outputs in `outputs` (non-empty).
    pub fn input_span(&self, outputs: Range<usize>) -> Range<usize> {
        let reach = &self.reach[outputs];
        let (lo, hi) = match (self.monotone, reach.first(), reach.last()) {
            (true, Some(first), Some(last)) => (first.0, last.1),
            _ => reach
                .iter()
                .fold((usize::MAX, 0), |(lo, hi), r| (lo.min(r.0), hi.max(r.1))),
        };
        lo.min(hi)..hi
    }
}
