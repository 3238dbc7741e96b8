//! Recorded runs (CUDA graphs), one per input-shape key, on devices that record.
//!
//! The first run of a key takes the plain walk (which compiles lazy programs, uploads
//! constants, computes derived layers and learns the key's shapes). The second records the
//! walk on the device over input buffers of the recording's own; later runs of the key copy
//! their inputs into those buffers, replay the recording and copy the outputs from where it
//! leaves them, so a repeated shape does no shape inference and no per-layer host work. A
//! run that cannot be recorded (a layer on the host that reads device data, a download for
//! shape inference, an output known on the host only) marks its key plain: it keeps the walk.
//!
//! Caller buffers are not recorded: their addresses change from call to call, so a
//! recording reads and writes buffers it owns and copies move the data across.

use torchtrt_plugin_api::DType;

use super::io::{OutputTarget, RunInputs};
use super::plans::{Key, key_matches, key_of};
use super::walk::Walk;
use crate::backend::{CapturedRun, DeviceMemory};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Most keys a context keeps recordings (or plain marks) for.
const MAX_KEYS: usize = 16;

/// Recordings a key may fail (another thread's device-wide synchronisation invalidates a
/// recording too) before it is marked plain.
const CAPTURE_TRIES: u8 = 3;

enum Entry {
    /// Ran plainly; the recordings tried so far failed.
    Seen(u8),
    /// Cannot be recorded: runs plainly.
    Plain,
    /// Recorded.
    Recorded(Box<Captured>),
}

/// One recorded run: its inputs' buffers and where it leaves each output.
struct Captured {
    run: Box<dyn CapturedRun>,
    inputs: Vec<DeviceMemory>,
    outputs: Vec<(u64, DType, Vec<usize>)>,
    /// The memory of the outputs, held so no later run takes it.
    held: Vec<DeviceMemory>,
}

/// A context's recordings by key.
pub(crate) struct Graphs {
    entries: Vec<(Key, Entry)>,
    pub enabled: bool,
    pub replays: u64,
    pub captures: u64,
    pub last_failure: Option<String>,
}

impl Graphs {
    pub(crate) fn new(enabled: bool) -> Graphs {
        Graphs {
            entries: Vec::new(),
            enabled,
            replays: 0,
            captures: 0,
            last_failure: None,
        }
    }
}

/// The inputs of a recording: its own device buffers.
struct RecordedInputs<'a> {
    key: &'a Key,
    ptrs: &'a [DeviceMemory],
}

impl RunInputs for RecordedInputs<'_> {
    fn meta(&self, k: usize) -> (DType, &[usize]) {
        (self.key[k].0, &self.key[k].1)
    }

    fn host(&self, _k: usize) -> Option<&Tensor> {
        None
    }

    fn device(&self, k: usize) -> Option<u64> {
        Some(self.ptrs[k].ptr)
    }
}

