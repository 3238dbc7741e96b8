//! CUDA graphs: a run captured on a stream, instantiated once and launched per replay.

use std::any::Any;

use cudarc::driver::{result, sys};
use torchtrt_core::backend::CapturedRun;

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult, driver};
use crate::stream::Stream;

/// An instantiated graph; destroyed on drop.
pub(crate) struct CudaGraph {
    raw: sys::CUgraphExec,
    device: CudaDevice,
}

// SAFETY: a CUgraphExec may be launched and destroyed from any thread with its context
// current, which every use here ensures; its context launches it from one thread at a time.
unsafe impl Send for CudaGraph {}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the executable graph is live and destroyed once.
            let _ = unsafe { result::graph::exec_destroy(self.raw) };
        }
    }
}

impl CapturedRun for CudaGraph {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl CudaGraph {
    /// Launches the graph on `stream`.
    pub(crate) fn launch(&self, stream: &Stream) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: the graph is live; every address it uses is held by its context.
        unsafe { result::graph::launch(self.raw, stream.raw().cast()) }
            .map_err(driver("cuGraphLaunch"))
    }
}

/// Starts capturing the work queued on `stream`.
pub(crate) fn begin(stream: &Stream) -> CudaResult<()> {
    stream.device().bind()?;
    // SAFETY: the stream is live and not capturing.
    unsafe {
        result::stream::begin_capture(
            stream.raw().cast(),
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    }
    .map_err(driver("cuStreamBeginCapture"))
}

/// Ends the capture on `stream`; instantiates it when `ok`, else drops it and fails.
pub(crate) fn end(stream: &Stream, ok: bool) -> CudaResult<CudaGraph> {
    stream.device().bind()?;
    // SAFETY: the stream is capturing (begun by `begin`).
    let graph = unsafe { result::stream::end_capture(stream.raw().cast()) }
        .map_err(driver("cuStreamEndCapture"))?;
    if !ok {
        // SAFETY: the captured graph is live and destroyed once.
        let _ = unsafe { result::graph::destroy(graph) };
        return Err(CudaError::Invalid("the captured run failed".into()));
    }
    // SAFETY: the graph was just captured.
    let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
    // SAFETY: the graph is live; the executable keeps what it needs.
    let _ = unsafe { result::graph::destroy(graph) };
    Ok(CudaGraph {
        raw: exec.map_err(driver("cuGraphInstantiate"))?,
        device: stream.device().clone(),
    })
}
