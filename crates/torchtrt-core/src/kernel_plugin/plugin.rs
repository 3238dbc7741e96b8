//! A kernel plugin as the engine sees it: a [`PluginCreator`] made from a [`KernelSpec`], and
//! its plugins, which state dtypes and shapes from the spec and launch the spec's kernels —
//! the compiled C entry points on the CPU, the CUDA C through the host's CUDA runtime (which
//! compiles it with NVRTC when the engine is built and stores the image in the engine).

use std::ffi::c_void;
use std::sync::Arc;

use torchtrt_plugin_api::{
    Capabilities, CpuLaunch, CudaLaunch, CudaProgram, DType, DeviceKind, FieldCollection,
    FieldSpec, FieldType, KernelLaunch, Launch, Plugin, PluginCreator, PluginError, PluginKey,
    PluginResult, PortDesc, ShapeExpr, ShapeValues, Tactic, TensorDesc, TensorFormat,
};

use super::cpu::CpuObject;
use super::expr::{Concrete, Symbolic};
use super::package::KernelPackage;
use super::spec::{Arg, DeviceSpec, DimEntry, Kernel, KernelSpec, OutShape, PortType};

/// A spec with what it needs to run: the loaded CPU object (when it has a CPU part) and
/// the full CUDA source (when it has a CUDA part).
pub(crate) struct Loaded {
    pub(crate) spec: KernelSpec,
    pub(crate) package: Arc<KernelPackage>,
    cpu: Option<CpuObject>,
    cuda_source: String,
    program_name: String,
}

impl Loaded {
    pub(crate) fn new(
        spec: KernelSpec,
        package: Arc<KernelPackage>,
        cpu: Option<CpuObject>,
    ) -> Loaded {
        let cuda_source = spec.cuda.as_ref().map_or_else(String::new, |d| {
            if d.prelude {
                format!("{}{}", torchtrt_plugin_api::cuda_c::ELEMENTS, d.source)
            } else {
                d.source.clone()
            }
        });
        let program_name = format!("kernel_plugin_{}", spec.key.name);
        Loaded {
            spec,
            package,
            cpu,
            cuda_source,
            program_name,
        }
    }

    fn device(&self, device: DeviceKind) -> Option<&DeviceSpec> {
        match device {
            DeviceKind::Cpu => self.spec.cpu.as_ref().filter(|_| self.cpu.is_some()),
            DeviceKind::Cuda => self.spec.cuda.as_ref(),
        }
    }
}

/// Creates plugins of one kernel-plugin spec.
#[derive(Clone)]
pub struct KernelPluginCreator {
    pub(crate) loaded: Arc<Loaded>,
}

impl std::fmt::Debug for KernelPluginCreator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelPluginCreator({})", self.loaded.spec.key)
    }
}

impl KernelPluginCreator {
    /// The checked spec.
    pub fn spec(&self) -> &KernelSpec {
        &self.loaded.spec
    }

    /// The CUDA program its kernels are launched from (name, source with the prelude), when
    /// the spec has a CUDA part.
    pub fn cuda_program(&self) -> Option<(&str, &str)> {
        self.loaded.spec.cuda.as_ref()?;
        Some((&self.loaded.program_name, &self.loaded.cuda_source))
    }

    /// What an engine stores to re-create this creator without the spec's files.
    pub fn package(&self) -> Arc<KernelPackage> {
        self.loaded.package.clone()
    }
}

impl PluginCreator for KernelPluginCreator {
    fn key(&self) -> PluginKey {
        self.loaded.spec.key.clone()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        self.loaded
            .spec
            .fields
            .iter()
            .map(|f| {
                let spec = match &f.default {
                    Some(d) => FieldSpec::with_default(&f.name, d.clone(), &f.doc),
                    None => FieldSpec::required(&f.name, f.ty, &f.doc),
                };
                spec.scalar()
            })
            .collect()
    }

