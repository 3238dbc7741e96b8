//! N-d convolution (1-D to 3-D) with groups, strides, dilations and padding: im2col per
//! group, then one gemm per group and image.

use rayon::prelude::*;
use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::{DType, DimExpr, shape_of_sizes, shape_values};
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::conv_channels::{self, conv_channels};
use super::conv_direct::conv_direct;
use super::conv_packed::conv_packed;
use super::conv_phases::Phases;
use super::conv_regions::Regions;
use super::conv_taps::live_taps;
use super::conv_winograd::Winograd;
use crate::dispatch::with_float;
use crate::linalg::{
    Epilogue, GemmElem, MatRef, PackedLhs, PackedRhs, Window, WindowParams, gemm_into, im2col,
    via_f32,
};
use crate::scratch::with_scratch;
use crate::tensor_access::{check_bias, check_output, elems, elems_mut, weighted_inputs};

const WHAT: &str = "Convolution";

struct ConvKernel {
    layer: Convolution,
    dtype: DType,
    epilogue: Epilogue,
    /// Transformed weights for the Winograd path, when the layer qualifies.
    winograd: Option<Winograd>,
    /// f32 weights packed for the AVX-512 product, when the CPU has it.
    packed: Option<PackedLhs>,
    /// f32 weights packed with the output channels along the lanes, for layers whose
    /// images have few output positions ([`conv_channels`]).
    channels: Option<PackedRhs>,
    /// The weights cut to the taps that read the input, when some taps read only padding
    /// (`layer` is then the cut layer; see [`live_taps`]).
    cut: Option<Tensor>,
    /// The layer cut into rectangles of outputs with the taps they read, for a dilated
    /// layer whose windows read padding for many outputs (`packed` is then not built).
    regions: Option<Regions>,
    /// The undilated layer that runs on the phases of a dilated layer's images, when that
    /// takes Winograd ([`Phases`]; no other path is then prepared).
    phases: Option<(Phases, Box<ConvKernel>)>,
}

pub(super) fn prepare(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(build(layer, inputs)?))
}

/// The kernel of `layer` for `inputs`, with whatever its known weights and dims allow
/// prepared.
fn build(layer: &Convolution, inputs: &[InferInput<'_>]) -> Result<ConvKernel, String> {
    let epilogue = Epilogue::of(layer.activation)
        .ok_or_else(|| format!("{WHAT}: cannot fuse {:?}", layer.activation))?;
    let given = inputs.get(1).and_then(|w| w.value);
    let spatial = inputs[0].shape.get(2..).and_then(known);
    let cut = match (inputs[0].dtype, given, &spatial) {
        (DType::F32, Some(w), Some(spatial)) => live_taps(layer, spatial, w),
        _ => None,
    };
    let (layer, weights) = match &cut {
        Some((layer, w)) => (layer, Some(w)),
        None => (layer, given),
    };
    let phases = match (inputs[0].dtype, weights, &spatial) {
        (DType::F32, Some(w), Some(spatial)) => phased(layer, inputs, w, spatial)?,
        _ => None,
    };
    let weights = weights.filter(|_| phases.is_none());
    let winograd = match (inputs[0].dtype, weights) {
        (DType::F32, Some(w)) => {
            let channels = w.shape().get(1).copied().unwrap_or(0);
            let out_channels = w.shape().first().copied().unwrap_or(0);
            let large = large_image(layer, &inputs[0], channels, out_channels);
            let sides = output_sides(layer, &inputs[0]);
            Winograd::prepare(layer, w, large, sides)
        }
        _ => None,
    };
    let weights = match inputs[0].dtype {
        DType::F32 => weights,
        _ => None,
    };
    let channels = match winograd {
        Some(_) => None,
        None => weights.and_then(|w| pack_channels(layer, &inputs[0], w)),
    };
    let dims = inputs[0].shape.get(1..).and_then(known);
    let regions = match (weights, &channels, dims) {
        (Some(w), None, Some(dims)) => Regions::new(layer, &dims, w),
        _ => None,
    };
    let packed = match (weights, &channels, &regions) {
        (Some(w), None, None) => pack(layer, w),
        _ => None,
    };
    Ok(ConvKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
        epilogue,
        winograd,
        packed,
        channels,
        cut: cut.map(|(_, w)| w),
        regions,
        phases,
    })
}

