//! The fastest of interchangeable ways to run one operation, chosen by timing each on the
//! stream it runs on (as `cudnn.benchmark` does): every candidate is queued [`RUNS`] times
//! between two events, in two rounds, and its faster round counts. Used for convolution
//! tactics and cuBLASLt algorithms.

use crate::error::CudaError;
use crate::stream::{Event, Stream};

/// Runs of each candidate in one round (there are two).
pub(crate) const RUNS: usize = 4;

/// The position in `candidates` of the fastest (the first of equals), `None` when there are
/// none; `run` queues one run of a candidate on `stream`, `wrap` turns the timing's own
/// errors into the caller's.
pub(crate) fn fastest<T, E>(
    stream: &Stream,
    candidates: &[T],
    mut run: impl FnMut(&T) -> Result<(), E>,
    wrap: impl Fn(CudaError) -> E,
) -> Result<Option<usize>, E> {
    let mut best = vec![f32::INFINITY; candidates.len()];
    for _ in 0..2 {
        for (candidate, best) in candidates.iter().zip(&mut best) {
            let start = Event::new(stream.device()).map_err(&wrap)?;
            let end = Event::new(stream.device()).map_err(&wrap)?;
            start.record(stream).map_err(&wrap)?;
            for _ in 0..RUNS {
                run(candidate)?;
            }
            end.record(stream).map_err(&wrap)?;
            end.synchronize().map_err(&wrap)?;
            *best = best.min(start.elapsed_ms(&end).map_err(&wrap)?);
        }
    }
    Ok(best
        .iter()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .map(|(i, _)| i))
}
