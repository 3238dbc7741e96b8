//! Adaptive pooling windows: output `i` of `out` covers inputs
//! `[floor(i·in/out), ceil((i+1)·in/out))`, for any sizes (windows overlap when `out`
//! does not divide `in`). Average and maximum are separable over axes, so a window becomes
//! a tap table: weights `1/len` (unused by max), padded to the widest window with weight-0
//! taps on the window's first index.

use super::taps::AxisTaps;

/// The window table of one axis.
pub fn taps(input: usize, output: usize) -> AxisTaps {
    let window = |i: usize| {
        let start = i * input / output;
        let end = ((i + 1) * input).div_ceil(output);
        start..end
    };
    let n = (0..output)
        .map(|i| window(i).len())
        .max()
        .unwrap_or(1)
        .max(1);
    let mut t = AxisTaps::with_taps(n, input, output);
    let mut idx = vec![0usize; n];
    let mut w = vec![0.0f32; n];
    for i in 0..output {
        let win = window(i);
        let inv = 1.0 / win.len().max(1) as f32;
        for k in 0..n {
            let inside = k < win.len();
            idx[k] = if inside { win.start + k } else { win.start };
            w[k] = if inside { inv } else { 0.0 };
        }
        t.push_taps(&idx, &w);
    }
    t.finish()
}