/// `layer` on images of `spatial` dims as an undilated layer on their phases, when it
/// splits into phases and the undilated layer runs through Winograd.
fn phased(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
    w: &Tensor,
    spatial: &[usize],
) -> Result<Option<(Phases, Box<ConvKernel>)>, String> {
    let (Some((phases, inner)), [x, _, rest @ ..]) = (Phases::of(layer, spatial), inputs) else {
        return Ok(None);
    };
    let mut shape = x.shape.to_vec();
    for (dim, side) in shape[2..].iter_mut().zip(phases.sides(spatial)) {
        *dim = DimExpr::Const(side as i64);
    }
    let dims = shape_of_sizes(w.shape());
    let mut given = vec![
        InferInput {
            shape: &shape,
            ..*x
        },
        InferInput {
            dtype: DType::F32,
            shape: &dims,
            value: Some(w),
        },
    ];
    given.extend(rest.iter().map(|i| InferInput { ..*i }));
    let kernel = build(&inner, &given)?;
    Ok(kernel
        .winograd
        .is_some()
        .then(|| (phases, Box::new(kernel))))
}

/// `dims` when all are known at build time.
fn known(dims: &[DimExpr]) -> Option<Vec<usize>> {
    shape_values(dims)?
        .into_iter()
        .map(|v| usize::try_from(v).ok())
        .collect()
}

/// The f32 weights `w` (`[M, C/groups, k…]`) packed for [`conv_packed`], unless the layer
/// is depthwise (the direct path) or the CPU lacks AVX-512.
fn pack(layer: &Convolution, w: &Tensor) -> Option<PackedLhs> {
    let groups = usize::try_from(layer.groups).ok().filter(|&g| g > 0)?;
    let (&out_channels, rest) = w.shape().split_first()?;
    let depth: usize = rest.iter().product();
    if rest.first() == Some(&1) && groups > 1 || out_channels % groups != 0 {
        return None;
    }
    PackedLhs::new(
        w.as_slice::<f32>().ok()?,
        groups,
        out_channels / groups,
        depth,
    )
}

/// The f32 weights `w` packed for [`conv_channels`] when `x`'s dims are known and its
/// images have few output positions (the layer's shape is then fixed, so the
/// position-vectorised weights are not packed as well).
fn pack_channels(layer: &Convolution, x: &InferInput<'_>, w: &Tensor) -> Option<PackedRhs> {
    let dims = known(x.shape)?;
    let geom = ConvGeom::new(layer, &dims, w.shape()).ok()?;
    let outputs = geom.window.output_len();
    if !conv_channels::takes(geom.groups, geom.out_channels, outputs) {
        return None;
    }
    let taps = geom.channels * geom.window.kernel_len();
    conv_channels::pack(w.as_slice::<f32>().ok()?, geom.out_channels, taps)
}

/// Outputs per side from which a 3×3 layer with [`WIDE_CHANNELS`] input and output channels
/// takes Winograd F(4×4, 3×3) instead of F(2×2): its transforms cost more per channel and
/// its weights are four times the layer's, which pays once the products dominate (measured
/// on one thread: 64 → 64…128 → 128 channels on 28×28 outputs 5–16 % faster, 128 → 32 on
/// 28×28 6 % slower, every 14×14 layer slower).
const LARGE_OUTPUT: i64 = 28;

/// Input and output channels from which F(4×4, 3×3) pays on images of [`LARGE_OUTPUT`];
/// with fewer output channels it takes twice that side and twice these input channels
/// (densenet's 128 → 32 layers gain from 56×56 on), and with fewer input channels four
/// times the side.
const WIDE_CHANNELS: usize = 64;

/// True when the 2-D input `x` has known spatial dims large enough for F(4×4, 3×3) with
/// `channels` input and `out_channels` output channels under `layer`'s padding (stride 1,
/// 3×3).
fn large_image(
    layer: &Convolution,
    x: &InferInput<'_>,
    channels: usize,
    out_channels: usize,
) -> bool {
    let least = if channels >= WIDE_CHANNELS && out_channels >= WIDE_CHANNELS {
        LARGE_OUTPUT
    } else if channels >= 2 * WIDE_CHANNELS {
        2 * LARGE_OUTPUT
    } else {
        4 * LARGE_OUTPUT
    };
    output_sides(layer, x).is_some_and(|sides| sides.iter().all(|&d| d as i64 >= least))
}

/// The output sides of a 3×3 stride-1 `layer` over the 2-D input `x`, when its spatial dims
/// are known.
fn output_sides(layer: &Convolution, x: &InferInput<'_>) -> Option<[usize; 2]> {
    let [_, _, h, w] = x.shape else {
        return None;
    };
    let side = |d: &DimExpr, i: usize| {
        let pads = layer
            .pads_begin
            .get(i)?
            .checked_add(*layer.pads_end.get(i)?)?;
        let side = d.as_const()?.checked_add(pads)?.checked_sub(2)?;
        usize::try_from(side).ok().filter(|&s| s > 0)
    };
    Some([side(h, 0)?, side(w, 1)?])
}