    fn create(&self, _layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let spec = &self.loaded.spec;
        let mut ints = Vec::with_capacity(spec.fields.len());
        let mut floats = Vec::with_capacity(spec.fields.len());
        for f in &spec.fields {
            let value = fields.get(&f.name).ok_or_else(|| {
                PluginError::InvalidInput(format!("field `{}` is missing", f.name))
            })?;
            if matches!(f.ty, FieldType::I64 | FieldType::I32) {
                ints.push(value.as_i64s().and_then(|v| v.first().copied()));
                floats.push(None);
            } else {
                ints.push(None);
                floats.push(value.as_f64s().and_then(|v| v.first().copied()));
            }
        }
        Ok(Box::new(KernelPlugin {
            loaded: self.loaded.clone(),
            fields: fields.clone(),
            ints,
            floats,
            binding: Vec::new(),
            tactic: 0,
        }))
    }

    fn capabilities(&self) -> Capabilities {
        let spec = &self.loaded.spec;
        let many = |d: &Option<DeviceSpec>| d.as_ref().is_some_and(|d| d.kernels.len() > 1);
        Capabilities {
            shape_inputs: spec.inputs.iter().any(|p| p.shape_input),
            sized_outputs: false,
            tactics: many(&spec.cpu) || many(&spec.cuda),
            aliased_outputs: spec.outputs.iter().any(|o| o.alias.is_some()),
        }
    }
}

impl KernelSpec {
    /// An error unless `n` inputs are what the spec takes.
    fn check_arity(&self, n: usize) -> PluginResult<()> {
        if n == self.inputs.len() {
            Ok(())
        } else {
            Err(invalid(format!(
                "{} takes {} inputs, got {n}",
                self.key,
                self.inputs.len()
            )))
        }
    }
}

/// Highest output rank a spec may produce.
const MAX_RANK: usize = 16;

/// `dims[start..end]` with Python's rules: negative bounds count from the end, bounds past
/// either end are clamped.
fn slice<T>(dims: &[T], start: Option<i64>, end: Option<i64>) -> &[T] {
    let n = dims.len() as i64;
    let at = |b: i64| (if b < 0 { b + n } else { b }).clamp(0, n) as usize;
    let (a, b) = (start.map_or(0, at), end.map_or(dims.len(), at));
    if a < b { &dims[a..b] } else { &[] }
}

#[derive(Clone)]
struct KernelPlugin {
    loaded: Arc<Loaded>,
    fields: FieldCollection,
    ints: Vec<Option<i64>>,
    floats: Vec<Option<f64>>,
    binding: Vec<DType>,
    tactic: u32,
}

fn invalid(m: String) -> PluginError {
    PluginError::InvalidInput(m)
}

impl KernelPlugin {
    fn spec(&self) -> &KernelSpec {
        &self.loaded.spec
    }

    /// The type variables' dtypes given the inputs' dtypes.
    fn bind(&self, inputs: &[DType]) -> PluginResult<Vec<Option<DType>>> {
        let spec = self.spec();
        spec.check_arity(inputs.len())?;
        let mut binding = vec![None; spec.types.len()];
        for (port, &d) in spec.inputs.iter().zip(inputs) {
            match port.dtype {
                PortType::Fixed(want) if want != d => {
                    return Err(invalid(format!(
                        "input `{}` must be {want}, got {d}",
                        port.name
                    )));
                }
                PortType::Fixed(_) => {}
                PortType::Var(v) => {
                    let (var, allowed) = &spec.types[v];
                    if !allowed.contains(&d) {
                        return Err(invalid(format!(
                            "input `{}` is {d}; type `{var}` takes {allowed:?}",
                            port.name
                        )));
                    }
                    match binding[v] {
                        Some(b) if b != d => {
                            return Err(invalid(format!(
                                "input `{}` is {d} but another input of type `{var}` is {b}",
                                port.name
                            )));
                        }
                        _ => binding[v] = Some(d),
                    }
                }
            }
        }
        Ok(binding)
    }