impl Walk {
    /// Runs through the recording of `inputs`' key, recording it when the key was seen
    /// before; `Ok(false)` when the run must take the walk instead.
    pub(crate) fn replay_or_record(
        &mut self,
        graphs: &mut Graphs,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<bool> {
        if !graphs.enabled || self.profile.is_some() || self.device.is_none() {
            return Ok(false);
        }
        let n = self.engine.plan().inputs.len();
        let Some(i) = graphs
            .entries
            .iter()
            .position(|(k, _)| key_matches(k, inputs))
        else {
            if graphs.entries.len() < MAX_KEYS {
                graphs.entries.push((key_of(n, inputs), Entry::Seen(0)));
            }
            return Ok(false);
        };
        match graphs.entries[i].1 {
            Entry::Plain => return Ok(false),
            Entry::Seen(failed) => match self.record(&graphs.entries[i].0) {
                Ok(c) => {
                    graphs.captures += 1;
                    graphs.entries[i].1 = Entry::Recorded(Box::new(c));
                }
                Err(why) => {
                    graphs.last_failure = Some(why);
                    graphs.entries[i].1 = if failed + 1 < CAPTURE_TRIES {
                        Entry::Seen(failed + 1)
                    } else {
                        Entry::Plain
                    };
                    return Ok(false);
                }
            },
            Entry::Recorded(_) => {}
        }
        let Entry::Recorded(c) = &graphs.entries[i].1 else {
            unreachable!("recorded above")
        };
        self.replay(c, inputs, targets)?;
        graphs.replays += 1;
        Ok(true)
    }

    /// Records a run over fresh input buffers of `key`'s shapes; `Err` says why it could not.
    fn record(&mut self, key: &Key) -> std::result::Result<Captured, String> {
        let device = self.device.as_deref_mut().ok_or("no device")?;
        let mut inputs = Vec::with_capacity(key.len());
        for (dtype, shape) in key {
            match device.alloc(shape.iter().product::<usize>() * dtype.size()) {
                Ok(m) => inputs.push(m),
                Err(e) => {
                    inputs.into_iter().for_each(|m| device.release(m));
                    return Err(e);
                }
            }
        }
        let mut targets: Vec<OutputTarget> = self
            .engine
            .plan()
            .outputs
            .iter()
            .map(|_| OutputTarget::Keep)
            .collect();
        let began = device.begin_run().and_then(|()| device.begin_capture());
        let walked = began.map_err(Error::Engine).and_then(|()| {
            self.capturing = true;
            let recorded = RecordedInputs { key, ptrs: &inputs };
            let walked = self.run(&recorded, &mut targets);
            self.capturing = false;
            walked
        });
        let held = std::mem::take(&mut self.kept_outputs);
        let device = self.device.as_deref_mut().ok_or("no device")?;
        let run = device.end_capture(walked.is_ok());
        device.end_run();
        match (walked, run) {
            (Ok(()), Ok(run)) => {
                let outputs = held
                    .iter()
                    .map(|(p, d, s, _)| (*p, *d, s.clone()))
                    .collect();
                Ok(Captured {
                    run,
                    inputs,
                    outputs,
                    held: held.into_iter().filter_map(|(.., m)| m).collect(),
                })
            }
            (walked, run) => {
                for m in inputs
                    .into_iter()
                    .chain(held.into_iter().filter_map(|(.., m)| m))
                {
                    device.release(m);
                }
                Err(match (walked, run) {
                    (Err(e), _) => e.to_string(),
                    (_, Err(e)) => e,
                    _ => unreachable!("one of them failed"),
                })
            }
        }
    }

    /// Queues a replay of `c` after copying the inputs into its buffers, then leaves the
    /// outputs as `targets` ask.
    fn replay(
        &mut self,
        c: &Captured,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        let engine = self.engine.clone();
        let plan = engine.plan();
        let device = self
            .device
            .as_deref_mut()
            .ok_or_else(|| Error::Engine("no device".into()))?;
        let fail = |e: String| Error::Execution {
            layer: "replay".into(),
            message: e,
        };
        device.begin_run().map_err(fail)?;
        let result = (|| {
            for (k, m) in c.inputs.iter().enumerate() {
                let (dtype, shape) = inputs.meta(k);
                let bytes = shape.iter().product::<usize>() * dtype.size();
                match (inputs.device(k), inputs.host(k)) {
                    // SAFETY: both hold the input's bytes (the key matched its shape).
                    (Some(p), _) => unsafe { device.copy(p, m.ptr, bytes) },
                    // SAFETY: the recording's buffer holds the input's bytes.
                    (None, Some(h)) => unsafe { device.upload(h.bytes(), m.ptr) },
                    (None, None) => Err(format!("input `{}` is not given", plan.inputs[k].name)),
                }
                .map_err(fail)?;
            }
            device.replay(c.run.as_ref()).map_err(fail)?;
            for (k, (ptr, dtype, shape)) in c.outputs.iter().enumerate() {
                let name = &plan.outputs[k].0;
                let err = |message: String| Error::Execution {
                    layer: name.clone(),
                    message,
                };
                if let Some((d, s)) = targets[k].meta()
                    && (d != *dtype || s != shape.as_slice())
                {
                    return Err(Error::Input(format!(
                        "output `{name}` is {dtype}{shape:?}, its buffer is bound as {d}{s:?}"
                    )));
                }
                match &mut targets[k] {
                    OutputTarget::Return(out) => {
                        let mut t = Tensor::zeros(*dtype, shape);
                        // SAFETY: the recording leaves the output's bytes at `ptr`.
                        unsafe { device.download(*ptr, t.bytes_mut()) }.map_err(err)?;
                        *out = Some(t);
                    }
                    OutputTarget::Host {
                        tensor: Some(t), ..
                    } => {
                        // SAFETY: as above; the bound tensor has the output's shape.
                        unsafe { device.download(*ptr, t.bytes_mut()) }.map_err(err)?;
                    }
                    OutputTarget::Device { ptr: dst, .. } => {
                        let bytes = shape.iter().product::<usize>() * dtype.size();
                        // SAFETY: both hold the output's bytes (checked shape and dtype).
                        unsafe { device.copy(*ptr, *dst, bytes) }.map_err(err)?;
                    }
                    OutputTarget::Host { tensor: None, .. } | OutputTarget::Keep => {}
                }
            }
            Ok(())
        })();
        device.end_run();
        result
    }

    /// Gives the memory of every recording back to the device and forgets them.
    pub(crate) fn drop_recordings(&mut self, graphs: &mut Graphs) {
        let Some(device) = self.device.as_deref_mut() else {
            graphs.entries.clear();
            return;
        };
        for (_, entry) in graphs.entries.drain(..) {
            if let Entry::Recorded(c) = entry {
                for m in c.inputs.into_iter().chain(c.held) {
                    device.release(m);
                }
            }
        }
    }
}
