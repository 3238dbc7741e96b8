//! The walk over an engine's layers: per-layer shapes, placement of each tensor on the host
//! or the device, and running each layer where it runs.

use std::sync::Arc;
use std::time::Instant;

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_core::plugin_api::{DType, DeviceTensor, const_shape};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{Engine, Error, Kernel, Result, Tensor};

use super::value::{Dev, DevicePool, Host, Value};
use super::{
    CudaExecutionContext, DeviceIo, Placement, SHAPE_TENSOR_ELEMENTS, check_output, copy,
    cuda_error,
};
use crate::layer_kernel::DeviceLayerKernel;
use crate::plugin_kernel::DevicePluginKernel;
use crate::stream::Stream;

impl CudaExecutionContext {
    /// Walks the plan over `inputs`; returns the outputs' values. With `external`, device
    /// layers write engine outputs straight into the caller's buffers.
    pub(super) fn run<'a>(
        &mut self,
        inputs: Vec<Value<'a>>,
        external: Option<&[DeviceIo]>,
        stream: &Stream,
    ) -> Result<Vec<Value<'a>>> {
        self.device.bind().map_err(cuda_error("execute"))?;
        let scratch = self.scratch.clone();
        let _scratch = scratch.enter();
        let engine = self.engine.clone();
        let plan = engine.plan();
        let mut slots: Vec<Option<Value<'a>>> =
            (0..plan.tensor_names.len()).map(|_| None).collect();
        for (spec, v) in plan.inputs.iter().zip(inputs) {
            slots[spec.tensor.index()] = Some(v);
        }
        let result = self.walk(&engine, &mut slots, external, stream);
        let outputs = result.and_then(|()| {
            plan.outputs
                .iter()
                .map(|(name, t)| {
                    let v = slots[t.index()].as_ref().ok_or_else(|| Error::Execution {
                        layer: name.clone(),
                        message: "output was not computed".into(),
                    })?;
                    Ok(Value {
                        dtype: v.dtype,
                        shape: v.shape.clone(),
                        host: v.host.as_ref().map(|h| match h {
                            Host::Borrowed(t) => Host::Borrowed(t),
                            Host::Shared(t) => Host::Shared(t.clone()),
                            Host::Owned(t) => Host::Owned(t.clone()),
                        }),
                        dev: v.dev.clone(),
                    })
                })
                .collect::<Result<Vec<_>>>()
        });
        for v in slots.into_iter().flatten() {
            if let Some(d) = v.dev {
                self.pool.release(d);
            }
        }
        outputs
    }

    fn walk<'a>(
        &mut self,
        engine: &Engine,
        slots: &mut [Option<Value<'a>>],
        external: Option<&[DeviceIo]>,
        stream: &Stream,
    ) -> Result<()> {
        let plan = engine.plan();
        for (li, layer) in plan.layers.iter().enumerate() {
            if let LayerKind::Constant(c) = &layer.kind {
                let t = layer.outputs[0].index();
                slots[t] = Some(Value {
                    dtype: c.value.dtype(),
                    shape: c.value.shape().to_vec(),
                    host: Some(Host::Shared(c.value.clone())),
                    dev: self.keep_dev[t].clone(),
                });
                continue;
            }
            if let Some(metas) = &self.cached[li] {
                for (t, (dtype, shape)) in layer.outputs.iter().zip(metas) {
                    slots[t.index()] = Some(Value {
                        dtype: *dtype,
                        shape: shape.clone(),
                        host: self.keep_host[t.index()].clone().map(Host::Shared),
                        dev: self.keep_dev[t.index()].clone(),
                    });
                }
                continue;
            }
            let timer = self.start_timer(stream)?;
            let outs = self.run_layer(engine, li, slots, external, stream)?;
            self.stop_timer(li, stream, timer)?;
            for (t, v) in layer.outputs.iter().zip(outs) {
                slots[t.index()] = Some(v);
            }
            if self.derived[li] {
                let mut metas = Vec::with_capacity(layer.outputs.len());
                for t in &layer.outputs {
                    let i = t.index();
                    if let Some(v) = slots[i].as_mut() {
                        metas.push((v.dtype, v.shape.clone()));
                        if let Some(Host::Owned(h)) = v.host.take() {
                            v.host = Some(Host::Shared(Arc::new(h)));
                        }
                        if let Some(Host::Shared(h)) = &v.host {
                            self.keep_host[i] = Some(h.clone());
                        }
                        self.keep_dev[i] = v.dev.clone();
                    }
                }
                self.cached[li] = Some(metas);
            }
            for t in &plan.memory.release_after[li] {
                if let Some(v) = slots[t.index()].take()
                    && let Some(d) = v.dev
                {
                    self.pool.release(d);
                }
            }
        }
        Ok(())
    }

    /// Runs layer `li` (not a constant); returns its outputs.
    fn run_layer<'a>(
        &mut self,
        engine: &Engine,
        li: usize,
        slots: &mut [Option<Value<'a>>],
        external: Option<&[DeviceIo]>,
        stream: &Stream,
    ) -> Result<Vec<Value<'a>>> {
        let layer = &engine.plan().layers[li];
        let name = layer.name.as_str();
        for t in &layer.inputs {
            if slots[t.index()].is_none() {
                return Err(Error::Execution {
                    layer: name.to_string(),
                    message: format!(
                        "input `{}` was released early",
                        engine.plan().tensor_names[t.index()]
                    ),
                });
            }
        }
        if self.places[li] != Placement::Plugin
            && let Some(values) = self.eval_from_shapes(engine, li, slots)
        {
            return Ok(values
                .into_iter()
                .map(|t| Value {
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                    host: Some(Host::Owned(t)),
                    dev: None,
                })
                .collect());
        }
        let dims = self.output_dims(engine, li, slots, stream)?;
        fn input<'s, 'a>(
            slots: &'s [Option<Value<'a>>],
            layer: &torchtrt_core::Layer,
            i: usize,
        ) -> &'s Value<'a> {
            slots[layer.inputs[i].index()]
                .as_ref()
                .unwrap_or_else(|| unreachable!("checked above"))
        }
        if layer.kind.is_view() && dims.len() == 1 {
            let x = input(slots, layer, 0);
            let numel: usize = dims[0].1.iter().product();
            if x.dev.is_some() && x.dtype == dims[0].0 && x.shape.iter().product::<usize>() == numel
            {
                return Ok(vec![Value {
                    dtype: x.dtype,
                    shape: dims[0].1.clone(),
                    host: None,
                    dev: x.dev.clone(),
                }]);
            }
        }
        if self.places[li] == Placement::Device
            && let Some(v) = slice_view(layer, slots, &dims, &engine.plan().outputs)
        {
            return Ok(vec![v]);
        }
        let kernel = engine.kernel(li).ok_or_else(|| Error::Execution {
            layer: name.to_string(),
            message: "no kernel was prepared".into(),
        })?;
        match self.places[li] {
            Placement::Device => {
                let dk = kernel
                    .as_any()
                    .and_then(|a| a.downcast_ref::<DeviceLayerKernel>())
                    .unwrap_or_else(|| unreachable!("placed by its type"));
                let all_on_host =
                    (0..layer.inputs.len()).all(|i| input(slots, layer, i).host.is_some());
                match &dk.host {
                    Some(host) if all_on_host && small(&dims) => {
                        self.run_host(engine, li, host.as_ref(), slots, &dims, stream)
                    }
                    _ => self.run_device(
                        engine,
                        li,
                        slots,
                        &dims,
                        external,
                        stream,
                        |ins, outs, _| dk.device_kernel.execute(ins, outs, stream),
                    ),
                }
            }
            Placement::Plugin => {
                let pk = kernel
                    .as_any()
                    .and_then(|a| a.downcast_ref::<DevicePluginKernel>())
                    .unwrap_or_else(|| unreachable!("placed by its type"));
                let allocator = self.device.allocator().clone();
                self.run_device(
                    engine,
                    li,
                    slots,
                    &dims,
                    external,
                    stream,
                    |ins, outs, pool| {
                        let bytes = pk.workspace_size(ins, outs);
                        let workspace = match bytes {
                            0 => None,
                            n => Some(pool.take(&allocator, n).map_err(|e| e.to_string())?),
                        };
                        let r = pk.enqueue(
                            ins,
                            outs,
                            workspace.as_ref().map_or(0, |w| w.ptr()),
                            stream,
                        );
                        if let Some(w) = workspace {
                            pool.put(w);
                        }
                        r
                    },
                )
            }
            Placement::Host | Placement::Constant => {
                self.run_host(engine, li, kernel, slots, &dims, stream)
            }
        }
    }

    /// The outputs of a layer whose outputs follow from its inputs' shapes alone.
    fn eval_from_shapes(
        &self,
        engine: &Engine,
        li: usize,
        slots: &[Option<Value<'_>>],
    ) -> Option<Vec<Tensor>> {
        let layer = &engine.plan().layers[li];
        let shapes: Vec<Vec<_>> = layer
            .inputs
            .iter()
            .map(|t| Some(const_shape(&shape_i64(&slots[t.index()].as_ref()?.shape))))
            .collect::<Option<_>>()?;
        let infer: Vec<InferInput<'_>> = layer
            .inputs
            .iter()
            .zip(&shapes)
            .map(|(t, s)| {
                let v = slots[t.index()].as_ref();
                InferInput {
                    dtype: v.map_or(DType::F32, |v| v.dtype),
                    shape: s,
                    value: v.and_then(|v| v.host.as_ref()).map(Host::get),
                }
            })
            .collect();
        layer.kind.op().eval_from_shapes(&infer)
    }

    /// The dtype and concrete shape of each output of layer `li`; downloads small integer
    /// inputs when inference needs their values.
    fn output_dims(
        &self,
        engine: &Engine,
        li: usize,
        slots: &mut [Option<Value<'_>>],
        stream: &Stream,
    ) -> Result<Vec<(DType, Vec<usize>)>> {
        let layer = &engine.plan().layers[li];
        for &i in layer.kind.op().value_inputs() {
            if let Some(t) = layer.inputs.get(i) {
                let v = slots[t.index()].as_mut().unwrap_or_else(|| unreachable!());
                self.fetch(engine, t.index(), v, stream)?;
            }
        }
        match infer_dims(engine, li, slots) {
            Ok(dims) => Ok(dims),
            Err(first) => {
                let mut fetched = false;
                for t in &layer.inputs {
                    let v = slots[t.index()].as_mut().unwrap_or_else(|| unreachable!());
                    if v.host.is_none()
                        && matches!(v.dtype, DType::I64 | DType::I32)
                        && v.shape.iter().product::<usize>() <= SHAPE_TENSOR_ELEMENTS
                    {
                        self.fetch(engine, t.index(), v, stream)?;
                        fetched = true;
                    }
                }
                if fetched {
                    infer_dims(engine, li, slots)
                } else {
                    Err(first)
                }
            }
        }
    }

    /// Makes the host copy of tensor `index` (value `v`) exist: downloads it, waiting for
    /// the stream.
    fn fetch(
        &self,
        engine: &Engine,
        index: usize,
        v: &mut Value<'_>,
        stream: &Stream,
    ) -> Result<()> {
        if v.host.is_some() {
            return Ok(());
        }
        let name = &engine.plan().tensor_names[index];
        self.refuse_in_capture("a download", name)?;
        let dev = v.dev.as_ref().ok_or_else(|| Error::Execution {
            layer: name.clone(),
            message: "tensor has neither a host nor a device copy".into(),
        })?;
        let mut t = Tensor::zeros(v.dtype, &v.shape);
        // SAFETY: the device copy holds the tensor's bytes.
        unsafe { copy::download(stream, dev.ptr(), t.bytes_mut()) }.map_err(cuda_error(name))?;
        v.host = Some(Host::Owned(t));
        Ok(())
    }

    /// Makes the device copy of tensor `index` (value `v`) exist: uploads it (kept
    /// tensors once per context, into memory of their own).
    fn place(
        &mut self,
        engine: &Engine,
        index: usize,
        v: &mut Value<'_>,
        stream: &Stream,
    ) -> Result<()> {
        if v.dev.is_some() {
            return Ok(());
        }
        let name = &engine.plan().tensor_names[index];
        self.refuse_in_capture("an upload", name)?;
        let host = v.host.as_ref().ok_or_else(|| Error::Execution {
            layer: name.clone(),
            message: "tensor has neither a host nor a device copy".into(),
        })?;
        let bytes = host.get().bytes();
        let buffer = if self.is_kept[index] {
            self.device.allocator().alloc(bytes.len())
        } else {
            self.pool.take(self.device.allocator(), bytes.len())
        }
        .map_err(cuda_error(name))?;
        // SAFETY: the buffer holds at least `bytes.len()` bytes.
        unsafe { copy::upload(stream, bytes, buffer.ptr()) }.map_err(cuda_error(name))?;
        let dev = Dev::Owned(Arc::new(buffer));
        if self.is_kept[index] {
            self.keep_dev[index] = Some(dev.clone());
        }
        v.dev = Some(dev);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_device<'a>(
        &mut self,
        engine: &Engine,
        li: usize,
        slots: &mut [Option<Value<'a>>],
        dims: &[(DType, Vec<usize>)],
        external: Option<&[DeviceIo]>,
        stream: &Stream,
        launch: impl FnOnce(
            &[DeviceTensor],
            &[DeviceTensor],
            &mut DevicePool,
        ) -> std::result::Result<(), String>,
    ) -> Result<Vec<Value<'a>>> {
        let plan = engine.plan();
        let layer = &plan.layers[li];
        let name = layer.name.as_str();
        let mut ins = Vec::with_capacity(layer.inputs.len());
        for t in &layer.inputs {
            let mut v = slots[t.index()].take().unwrap_or_else(|| unreachable!());
            let placed = self.place(engine, t.index(), &mut v, stream);
            ins.push(v.device_tensor());
            slots[t.index()] = Some(v);
            placed?;
        }
        let ins: Vec<DeviceTensor> = ins.into_iter().flatten().collect();
        let mut outs = Vec::with_capacity(dims.len());
        for (t, (dtype, shape)) in layer.outputs.iter().zip(dims) {
            let bound = external.filter(|_| !self.derived[li]).and_then(|ext| {
                let k = plan.outputs.iter().position(|(_, o)| o == t)?;
                Some((k, &ext[k]))
            });
            let mut v = Value {
                dtype: *dtype,
                shape: shape.clone(),
                host: None,
                dev: None,
            };
            v.dev = Some(match bound {
                Some((k, io)) => {
                    check_output(&plan.outputs[k].0, &v, io)?;
                    Dev::External(io.ptr)
                }
                None => Dev::Owned(Arc::new(
                    self.pool
                        .take(self.device.allocator(), v.bytes())
                        .map_err(cuda_error(name))?,
                )),
            });
            outs.push(v);
        }
        let out_tensors: Vec<DeviceTensor> = outs.iter().filter_map(Value::device_tensor).collect();
        if let Err(message) = launch(&ins, &out_tensors, &mut self.pool) {
            for v in outs {
                if let Some(d) = v.dev {
                    self.pool.release(d);
                }
            }
            return Err(Error::Execution {
                layer: name.to_string(),
                message,
            });
        }
        Ok(outs)
    }

    fn run_host<'a>(
        &mut self,
        engine: &Engine,
        li: usize,
        kernel: &dyn Kernel,
        slots: &mut [Option<Value<'a>>],
        dims: &[(DType, Vec<usize>)],
        stream: &Stream,
    ) -> Result<Vec<Value<'a>>> {
        let layer = &engine.plan().layers[li];
        for t in &layer.inputs {
            let v = slots[t.index()].as_mut().unwrap_or_else(|| unreachable!());
            self.fetch(engine, t.index(), v, stream)?;
        }
        let ins: Vec<&Tensor> = layer
            .inputs
            .iter()
            .map(|t| {
                slots[t.index()]
                    .as_ref()
                    .and_then(|v| v.host.as_ref())
                    .map(Host::get)
                    .unwrap_or_else(|| unreachable!("fetched above"))
            })
            .collect();
        let mut outs: Vec<Tensor> = dims
            .iter()
            .map(|(dtype, shape)| Tensor::zeros(*dtype, shape))
            .collect();
        kernel
            .execute(&ins, &mut outs)
            .map_err(|message| Error::Execution {
                layer: layer.name.clone(),
                message,
            })?;
        Ok(outs
            .into_iter()
            .map(|t| Value {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                host: Some(Host::Owned(t)),
                dev: None,
            })
            .collect())
    }

    fn start_timer(&self, stream: &Stream) -> Result<Option<Instant>> {
        if self.profile.is_none() {
            return Ok(None);
        }
        stream.synchronize().map_err(cuda_error("profiling"))?;
        Ok(Some(Instant::now()))
    }

    fn stop_timer(&mut self, li: usize, stream: &Stream, started: Option<Instant>) -> Result<()> {
        if let (Some(p), Some(t0)) = (self.profile.as_mut(), started) {
            stream.synchronize().map_err(cuda_error("profiling"))?;
            p.timings[li].calls += 1;
            p.timings[li].total += t0.elapsed();
        }
        Ok(())
    }
}

