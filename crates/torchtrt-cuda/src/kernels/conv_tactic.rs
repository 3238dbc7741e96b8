//! The choice between a convolution's tactics — the tensor-core implicit GEMM and im2col +
//! cuBLAS — per input shape, made by timing both on the first run of that shape (as
//! `cudnn.benchmark` does): after a warm-up run of each, each writes a scratch output
//! [`timing::RUNS`] times between CUDA events on the run's stream, twice, and the faster best
//! is kept for the shape. A run inside a stream capture cannot wait for events, so it takes
//! [`Tactic::guess`] without remembering it. A tactic can also be forced
//! (`PrepareCtx::conv_tactic`, `TORCHTRT_CONV_TACTIC`), down to the implicit GEMM's tile.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::stream::Stream;
use crate::timing;

/// How a convolution with a tensor-core kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tactic {
    /// `implicit_gemm`.
    Implicit,
    /// im2col (or the input as it is) and cuBLAS, then the epilogue pass.
    Gemm,
    /// `implicit_gemm` with the tile of this index in its table, not timed (to test or
    /// measure one tile); an index past the table's end is its last tile.
    Tile(usize),
}

impl Tactic {
    /// The tactic `TORCHTRT_CONV_TACTIC` names (`implicit`, `gemm` or `tile:N`), if any.
    pub fn from_env() -> Option<Tactic> {
        match std::env::var("TORCHTRT_CONV_TACTIC").ok()?.as_str() {
            "implicit" => Some(Tactic::Implicit),
            "gemm" => Some(Tactic::Gemm),
            other => Some(Tactic::Tile(other.strip_prefix("tile:")?.parse().ok()?)),
        }
    }

    /// The tactic a convolution chooses between: a tile is the implicit GEMM.
    fn kind(self) -> Tactic {
        match self {
            Tactic::Tile(_) => Tactic::Implicit,
            t => t,
        }
    }

    /// The choice without timing: the implicit GEMM where the other tactic would gather an
    /// im2col matrix (windows larger than one tap).
    pub(super) fn guess(taps: usize) -> Tactic {
        if taps > 1 {
            Tactic::Implicit
        } else {
            Tactic::Gemm
        }
    }
}

/// The choices made so far, by input shape (images, height, width), or the forced one.
pub(super) struct Tactics {
    forced: Option<Tactic>,
    chosen: Mutex<HashMap<[usize; 3], Tactic>>,
}

impl Tactics {
    /// Choices by timing, or always `forced`.
    pub(super) fn new(forced: Option<Tactic>) -> Tactics {
        Tactics {
            forced: forced.map(Tactic::kind),
            chosen: Mutex::default(),
        }
    }

    /// The tactic for `shape`: remembered, or timed now with `run` (which queues one run of
    /// a tactic into the scratch output and returns `false` where the tactic cannot take the
    /// shape), or guessed from `taps` while `stream` is being captured.
    pub(super) fn choose(
        &self,
        shape: [usize; 3],
        taps: usize,
        stream: &Stream,
        mut run: impl FnMut(Tactic) -> Result<bool, String>,
    ) -> Result<Tactic, String> {
        if let Some(t) = self.forced {
            return Ok(t);
        }
        if let Some(&t) = self.chosen.lock().map_err(|_| poisoned())?.get(&shape) {
            return Ok(t);
        }
        let err = |e| format!("Convolution: timing tactics: {e}");
        if stream.is_capturing().map_err(err)? {
            return Ok(Tactic::guess(taps));
        }
        let mut timed = Vec::new();
        for tactic in [Tactic::Implicit, Tactic::Gemm] {
            if run(tactic)? {
                timed.push(tactic);
            }
        }
        let best = timing::fastest(stream, &timed, |&t| run(t).map(drop), err)?;
        let tactic = best.map_or(Tactic::Gemm, |i| timed[i]);
        self.chosen
            .lock()
            .map_err(|_| poisoned())?
            .insert(shape, tactic);
        Ok(tactic)
    }
}

fn poisoned() -> String {
    "Convolution: the tactic table's lock was poisoned".into()
}