/// Sizes of one convolution call.
pub(super) struct ConvGeom {
    /// Images.
    pub(super) batch: usize,
    /// Input channels.
    pub(super) channels: usize,
    /// Output channels.
    pub(super) out_channels: usize,
    /// Groups.
    pub(super) groups: usize,
    /// The sliding window over the spatial dims.
    pub(super) window: Window,
}

impl ConvGeom {
    pub(super) fn new(layer: &Convolution, x: &[usize], w: &[usize]) -> Result<ConvGeom, String> {
        if x.len() < 3 || w.len() != x.len() {
            return Err(format!(
                "{WHAT} needs x [N,C,spatial…] and w of the same rank, got {x:?} and {w:?}"
            ));
        }
        let groups = usize::try_from(layer.groups)
            .ok()
            .filter(|&g| g > 0)
            .ok_or_else(|| format!("{WHAT}: groups {} must be positive", layer.groups))?;
        let (out_channels, group_channels) = (w[0], w[1]);
        if out_channels % groups != 0 || x[1] != group_channels * groups {
            return Err(format!(
                "{WHAT}: x {x:?} and w {w:?} do not agree with {groups} groups"
            ));
        }
        let kernel: Vec<i64> = w[2..].iter().map(|&k| k as i64).collect();
        let params = WindowParams {
            kernel: &kernel,
            strides: &layer.strides,
            dilations: &layer.dilations,
            pads_begin: &layer.pads_begin,
            pads_end: &layer.pads_end,
            ceil_mode: false,
        };
        let window = Window::new(&x[2..], &params).map_err(|e| format!("{WHAT}: {e}"))?;
        Ok(ConvGeom {
            batch: x[0],
            channels: x[1],
            out_channels,
            groups,
            window,
        })
    }

    pub(super) fn output_shape(&self, spatial: usize) -> Vec<usize> {
        let mut shape = vec![self.batch, self.out_channels];
        shape.extend_from_slice(self.window.output_dims(spatial));
        shape
    }
}

impl Kernel for ConvKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let mut cut = Vec::new();
        if let Some(w) = &self.cut {
            cut.extend(inputs.iter().copied());
            *cut.get_mut(1).ok_or(WHAT)? = w;
        }
        let inputs = if self.cut.is_some() { &cut[..] } else { inputs };
        if let Some((phases, inner)) = &self.phases
            && inputs[0].dtype() == DType::F32
        {
            return run_phased(phases, inner, inputs, outputs);
        }
        if self.convolve_packed(inputs, outputs)? {
            return Ok(());
        }
        let [x, w, b, residual] = inputs else {
            return self.convolve(inputs, outputs, self.epilogue);
        };
        self.convolve(&[x, w, b], outputs, Epilogue::Identity)?;
        let out = outputs.first_mut().ok_or(WHAT)?;
        if residual.shape() != out.shape() {
            return Err(format!(
                "{WHAT}: residual {residual} does not match output {out}"
            ));
        }
        with_float!(self.dtype, WHAT, T => {
            self.epilogue.add_residual::<T>(elems_mut(out)?, elems(residual)?);
            Ok(())
        })
    }
}

/// The dilated layer of `inputs` (x, w, and a bias and residual when given) run as `inner`
/// on the phases of its images and outputs.
fn run_phased(
    phases: &Phases,
    inner: &ConvKernel,
    inputs: &[&Tensor],
    outputs: &mut [Tensor],
) -> Result<(), String> {
    let (x, out) = (
        inputs.first().ok_or(WHAT)?,
        outputs.first_mut().ok_or(WHAT)?,
    );
    let split = phases.split(x)?;
    let residual = inputs.get(3).map(|r| phases.split(r)).transpose()?;
    let mut given = vec![&split];
    given.extend(inputs.get(1..3).unwrap_or(&inputs[1..]));
    given.extend(residual.as_ref());
    let mut result = [Tensor::zeros(DType::F32, &phases.of_output(out.shape())?)];
    inner.execute(&given, &mut result)?;
    phases.merge(&result[0], out)
}