    fn shapes(
        &self,
        inputs: &[ShapeExpr],
        values: &[Option<Vec<i64>>],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let spec = self.spec();
        spec.check_arity(inputs.len())?;
        let mut flat = Vec::new();
        let mut spans = Vec::with_capacity(inputs.len());
        for s in inputs {
            spans.push((flat.len(), s.len()));
            flat.extend(s.iter().cloned());
        }
        let domain = Symbolic {
            shapes: &flat,
            spans: &spans,
            values,
            fields: &self.ints,
        };
        spec.outputs
            .iter()
            .map(|port| match &port.shape {
                Some(OutShape::Like(i)) => Ok(inputs[*i].clone()),
                Some(OutShape::Dims(dims)) => {
                    let mut shape = ShapeExpr::new();
                    for d in dims {
                        match d {
                            DimEntry::One(e) => shape.push(e.eval(&domain).map_err(|e| {
                                invalid(format!("output `{}` shape: {e}", port.name))
                            })?),
                            DimEntry::Splat {
                                port: i,
                                start,
                                end,
                            } => {
                                shape.extend_from_slice(slice(&inputs[*i], *start, *end));
                            }
                        }
                    }
                    if shape.len() > MAX_RANK {
                        return Err(invalid(format!(
                            "output `{}` would have rank {} (at most {MAX_RANK})",
                            port.name,
                            shape.len()
                        )));
                    }
                    Ok(shape)
                }
                None => Err(invalid(format!("output `{}` has no shape", port.name))),
            })
            .collect()
    }

    /// The index of the bound dtypes among `device`'s combinations.
    fn combo(&self, device: &DeviceSpec) -> PluginResult<usize> {
        let spec = self.spec();
        spec.combos(device)
            .iter()
            .position(|c| *c == self.binding)
            .ok_or_else(|| {
                PluginError::Unsupported(format!(
                    "{}: no kernel for dtypes {:?} on this device",
                    spec.key, self.binding
                ))
            })
    }