/// Infers layer `li`'s output dtypes and concrete shapes from the slots' shapes and host
/// values.
fn infer_dims(
    engine: &Engine,
    li: usize,
    slots: &[Option<Value<'_>>],
) -> Result<Vec<(DType, Vec<usize>)>> {
    let layer = &engine.plan().layers[li];
    let inputs: Vec<(DType, &[usize], Option<&Tensor>)> = layer
        .inputs
        .iter()
        .map(|t| {
            let v = slots[t.index()].as_ref().unwrap_or_else(|| unreachable!());
            (v.dtype, v.shape.as_slice(), v.host.as_ref().map(Host::get))
        })
        .collect();
    torchtrt_core::runtime::concrete_dims(layer, &inputs)
}

/// A `Gather` of one constant index (a constant, or a value derived from constants only, so
/// the same in every run and graph replay) along an axis with only unit dims before it, whose
/// output is not an engine output: that output is one contiguous block of the input, so it
/// aliases the input's device memory at an offset (how exported attention selects q, k, v).
fn slice_view<'a>(
    layer: &torchtrt_core::Layer,
    slots: &[Option<Value<'a>>],
    dims: &[(DType, Vec<usize>)],
    outputs: &[(String, torchtrt_core::network::TensorId)],
) -> Option<Value<'a>> {
    let LayerKind::Gather(g) = &layer.kind else {
        return None;
    };
    if dims.len() != 1 || outputs.iter().any(|(_, t)| *t == layer.outputs[0]) {
        return None;
    }
    let x = slots[layer.inputs[0].index()].as_ref()?;
    let Some(Host::Shared(index)) = &slots[layer.inputs[1].index()].as_ref()?.host else {
        return None;
    };
    let [i] = index.to_i64_vec()?[..] else {
        return None;
    };
    let rank = x.shape.len() as i64;
    let axis = usize::try_from(if g.axis < 0 { g.axis + rank } else { g.axis }).ok()?;
    let len = *x.shape.get(axis)? as i64;
    let i = usize::try_from(if i < 0 { i + len } else { i }).ok()?;
    let inner: usize = x.shape[axis + 1..].iter().product();
    let dev = x.dev.as_ref()?;
    let leading_units = x.shape[..axis].iter().all(|&d| d == 1);
    let fits =
        i < len as usize && dims[0].0 == x.dtype && dims[0].1.iter().product::<usize>() == inner;
    (leading_units && fits).then(|| Value {
        dtype: x.dtype,
        shape: dims[0].1.clone(),
        host: None,
        dev: Some(dev.offset(i * inner * x.dtype.size())),
    })
}

/// Whether outputs are small enough to compute on the host next to host inputs.
pub(super) fn small(dims: &[(DType, Vec<usize>)]) -> bool {
    dims.iter()
        .all(|(_, s)| s.iter().product::<usize>() <= SHAPE_TENSOR_ELEMENTS)
}