impl ConvKernel {
    /// The f32 convolution through the packed product, with the residual (a fourth input)
    /// fused; `false` when another path takes the layer (no packed weights, depthwise,
    /// Winograd).
    fn convolve_packed(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<bool, String> {
        if self.packed.is_none() && self.channels.is_none() && self.regions.is_none() {
            return Ok(false);
        }
        let (main, residual) = match inputs {
            [x, w, b, r] => (&[*x, *w, *b][..], Some(*r)),
            _ => (inputs, None),
        };
        let (x, w, bias) = weighted_inputs(WHAT, main, outputs, self.dtype)?;
        let geom = ConvGeom::new(&self.layer, x.shape(), w.shape())?;
        let direct = geom.groups > 1 && geom.channels == geom.groups;
        let channels = self.channels.is_some()
            && conv_channels::takes(geom.groups, geom.out_channels, geom.window.output_len());
        if self.dtype != DType::F32
            || direct
            || self.winograd.as_ref().is_some_and(|w| w.applies(&geom))
        {
            return Ok(false);
        }
        check_bias(WHAT, bias, geom.out_channels)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &geom.output_shape(x.rank() - 2))?;
        if let Some(r) = residual
            && r.shape() != out.shape()
        {
            return Err(format!("{WHAT}: residual {r} does not match output {out}"));
        }
        let bias = bias.map(elems).transpose()?;
        let residual = residual.map(elems).transpose()?;
        if let Some(regions) = self.regions.as_ref().filter(|r| r.applies(&geom)) {
            let (x, out) = (elems(x)?, elems_mut(out)?);
            regions.run(&geom, x, bias, residual, self.epilogue, out)?;
            return Ok(true);
        }
        if let Some(rhs) = self.channels.as_ref().filter(|_| channels) {
            let (x, out) = (elems(x)?, elems_mut(out)?);
            conv_channels(&geom, x, rhs, bias, residual, self.epilogue, out)?;
            return Ok(true);
        }
        let Some(packed) = &self.packed else {
            return Ok(false);
        };
        conv_packed(
            &geom,
            elems(x)?,
            packed,
            bias,
            residual,
            self.epilogue,
            elems_mut(out)?,
        )?;
        Ok(true)
    }

    /// The convolution of `inputs` (x, w and an optional bias) into `outputs[0]`, with
    /// `epilogue` applied to each output tile.
    fn convolve(
        &self,
        inputs: &[&Tensor],
        outputs: &mut [Tensor],
        epilogue: Epilogue,
    ) -> Result<(), String> {
        let (x, w, bias) = weighted_inputs(WHAT, inputs, outputs, self.dtype)?;
        let geom = ConvGeom::new(&self.layer, x.shape(), w.shape())?;
        check_bias(WHAT, bias, geom.out_channels)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &geom.output_shape(x.rank() - 2))?;
        if geom.groups > 1 && geom.channels == geom.groups {
            return with_float!(self.dtype, WHAT, T => {
                let bias = bias.map(elems::<T>).transpose()?;
                conv_direct::<T>(&geom, elems(x)?, elems(w)?, bias, epilogue, elems_mut(out)?);
                Ok(())
            });
        }
        match self.dtype {
            DType::F32 if self.winograd.as_ref().is_some_and(|w| w.applies(&geom)) => {
                let winograd = self.winograd.as_ref().ok_or(WHAT)?;
                let bias = bias.map(elems).transpose()?;
                winograd.run(&geom, elems(x)?, bias, epilogue, elems_mut(out)?)
            }
            DType::F32 => conv::<f32>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                epilogue,
                elems_mut(out)?,
            ),
            DType::F64 => conv::<f64>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                epilogue,
                elems_mut(out)?,
            ),
            DType::F16 => conv::<half::f16>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                epilogue,
                elems_mut(out)?,
            ),
            DType::BF16 => {
                let bias: Vec<f32> = match bias {
                    Some(b) => elems::<half::bf16>(b)?.iter().map(|v| v.to_f32()).collect(),
                    None => Vec::new(),
                };
                let bias = (!bias.is_empty()).then_some(bias.as_slice());
                via_f32([elems(x)?, elems(w)?], elems_mut(out)?, |[x, w], out| {
                    conv::<f32>(&geom, x, w, bias, epilogue, out)
                })
            }
            other => Err(format!("{WHAT} has no CPU kernel for {other}")),
        }
    }
}

/// Bytes of im2col tile one task aims for: it stays in L2 while the product reads it.
const TILE_BYTES: usize = 512 * 1024;