    fn kernel<'d>(&self, device: &'d DeviceSpec) -> (usize, &'d Kernel) {
        let k = (self.tactic as usize)
            .checked_sub(1)
            .filter(|&k| k < device.kernels.len())
            .unwrap_or(0);
        (k, &device.kernels[k])
    }

    fn concrete<'a>(
        &'a self,
        shapes: &'a [&'a [i64]],
        values: &'a [Option<Vec<i64>>],
        threads: Option<i64>,
    ) -> Concrete<'a> {
        Concrete {
            shapes,
            values,
            fields: &self.ints,
            threads,
        }
    }

    fn run_cpu(&self, launch: CpuLaunch<'_, '_>) -> PluginResult<()> {
        let unsupported =
            || PluginError::Unsupported(format!("{}: no CPU kernel", self.spec().key));
        let device = self
            .loaded
            .device(DeviceKind::Cpu)
            .ok_or_else(unsupported)?;
        let object = self.loaded.cpu.as_ref().ok_or_else(unsupported)?;
        let c = self.combo(device)?;
        let (k, kernel) = self.kernel(device);
        let entry = object.entry(k, c).ok_or_else(unsupported)?;
        let values = self.host_values(launch.inputs.iter().map(|t| (&t.desc, t.data)))?;
        let shapes: Vec<&[i64]> = launch
            .inputs
            .iter()
            .map(|t| t.desc.shape.as_slice())
            .chain(launch.outputs.iter().map(|t| t.desc.shape.as_slice()))
            .collect();
        let threads = i64::try_from(launch.threads).unwrap_or(1);
        let domain = self.concrete(&shapes, &values, Some(threads));
        let mut scalars: Vec<[u8; 8]> = Vec::with_capacity(kernel.args.len());
        for arg in &kernel.args {
            scalars.push(self.scalar(arg, &domain)?);
        }
        let n_in = launch.inputs.len();
        let mut pointers: Vec<*mut c_void> = Vec::with_capacity(kernel.args.len());
        for (arg, scalar) in kernel.args.iter().zip(scalars.iter_mut()) {
            pointers.push(match arg {
                Arg::Port(p) if *p < n_in => launch.inputs[*p].data.as_ptr().cast_mut().cast(),
                Arg::Port(p) => launch
                    .outputs
                    .get_mut(p - n_in)
                    .ok_or_else(|| invalid(format!("output {} is missing", p - n_in)))?
                    .data
                    .as_mut_ptr()
                    .cast(),
                _ => scalar.as_mut_ptr().cast(),
            });
        }
        // SAFETY: `entry` was generated for exactly these arguments (one address per
        // argument: tensors' data, scalars' storage, both alive for the call); the kernel's
        // own accesses are the spec author's contract, as a plugin library's are.
        unsafe { entry(pointers.as_ptr()) };
        Ok(())
    }

    fn host_values<'d>(
        &self,
        inputs: impl Iterator<Item = (&'d TensorDesc, &'d [u8])>,
    ) -> PluginResult<Vec<Option<Vec<i64>>>> {
        inputs
            .zip(&self.spec().inputs)
            .map(|((desc, data), port)| {
                if !port.shape_input {
                    return Ok(None);
                }
                let v = ShapeValues::from_bytes(desc.dtype, data)?;
                Ok(v.ints().map(<[i64]>::to_vec))
            })
            .collect()
    }

    /// A non-tensor argument's bytes, little endian; tensors get zeros (their address is
    /// passed instead).
    fn scalar(&self, arg: &Arg, domain: &Concrete<'_>) -> PluginResult<[u8; 8]> {
        let mut out = [0u8; 8];
        match arg {
            Arg::Port(_) => {}
            Arg::Float(i, FieldType::F64) => {
                out = self.floats[*i].unwrap_or(0.0).to_le_bytes();
            }
            Arg::Float(i, _) => {
                out[..4].copy_from_slice(&(self.floats[*i].unwrap_or(0.0) as f32).to_le_bytes());
            }
            Arg::Int(e) => {
                out = e
                    .eval(domain)
                    .map_err(|m| invalid(format!("{}: argument: {m}", self.spec().key)))?
                    .to_le_bytes();
            }
        }
        Ok(out)
    }

    fn run_cuda(&self, launch: CudaLaunch<'_>) -> PluginResult<()> {
        let spec = self.spec();
        let device = self
            .loaded
            .device(DeviceKind::Cuda)
            .ok_or_else(|| PluginError::Unsupported(format!("{}: no CUDA kernel", spec.key)))?;
        let c = self.combo(device)?;
        let combo = &spec.combos(device)[c];
        let (_, kernel) = self.kernel(device);
        let values: Vec<Option<Vec<i64>>> = spec
            .inputs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.shape_input
                    .then(|| {
                        launch
                            .shape_values
                            .get(i)
                            .and_then(|v| v.ints())
                            .map(<[i64]>::to_vec)
                    })
                    .flatten()
            })
            .collect();
        let shapes: Vec<&[i64]> = launch
            .inputs
            .iter()
            .chain(launch.outputs)
            .map(|t| t.desc.shape.as_slice())
            .collect();
        let domain = self.concrete(&shapes, &values, None);
        let dims = |exprs: &[super::expr::Expr], what: &str| -> PluginResult<[u32; 3]> {
            let mut out = [1u32; 3];
            for (o, e) in out.iter_mut().zip(exprs) {
                let v = e
                    .eval(&domain)
                    .map_err(|m| invalid(format!("{}: {what}: {m}", spec.key)))?;
                *o = u32::try_from(v).map_err(|_| {
                    invalid(format!(
                        "{}: {what} dimension {v} is not a 32-bit count",
                        spec.key
                    ))
                })?;
            }
            Ok(out)
        };
        let grid = dims(&kernel.grid, "grid")?;
        let block = dims(&kernel.block, "block")?;
        let shared_bytes = match &kernel.shared_bytes {
            None => 0,
            Some(e) => {
                let v = e
                    .eval(&domain)
                    .map_err(|m| invalid(format!("{}: shared_bytes: {m}", spec.key)))?;
                u32::try_from(v)
                    .map_err(|_| invalid(format!("{}: shared_bytes {v} out of range", spec.key)))?
            }
        };
        let n_in = launch.inputs.len();
        let mut storage: Vec<Vec<u8>> = Vec::with_capacity(kernel.args.len());
        for arg in &kernel.args {
            storage.push(match arg {
                Arg::Port(p) => {
                    let t = if *p < n_in {
                        &launch.inputs[*p]
                    } else {
                        launch
                            .outputs
                            .get(p - n_in)
                            .ok_or_else(|| invalid(format!("output {} is missing", p - n_in)))?
                    };
                    t.ptr.to_le_bytes().to_vec()
                }
                Arg::Float(_, FieldType::F64) | Arg::Int(_) => self.scalar(arg, &domain)?.to_vec(),
                Arg::Float(..) => self.scalar(arg, &domain)?[..4].to_vec(),
            });
        }
        let args: Vec<&[u8]> = storage.iter().map(Vec::as_slice).collect();
        let name = spec.kernel_name(kernel, combo);
        launch.runtime.launch(&KernelLaunch {
            program: CudaProgram {
                name: &self.loaded.program_name,
                source: &self.loaded.cuda_source,
            },
            kernel: &name,
            grid,
            block,
            shared_bytes,
            args: &args,
        })
    }
}

