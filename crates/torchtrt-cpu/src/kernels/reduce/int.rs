//! Reductions of integer tensors: accumulated in i64 (wrapping like the element type), `L2`
//! and `LogSumExp` in f64 then truncated, `Mean` truncated toward zero.

use torchtrt_core::layers::ReduceOp;

use super::plan::ReducePlan;
use crate::parallel::for_each_row;
use crate::scalar::Int;

/// Reduces `x` into `out` by `plan`.
pub(super) fn reduce_int<T: Int>(plan: &ReducePlan, op: ReduceOp, x: &[T], out: &mut [T]) {
    let (inner, count, run) = (plan.inner, plan.count(), plan.run);
    for_each_row(
        out,
        inner,
        count * inner,
        Vec::new,
        |acc: &mut Vec<i64>, o, dst| {
            let base = plan.outer.get(o);
            let rows = plan
                .starts
                .range(0..plan.starts.len())
                .flat_map(|s| (0..run).map(move |k| &x[base + s + k..base + s + k + inner]));
            let n = dst.len();
            match op {
                ReduceOp::Sum | ReduceOp::Mean => accumulate(acc, n, 0, rows, i64::wrapping_add),
                ReduceOp::Max => accumulate(acc, n, i64::MIN, rows, i64::max),
                ReduceOp::Min => accumulate(acc, n, i64::MAX, rows, i64::min),
                ReduceOp::Prod => accumulate(acc, n, 1, rows, i64::wrapping_mul),
                ReduceOp::L1 => {
                    accumulate(acc, n, 0, rows, |a, v| a.wrapping_add(v.wrapping_abs()))
                }
                ReduceOp::L2 | ReduceOp::SumSquare => {
                    accumulate(acc, n, 0, rows, |a, v| a.wrapping_add(v.wrapping_mul(v)))
                }
                ReduceOp::LogSumExp => {
                    accumulate(acc, n, i64::MIN, rows.clone(), i64::max);
                    for (j, (d, &m)) in dst.iter_mut().zip(acc.iter()).enumerate() {
                        let m = m as f64;
                        let s: f64 = rows
                            .clone()
                            .map(|row| (row[j].to_i64() as f64 - m).exp())
                            .sum();
                        *d = T::from_f64(m + s.ln());
                    }
                    return;
                }
            }
            for (d, &a) in dst.iter_mut().zip(acc.iter()) {
                *d = match op {
                    ReduceOp::Mean if count > 0 => T::from_i64(a / count as i64),
                    ReduceOp::L2 => T::from_f64((a as f64).sqrt()),
                    ReduceOp::Max if count == 0 => T::from_f64(f64::NEG_INFINITY),
                    ReduceOp::Min if count == 0 => T::from_f64(f64::INFINITY),
                    _ => T::from_i64(a),
                };
            }
        },
    );
}

/// `acc[i] = step(… step(init, rows[0][i]) …, rows[last][i])`, widened to i64.
fn accumulate<'a, T: Int>(
    acc: &mut Vec<i64>,
    len: usize,
    init: i64,
    rows: impl Iterator<Item = &'a [T]>,
    step: impl Fn(i64, i64) -> i64,
) {
    acc.clear();
    acc.resize(len, init);
    for row in rows {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = step(*a, v.to_i64());
        }
    }
}
