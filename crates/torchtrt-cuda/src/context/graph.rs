//! CUDA graphs of whole runs, one per input-shape key.
//!
//! The first run of a key takes the plain walk (which compiles lazy programs, uploads
//! constants and computes constant-derived layers). The second captures the walk on the
//! context's stream into a graph, over input buffers of the graph's own; later runs of the
//! key copy their inputs into those buffers, launch the graph and copy the outputs from
//! where the graph leaves them, so a repeated shape does no shape inference and no
//! per-layer host work. A run that cannot be captured (a layer on the host that reads
//! device data, a download for shape inference, an output known on the host only) marks
//! its key plain: it keeps the per-layer walk.
//!
//! Caller buffers of `enqueue` are not captured: addresses change from call to call, so the
//! graph reads and writes buffers it owns and two device copies move the data across.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{result, sys};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Error, Result};

use super::value::{Dev, Value};
use super::{CudaExecutionContext, cuda_error};
use crate::device::CudaDevice;
use crate::error::{CudaResult, driver};
use crate::memory::DeviceBuffer;
use crate::stream::Stream;

/// The dtypes and shapes of a run's inputs, engine input order.
pub(super) type Key = Vec<(DType, Vec<usize>)>;

/// Most input-shape keys a context keeps graphs (or plain marks) for; runs of further keys
/// take the plain walk.
const MAX_KEYS: usize = 16;

/// Captures a key may fail (another thread's device-wide synchronisation invalidates a
/// capture too) before it is marked plain.
const CAPTURE_TRIES: u8 = 3;

/// What a context knows about one key.
pub(super) enum Entry {
    /// Ran plainly; the captures tried so far failed.
    Seen(u8),
    /// Cannot be captured: runs plainly.
    Plain,
    /// Captured.
    Graph(Box<Captured>),
}

/// Where a graph leaves one output.
#[derive(Clone, Debug)]
pub(super) struct OutputAt {
    pub ptr: u64,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// A captured run: the instantiated graph, its input buffers and where its outputs land.
pub(super) struct Captured {
    exec: GraphExec,
    pub inputs: Vec<Arc<DeviceBuffer>>,
    pub outputs: Vec<OutputAt>,
    /// The outputs' device memory, held so no later run of the context takes it.
    _held: Vec<Dev>,
}

/// An instantiated graph; destroyed on drop.
struct GraphExec {
    raw: sys::CUgraphExec,
    device: CudaDevice,
}

// SAFETY: a CUgraphExec may be launched and destroyed from any thread with its context
// current, which every use here ensures; the context launches it from one thread at a time.
unsafe impl Send for GraphExec {}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the executable graph is live and destroyed once.
            let _ = unsafe { result::graph::exec_destroy(self.raw) };
        }
    }
}

/// The context's graphs by key.
#[derive(Default)]
pub(super) struct Graphs {
    pub entries: HashMap<Key, Entry>,
    pub replays: u64,
    pub captures: u64,
    /// Why the last capture that failed did.
    pub last_failure: Option<String>,
}

impl Captured {
    /// Launches the graph on `stream`.
    pub fn launch(&self, stream: &Stream) -> CudaResult<()> {
        self.exec.device.bind()?;
        // SAFETY: the graph is live; every address it uses is held by the context.
        unsafe { result::graph::launch(self.exec.raw, stream.raw().cast()) }
            .map_err(driver("cuGraphLaunch"))
    }
}

impl CudaExecutionContext {
    /// The graph for inputs of `key`, capturing it when the key was seen before; `None` when
    /// the run must take the plain walk.
    pub(super) fn graph_for(&mut self, key: &Key) -> Option<&Captured> {
        if !self.use_graphs || self.profile.is_some() {
            return None;
        }
        let state = match self.graphs.entries.get(key) {
            None if self.graphs.entries.len() >= MAX_KEYS => return None,
            None => {
                self.graphs.entries.insert(key.clone(), Entry::Seen(0));
                return None;
            }
            Some(Entry::Plain) => return None,
            Some(&Entry::Seen(failed)) => match self.capture(key) {
                Ok(c) => {
                    self.graphs.captures += 1;
                    Entry::Graph(Box::new(c))
                }
                Err(why) => {
                    self.graphs.last_failure = Some(why);
                    if failed + 1 < CAPTURE_TRIES {
                        Entry::Seen(failed + 1)
                    } else {
                        Entry::Plain
                    }
                }
            },
            Some(Entry::Graph(_)) => {
                return match self.graphs.entries.get(key) {
                    Some(Entry::Graph(c)) => Some(c),
                    _ => None,
                };
            }
        };
        self.graphs.entries.insert(key.clone(), state);
        match self.graphs.entries.get(key) {
            Some(Entry::Graph(c)) => Some(c),
            _ => None,
        }
    }