/// Runs the convolution as tiles of the output: each task takes one (image, group), a range
/// of output positions (columns) and a range of output channels (rows), unfolds its columns
/// with im2col into per-thread scratch and multiplies them with a single-threaded gemm.
/// When one column tile covers the image and there are fewer (image, group) pairs than
/// threads, each pair is one task whose gemm is split over the threads instead; otherwise
/// rows are split when there are too few column tiles. (With as many pairs as threads, tasks
/// of half an image's rows beat the gemm split over threads: `Conv` 112 → 672 with SiLU on
/// two 14×14 images, two threads of a Zen 3, 0.80–0.92 → 0.52–0.69 ms.)
fn conv<G: GemmElem>(
    geom: &ConvGeom,
    x: &[G],
    w: &[G],
    bias: Option<&[G]>,
    epilogue: Epilogue,
    out: &mut [G],
) -> Result<(), String> {
    let win = &geom.window;
    let groups = geom.groups;
    let (cg, mg) = (geom.channels / groups, geom.out_channels / groups);
    let (plane, outputs, taps) = (win.input_len(), win.output_len(), cg * win.kernel_len());
    if out.len() != geom.batch * geom.out_channels * outputs {
        return Err(format!("{WHAT}: the output has {} elements", out.len()));
    }
    if mg * outputs == 0 {
        return Ok(());
    }
    let pointwise = win.is_pointwise();
    let width = (TILE_BYTES / (taps * size_of::<G>()).max(1))
        .max(64)
        .next_multiple_of(16)
        .min(outputs);
    let col_tiles = outputs.div_ceil(width);
    let threads = rayon::current_num_threads();
    let wide = col_tiles == 1 && geom.batch * groups < threads;
    let mut row_tiles = 1;
    while !wide && geom.batch * groups * col_tiles * row_tiles < 2 * threads && mg >= 32 * row_tiles
    {
        row_tiles *= 2;
    }
    let height = mg.div_ceil(row_tiles);
    let per_image_group = col_tiles * row_tiles;
    let tasks = geom.batch * groups * per_image_group;
    let dst = SendPtr(out.as_mut_ptr());
    let task = |t: usize, parallel: bool| -> Result<(), String> {
        let (image_group, rest) = (t / per_image_group, t % per_image_group);
        let (image, group) = (image_group / groups, image_group % groups);
        let (j0, m0) = ((rest / row_tiles) * width, (rest % row_tiles) * height);
        let (n, m) = (width.min(outputs - j0), height.min(mg - m0));
        if m == 0 {
            return Ok(());
        }
        let start = (image * geom.channels + group * cg) * plane;
        let xg = &x[start..start + cg * plane];
        let first_row = group * mg + m0;
        let lhs = MatRef::row_major(&w[first_row * taps..(first_row + m) * taps], m, taps);
        let dst = dst
            .get()
            .wrapping_add((image * geom.out_channels + first_row) * outputs + j0);
        if let Some(bias) = bias {
            for (i, &b) in bias[first_row..first_row + m].iter().enumerate() {
                // SAFETY: row `i` of this task's tile lies inside `out` (its row, channel and
                // columns are in range) and no other task touches it.
                unsafe { std::slice::from_raw_parts_mut(dst.add(i * outputs), n) }.fill(b);
            }
        }
        let product = |rhs: MatRef<'_, G>| {
            // SAFETY: as above: the `m × n` tile at `dst` with row stride `outputs` is this
            // task's alone.
            unsafe { gemm_into(dst, outputs, lhs, rhs, bias.is_some(), parallel) }?;
            if epilogue != Epilogue::Identity {
                for i in 0..m {
                    // SAFETY: as above.
                    G::activate(epilogue, unsafe {
                        std::slice::from_raw_parts_mut(dst.add(i * outputs), n)
                    });
                }
            }
            Ok(())
        };
        if pointwise {
            return product(MatRef {
                data: &xg[j0..],
                rows: cg,
                cols: n,
                row_stride: outputs,
                col_stride: 1,
            });
        }
        with_scratch(taps * n, |col: &mut [G]| {
            if parallel {
                col.par_chunks_mut(win.kernel_len() * n)
                    .zip(xg.par_chunks(plane))
                    .for_each(|(rows, src)| im2col(src, 1, win, G::ZERO, j0..j0 + n, rows));
            } else {
                im2col(xg, cg, win, G::ZERO, j0..j0 + n, col);
            }
            product(MatRef::row_major(col, taps, n))
        })
    };
    if wide {
        (0..tasks).try_for_each(|t| task(t, true))
    } else if tasks > 1 && threads > 1 {
        (0..tasks).into_par_iter().try_for_each(|t| task(t, false))
    } else {
        (0..tasks).try_for_each(|t| task(t, false))
    }
}

/// The output's base pointer, shared by tasks that write disjoint tiles.
#[derive(Clone, Copy)]
pub(super) struct SendPtr<T>(pub(super) *mut T);

impl<T> SendPtr<T> {
    /// The pointer.
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the pointer is only used to write tiles that no two tasks share.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}