impl Plugin for KernelPlugin {
    fn num_outputs(&self) -> usize {
        self.spec().outputs.len()
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        let binding = self.bind(inputs)?;
        self.spec()
            .outputs
            .iter()
            .map(|p| match p.dtype {
                PortType::Fixed(d) => Ok(d),
                PortType::Var(v) => binding[v]
                    .ok_or_else(|| invalid(format!("output `{}`: its type is not bound", p.name))),
            })
            .collect()
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.shapes(inputs, &vec![None; inputs.len()])
    }

    fn shape_inputs(&self) -> Vec<usize> {
        self.spec()
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.shape_input)
            .map(|(i, _)| i)
            .collect()
    }

    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let known: Vec<Option<Vec<i64>>> = (0..inputs.len())
            .map(|i| {
                values
                    .get(i)
                    .and_then(ShapeValues::ints)
                    .map(<[i64]>::to_vec)
            })
            .collect();
        self.shapes(inputs, &known)
    }

    fn aliased_input(&self, output: usize) -> Option<usize> {
        self.spec().outputs.get(output)?.alias
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        let spec = self.spec();
        let Some(dev) = self.loaded.device(device) else {
            return false;
        };
        let ports: Vec<_> = spec.inputs.iter().chain(&spec.outputs).collect();
        if num_inputs != spec.inputs.len() || pos >= ports.len() || io.len() <= pos {
            return false;
        }
        if io[pos].format != TensorFormat::Linear {
            return false;
        }
        let want = io[pos].dtype;
        match ports[pos].dtype {
            PortType::Fixed(d) => d == want,
            PortType::Var(v) => {
                dev.types[v].contains(&want)
                    && io[..pos]
                        .iter()
                        .zip(&ports)
                        .all(|(d, p)| p.dtype != PortType::Var(v) || d.dtype == want)
            }
        }
    }

    fn configure(&mut self, inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> PluginResult<()> {
        let dtypes: Vec<DType> = inputs.iter().map(|d| d.dtype).collect();
        let binding = self.bind(&dtypes)?;
        self.binding = binding
            .into_iter()
            .enumerate()
            .map(|(v, b)| {
                b.ok_or_else(|| invalid(format!("type `{}` is not bound", self.spec().types[v].0)))
            })
            .collect::<PluginResult<_>>()?;
        Ok(())
    }

    fn tactics(
        &self,
        _inputs: &[TensorDesc],
        _outputs: &[TensorDesc],
        device: DeviceKind,
    ) -> Vec<Tactic> {
        match self.loaded.device(device) {
            Some(d) if d.kernels.len() > 1 => d
                .kernels
                .iter()
                .enumerate()
                .map(|(k, kernel)| Tactic::new(k as u32 + 1, &kernel.tactic))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        let spec = self.spec();
        let most = [&spec.cpu, &spec.cuda]
            .iter()
            .filter_map(|d| d.as_ref().map(|d| d.kernels.len()))
            .max()
            .unwrap_or(0);
        if tactic as usize > most {
            return Err(invalid(format!(
                "{}: no tactic {tactic} (it has {most})",
                spec.key
            )));
        }
        self.tactic = tactic;
        Ok(())
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        match launch {
            Launch::Cpu(l) => self.run_cpu(l),
            Launch::Cuda(l) => self.run_cuda(l),
        }
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.fields.clone()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