    /// Captures a run over fresh input buffers of `key`'s shapes on the context's stream;
    /// `Err` says why it could not.
    fn capture(&mut self, key: &Key) -> std::result::Result<Captured, String> {
        let _scratch = self.scratch.enter();
        let inputs: Vec<Arc<DeviceBuffer>> = key
            .iter()
            .map(|(dtype, shape)| {
                let bytes = shape.iter().product::<usize>() * dtype.size();
                self.device.allocator().alloc(bytes).map(Arc::new)
            })
            .collect::<CudaResult<_>>()
            .map_err(|e| e.to_string())?;
        let values: Vec<Value<'_>> = key
            .iter()
            .zip(&inputs)
            .map(|((dtype, shape), b)| Value {
                dtype: *dtype,
                shape: shape.clone(),
                host: None,
                dev: Some(Dev::Owned(b.clone())),
            })
            .collect();
        let stream = self.stream.clone();
        self.device.bind().map_err(|e| e.to_string())?;
        // SAFETY: the context's stream is live and idle of other captures.
        unsafe {
            result::stream::begin_capture(
                stream.raw().cast(),
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        }
        .map_err(|e| driver("cuStreamBeginCapture")(e).to_string())?;
        self.capturing = true;
        let walked = self.run(values, None, &stream);
        self.capturing = false;
        // SAFETY: the stream is capturing (begun above).
        let graph = unsafe { result::stream::end_capture(stream.raw().cast()) };
        let outs = match (walked, graph) {
            (Ok(outs), Ok(graph)) => (outs, graph),
            (walked, graph) => {
                let why = match (&walked, &graph) {
                    (Err(e), _) => e.to_string(),
                    (_, Err(e)) => driver("cuStreamEndCapture")(*e).to_string(),
                    _ => unreachable!("one of them failed"),
                };
                if let Ok(g) = graph {
                    // SAFETY: the captured graph is live and destroyed once.
                    let _ = unsafe { result::graph::destroy(g) };
                }
                if let Ok(outs) = walked {
                    self.recycle(outs);
                }
                return Err(why);
            }
        };
        let (outs, graph) = outs;
        // SAFETY: the graph was just captured.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: the graph is live; the executable keeps what it needs.
        let _ = unsafe { result::graph::destroy(graph) };
        let held: Option<Vec<Dev>> = outs.iter().map(|v| v.dev.clone()).collect();
        let outputs: Vec<OutputAt> = outs
            .iter()
            .filter_map(|v| {
                Some(OutputAt {
                    ptr: v.dev.as_ref()?.ptr(),
                    dtype: v.dtype,
                    shape: v.shape.clone(),
                })
            })
            .collect();
        self.recycle(outs);
        let raw = exec.map_err(|e| driver("cuGraphInstantiate")(e).to_string())?;
        let held = held.ok_or("an output is computed on the host only")?;
        Ok(Captured {
            exec: GraphExec {
                raw,
                device: self.device.clone(),
            },
            inputs,
            outputs,
            _held: held,
        })
    }

    /// An error for a step a capture cannot hold.
    pub(super) fn refuse_in_capture(&self, what: &str, name: &str) -> Result<()> {
        if self.capturing {
            return Err(Error::Execution {
                layer: name.to_string(),
                message: format!("{what} cannot be captured in a CUDA graph"),
            });
        }
        Ok(())
    }
}

/// Queues a replay of `graph` on `stream` after copying the inputs into its buffers with
/// `stage` (one call per input: its buffer's address and index).
pub(super) fn replay(
    graph: &Captured,
    stream: &Stream,
    mut stage: impl FnMut(usize, u64) -> Result<()>,
) -> Result<()> {
    for (i, b) in graph.inputs.iter().enumerate() {
        stage(i, b.ptr())?;
    }
    graph.launch(stream).map_err(cuda_error("graph replay"))
}
