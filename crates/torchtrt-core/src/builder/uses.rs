//! Who produces and who reads each tensor of the graph under construction: the table the
//! graph passes look a layer's neighbours up in.

use super::{Work, live_work_layers};
use crate::network::TensorId;

/// Producers, readers and output marks of every tensor of a [`Work`] graph.
pub(super) struct Uses {
    /// The layer producing each tensor.
    pub producer: Vec<Option<usize>>,
    /// The layers reading each tensor with the input slot they read it in, in layer order
    /// (a layer reading a tensor in two slots appears twice).
    pub readers: Vec<Vec<(usize, usize)>>,
    /// Whether each tensor is a network output.
    pub output: Vec<bool>,
}

impl Uses {
    /// The table of every layer of `work`.
    pub fn new(work: &Work, outputs: &[(String, TensorId)]) -> Uses {
        Uses::of(work, outputs, None)
    }

    /// The table whose readers are only the layers some output depends on.
    pub fn live(work: &Work, outputs: &[(String, TensorId)]) -> Uses {
        let live = live_work_layers(work, outputs);
        Uses::of(work, outputs, Some(&live))
    }

    fn of(work: &Work, outputs: &[(String, TensorId)], live: Option<&[bool]>) -> Uses {
        let n = work.tensors.len();
        let mut uses = Uses {
            producer: vec![None; n],
            readers: vec![Vec::new(); n],
            output: vec![false; n],
        };
        for (i, layer) in work.layers.iter().enumerate() {
            for t in &layer.outputs {
                uses.producer[t.index()] = Some(i);
            }
            if live.is_some_and(|live| !live[i]) {
                continue;
            }
            for (slot, t) in layer.inputs.iter().enumerate() {
                uses.readers[t.index()].push((i, slot));
            }
        }
        for (_, t) in outputs {
            uses.output[t.index()] = true;
        }
        uses
    }

    /// The layers reading `t`, once per slot.
    pub fn reader_layers(&self, t: TensorId) -> impl Iterator<Item = usize> + '_ {
        self.readers[t.index()].iter().map(|&(r, _)| r)
    }

    /// The one layer reading `t`, when it reads it once and `t` is not a network output.
    pub fn only_reader(&self, t: TensorId) -> Option<usize> {
        match self.readers[t.index()][..] {
            [(r, _)] if !self.output[t.index()] => Some(r),
            _ => None,
        }
    }

    /// The layer producing `t`, when it has no other output and nothing but one layer reads
    /// `t`.
    pub fn sole(&self, work: &Work, t: TensorId) -> Option<usize> {
        self.only_reader(t)?;
        self.producer[t.index()].filter(|&p| work.layers[p].outputs.len() == 1)
    }
}
