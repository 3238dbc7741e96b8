//! 1-D and 2-D convolution (1-D runs as 2-D with one row). Depthwise convolutions (one
//! input channel per group) run a direct kernel with bias and activation fused: a tiled one
//! (`depthwise`) for square 3×3, 5×5 and 7×7 windows at stride 1 or 2, a thread per output
//! otherwise. The rest
//! are GEMMs on cuBLAS, one strided-batched GEMM per group over the images: 1×1 stride-1
//! unpadded convolutions multiply the input as it is, others gather it first (im2col,
//! scratch from the caching allocator, at most [`COL_BYTES`] per chunk of images; 16-bit
//! GEMMs get their reduction padded to a multiple of 8, constant weights repacked once).
//! Ungrouped convolutions with few output positions per image (at most [`WIDE_HW`]) over
//! several images gather every image, 1×1 ones too, into one `[rows, images·positions]`
//! matrix and run a single wide GEMM per chunk, whose product the epilogue transposes back
//! to NCHW while it adds the bias, the residual and the activation. Otherwise a bias, a
//! residual (the optional fourth input, added before the activation) or an activation runs
//! as one in-place epilogue pass; a depthwise convolution with a residual applies its
//! activation in that pass too. Weights and bias are read from the inputs (the execution
//! context keeps constants on the device).

use std::sync::{Arc, Mutex};

use torchtrt_core::ChannelsLast;
use torchtrt_core::layers::{Convolution, InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::conv_cuda::CONV;
use super::conv_tactic::{Tactic, Tactics};
use super::depthwise::Tiling;
use super::depthwise_nhwc::{self, DepthwiseNhwc, Run};
use super::epilogue::Epilogue;
use super::im2col::{Gather, Im2col};
use super::implicit_gemm::{self, ImplicitGemm, Problem};
use super::matmul::{BlasScope, shared_blas};
use super::operands::{Weights, arg_i32, dims, expect_dtype, expect_inputs, grid_for};
use super::prelude::dtype_suffix;
use super::{DeviceKernel, PrepareCtx};
use crate::blas::{BatchStrides, Blas, Gemm, GemmType};
use crate::blas_lt::Fused;
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Convolution";
/// The most im2col scratch one chunk of images may take.
const COL_BYTES: usize = 256 << 20;
const THREADS: u32 = 256;
/// Ungrouped convolutions with at most this many output positions per image, over several
/// images, run one wide GEMM per chunk of images instead of one per image.
const WIDE_HW: usize = 256;

/// Launch geometry of the direct kernels (a thread per output): blocks of `(positions,
/// planes)` threads, [`THREADS`] in all, positions along x (`len` below 2^31), planes along
/// y (at most 65 535 blocks, kernels loop), so that small planes share a block.
fn direct_grid(len: usize, planes: usize) -> ((u32, u32, u32), (u32, u32, u32)) {
    let tx = (len.next_power_of_two() as u32).clamp(32, THREADS);
    let ty = THREADS / tx;
    let x = len.div_ceil(tx as usize).max(1) as u32;
    let y = planes.div_ceil(ty as usize).clamp(1, 65_535) as u32;
    ((x, y, 1), (tx, ty, 1))
}

/// Window parameters as 2-D `[h, w]` pairs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    stride: [usize; 2],
    /// Padding at the start of each dim.
    pad: [usize; 2],
    /// Padding at the end of each dim.
    pad_end: [usize; 2],
    dilation: [usize; 2],
}

struct ConvKernel {
    dtype: DType,
    /// Input, output and residual are `[N, H, W, C]` ([`Convolution::channels_last`]); only
    /// the implicit GEMM runs such a layer.
    channels_last: bool,
    ty: GemmType,
    groups: usize,
    spatial: usize,
    geo: Geometry,
    epilogue: Epilogue,
    blas: Arc<Mutex<Blas>>,
    im2col: Im2col,
    finish: Function,
    direct: Function,
    depthwise: Function,
    /// Constant weights repacked at prepare time (see `packed_rows`); the others are read
    /// from the input.
    packed: Option<Weights>,
    /// Rows of each group's packed weight matrix: `Cg·KH·KW` rounded up to a multiple of 8
    /// (zeros appended) for 16-bit GEMMs that go through im2col, so the operands stay
    /// aligned for tensor cores; the im2col rows are padded to match.
    packed_rows: Option<usize>,
    /// The tensor-core kernel, where it applies (`implicit_gemm`).
    implicit: Option<ImplicitGemm>,
    /// The channels-last depthwise kernel, for such a layer.
    nhwc_depthwise: Option<DepthwiseNhwc>,
    /// Which of the implicit GEMM and im2col + cuBLAS runs each input shape.
    tactics: Tactics,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Convolution(l) = layer else {
        return None;
    };
    let dtype = inputs.first()?.dtype;
    let suffix = dtype_suffix(dtype)?;
    let ty = ctx.gemm_type(dtype)?;
    let spatial = inputs[0].shape.len().checked_sub(2)?;
    if !(1..=2).contains(&spatial) || inputs.iter().any(|i| i.dtype != dtype) {
        return None;
    }
    let epilogue = Epilogue::new(l.activation)?;
    let geo = geometry(l, spatial)?;
    if l.channels_last
        && channels_last(l, inputs, ctx.device.compute_capability()) == ChannelsLast::No
    {
        return None;
    }
    let packed_rows = padded_rows(l, inputs, &geo, ty);
    Some((|| {
        let f = |name: &str| {
            ctx.programs
                .function(&CONV.source(), name)
                .map_err(|e| format!("{WHAT}: loading {name}: {e}"))
        };
        Ok(Box::new(ConvKernel {
            dtype,
            channels_last: l.channels_last,
            ty,
            groups: usize::try_from(l.groups)
                .map_err(|_| format!("{WHAT}: groups {}", l.groups))?,
            spatial,
            geo,
            epilogue,
            blas: shared_blas(ctx.device)?,
            im2col: Im2col::load(ctx, ty.size())?,
            finish: f(&format!("conv_epilogue_{suffix}"))?,
            direct: f(&format!("conv_direct_{suffix}"))?,
            depthwise: f(&format!("conv_depthwise_{suffix}"))?,
            packed: packed_rows
                .map(|k8| upload_padded(ctx, inputs, k8))
                .transpose()?,
            packed_rows,
            implicit: ImplicitGemm::prepare(ctx, dtype, l.groups, inputs[1].value, epilogue)
                .transpose()?,
            nhwc_depthwise: match l.channels_last {
                true => DepthwiseNhwc::prepare(l, inputs, epilogue, ctx).transpose()?,
                false => None,
            },
            tactics: Tactics::new(ctx.conv_tactic),
        }) as Box<dyn DeviceKernel>)
    })())
}

/// How the 2-D convolution `l` over `inputs` runs channels last on a device of compute
/// capability `cc`: faster where the tensor-core kernel takes it (channels first, it copies
/// its input channels last), either way for a depthwise layer the channels-last depthwise
/// kernel takes.
pub(crate) fn channels_last(
    l: &Convolution,
    inputs: &[InferInput<'_>],
    cc: (u32, u32),
) -> ChannelsLast {
    let Some(x) = inputs.first() else {
        return ChannelsLast::No;
    };
    let fits = x.shape.len() == 4
        && inputs.len() >= 2
        && inputs.iter().all(|i| i.dtype == x.dtype)
        && Epilogue::new(l.activation).is_some()
        && geometry(l, 2).is_some();
    if fits && implicit_gemm::takes(x.dtype, l.groups, inputs[1].value, cc) {
        ChannelsLast::Faster
    } else if fits && depthwise_nhwc::window(l, inputs).is_some() {
        ChannelsLast::Either
    } else {
        ChannelsLast::No
    }
}

/// The padded row count of a constant 16-bit weight matrix whose rows (`Cg·KH·KW`) are
/// not a multiple of 8, when the convolution runs im2col + GEMM (not depthwise, not 1×1
/// stride 1 unpadded).
fn padded_rows(
    l: &Convolution,
    inputs: &[InferInput<'_>],
    geo: &Geometry,
    ty: GemmType,
) -> Option<usize> {
    let w = inputs.get(1)?.value?.shape();
    if w.len() < 3 {
        return None;
    }
    let rows: usize = w[1..].iter().product();
    let kk: usize = w[2..].iter().product();
    let pointwise = kk == 1 && geo.stride == [1, 1] && geo.pad == [0, 0] && geo.pad_end == [0, 0];
    let depthwise = w[1] == 1 && l.groups > 1;
    (ty.size() == 2 && !rows.is_multiple_of(8) && !pointwise && !depthwise)
        .then(|| rows.next_multiple_of(8))
}

/// Uploads the constant weights `[M, rows]` as `[M, k8]`, zeros after each row.
fn upload_padded(
    ctx: &PrepareCtx<'_>,
    inputs: &[InferInput<'_>],
    k8: usize,
) -> Result<Weights, String> {
    let w = inputs[1]
        .value
        .ok_or_else(|| format!("{WHAT}: padded weights must be constant"))?;
    let m = w.shape()[0];
    let row = w.bytes().len() / m.max(1);
    let mut bytes = vec![0u8; m * k8 * 2];
    for (dst, src) in bytes
        .chunks_exact_mut(k8 * 2)
        .zip(w.bytes().chunks_exact(row))
    {
        dst[..row].copy_from_slice(src);
    }
    Weights::upload_bytes(ctx.device, &bytes, WHAT)
}

/// The layer's window as 2-D pairs (a leading unit row for 1-D), `None` if a value is
/// negative.
pub(super) fn geometry(l: &Convolution, spatial: usize) -> Option<Geometry> {
    let pair = |v: &[i64], fill: usize| -> Option<[usize; 2]> {
        let u = |x: i64| usize::try_from(x).ok();
        match (spatial, v) {
            (1, [a]) => Some([fill, u(*a)?]),
            (2, [a, b]) => Some([u(*a)?, u(*b)?]),
            _ => None,
        }
    };
    Some(Geometry {
        stride: pair(&l.strides, 1)?,
        pad: pair(&l.pads_begin, 0)?,
        pad_end: pair(&l.pads_end, 0)?,
        dilation: pair(&l.dilations, 1)?,
    })
}

/// Concrete sizes of one run.
pub(super) struct Shape {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    cg: usize,
    oh: usize,
    ow: usize,
}

impl Shape {
    /// The sizes of a run as the implicit GEMM takes them, with the `kernel` window.
    pub(super) fn problem(&self, geo: &Geometry, kernel: [usize; 2]) -> Problem {
        Problem {
            n: self.n,
            c: self.c,
            input: [self.h, self.w],
            m: self.m,
            output: [self.oh, self.ow],
            kernel,
            stride: geo.stride,
            pad: geo.pad,
            dilation: geo.dilation,
        }
    }
}

/// The sizes of a convolution of `spatial` (1 or 2) dims and `groups` with window `geo` from
/// the shapes of x, w and y (channels first), and its 2-D window; an error naming them when
/// they do not fit.
pub(super) fn shape(
    spatial: usize,
    groups: usize,
    geo: &Geometry,
    [x, w, y]: [&[usize]; 3],
) -> Result<(Shape, [usize; 2]), String> {
    let rank = spatial + 2;
    if x.len() != rank || w.len() != rank || y.len() != rank {
        return Err(format!(
            "{WHAT}: x {x:?}, w {w:?} and y {y:?} must have rank {rank}"
        ));
    }
    let two = |v: &[usize]| {
        if spatial == 1 {
            [1, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let ([h, wd], k, [oh, ow]) = (two(&x[2..]), two(&w[2..]), two(&y[2..]));
    let g = geo;
    let expect = |i: usize, inp: usize| {
        (inp + g.pad[i] + g.pad_end[i])
            .checked_sub(g.dilation[i] * (k[i] - 1) + 1)
            .map(|s| s / g.stride[i] + 1)
    };
    let s = Shape {
        n: x[0],
        c: x[1],
        h,
        w: wd,
        m: w[0],
        cg: w[1],
        oh,
        ow,
    };
    if k.contains(&0)
        || s.cg * groups != s.c
        || !s.m.is_multiple_of(groups)
        || y[0] != s.n
        || y[1] != s.m
        || expect(0, h) != Some(oh)
        || expect(1, wd) != Some(ow)
    {
        return Err(format!(
            "{WHAT}: x {x:?}, w {w:?}, {groups} groups and y {y:?} do not fit"
        ));
    }
    Ok((s, k))
}

/// The dims of a convolution's input `x` and output `y` channels first: as they are, or, for
/// a `channels_last` layer, `[N, H, W, C]` read as `[N, C, H, W]` (rank 4 only).
pub(super) fn channels_first_dims(
    what: &str,
    channels_last: bool,
    x: &[usize],
    y: &[usize],
) -> Result<[Vec<usize>; 2], String> {
    match (channels_last, x, y) {
        (false, _, _) => Ok([x.to_vec(), y.to_vec()]),
        (true, &[n, h, w, c], &[yn, yh, yw, yc]) => Ok([vec![n, c, h, w], vec![yn, yc, yh, yw]]),
        (true, _, _) => Err(format!(
            "{what}: channels-last x {x:?} and y {y:?} need rank 4"
        )),
    }
}

/// Checks a convolution's optional third and fourth inputs: the bias `[m]` and the residual
/// shaped like the output `y`.
pub(super) fn check_extras(
    what: &str,
    inputs: &[DeviceTensor],
    m: usize,
    y: &[usize],
) -> Result<(), String> {
    if let Some(b) = inputs.get(2)
        && dims(&b.desc)? != [m]
    {
        return Err(format!("{what}: bias {:?} must be [{m}]", b.desc.shape));
    }
    if let Some(r) = inputs.get(3)
        && dims(&r.desc)? != y
    {
        return Err(format!(
            "{what}: residual {:?} must be shaped like the output {y:?}",
            r.desc.shape
        ));
    }
    Ok(())
}

impl ConvKernel {
    fn shape(&self, x: &[usize], w: &[usize], y: &[usize]) -> Result<(Shape, [usize; 2]), String> {
        shape(self.spatial, self.groups, &self.geo, [x, w, y])
    }

    /// The sizes of a run as the implicit GEMM takes them.
    fn problem(&self, s: &Shape, kernel: [usize; 2]) -> Problem {
        s.problem(&self.geo, kernel)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_direct(
        &self,
        s: &Shape,
        k: [usize; 2],
        x: u64,
        w: u64,
        bias: u64,
        res: u64,
        y: u64,
        stream: &Stream,
    ) -> Result<(), String> {
        let epilogue = if res == 0 {
            self.epilogue
        } else {
            Epilogue::default()
        };
        let g = &self.geo;
        let planes = s.n * s.m;
        let square = k[0] == k[1] && g.stride[0] == g.stride[1] && g.dilation == [1, 1];
        let tiling = square
            .then(|| Tiling::of(k[0], g.stride[0], [s.h, s.w], [s.oh, s.ow], planes))
            .flatten();
        match tiling {
            Some(t) => self.run_tiled(&t, s, k[0], [x, w, bias, y], epilogue, stream)?,
            None => self.run_per_output(s, k, [x, w, bias, y], epilogue, stream)?,
        }
        if res == 0 {
            return Ok(());
        }
        self.finish(s, 0, res, y, stream)
    }

    /// `conv_direct_*` (a thread per output) over `[x, w, bias, y]` with `epilogue` fused.
    fn run_per_output(
        &self,
        s: &Shape,
        k: [usize; 2],
        [x, w, bias, y]: [u64; 4],
        epilogue: Epilogue,
        stream: &Stream,
    ) -> Result<(), String> {
        let g = &self.geo;
        let planes = s.n * s.m;
        let i = |v: usize| arg_i32(v, WHAT);
        let mut args = KernelArgs::new().ptr(x).ptr(w).ptr(bias).ptr(y);
        for v in [s.c, s.h, s.w, s.m, s.cg, s.m / self.groups, k[0], k[1]] {
            args = args.i32(i(v)?);
        }
        for v in [g.stride, g.pad, g.dilation].concat() {
            args = args.i32(i(v)?);
        }
        i(s.oh * s.ow)?;
        i(planes + (1 << 20))?;
        let mut args = args
            .i32(i(s.oh)?)
            .i32(i(s.ow)?)
            .i32(i(planes)?)
            .i32(epilogue.code)
            .f32(epilogue.p0)
            .f32(epilogue.p1);
        let (grid, block) = direct_grid(s.oh * s.ow, planes);
        // SAFETY: the arguments match `conv_direct_*`; the tensors hold the checked shapes.
        unsafe { self.direct.launch(stream, grid, block, 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }

    /// `conv_depthwise_*` over `[x, w, bias, y]` (`bias` may be 0) with `epilogue` fused.
    fn run_tiled(
        &self,
        t: &Tiling,
        s: &Shape,
        k: usize,
        [x, w, bias, y]: [u64; 4],
        epilogue: Epilogue,
        stream: &Stream,
    ) -> Result<(), String> {
        let g = &self.geo;
        let i = |v: usize| arg_i32(v, WHAT);
        let mut args = KernelArgs::new().ptr(x).ptr(w).ptr(bias).ptr(y);
        for v in [
            s.c,
            s.h,
            s.w,
            s.m,
            s.m / self.groups,
            g.pad[0],
            g.pad[1],
            s.oh,
            s.ow,
        ] {
            args = args.i32(i(v)?);
        }
        for v in t.window.into_iter().chain(t.step) {
            args = args.i32(i(v)?);
        }
        let mut args = args
            .i32(i(s.n * s.m)?)
            .i32(epilogue.code)
            .f32(epilogue.p0)
            .f32(epilogue.p1)
            .i32(i(k)?)
            .i32(i(g.stride[0])?)
            .i32(i(staging_width(s.w, x, self.dtype.size()))?);
        // SAFETY: the arguments match `conv_depthwise_*`; the tensors hold the checked
        // shapes, and `Tiling::of` sized the shared memory for the block's windows.
        unsafe {
            self.depthwise
                .launch(stream, t.grid, t.block, t.shared_bytes, &mut args)
        }
        .map_err(|e| format!("{WHAT}: {e}"))
    }

    /// The in-place pass `y = act(y + bias + res)` (`bias`, `res` may be 0: absent).
    fn finish(
        &self,
        s: &Shape,
        bias: u64,
        res: u64,
        y: u64,
        stream: &Stream,
    ) -> Result<(), String> {
        if bias == 0 && res == 0 && self.epilogue.code == 0 {
            return Ok(());
        }
        self.epilogue_pass(s, s.n, 0, y, y, bias, res, stream)
    }

    /// `y = act(src + bias + res)` over `images` images of the output: `src` is `y` itself
    /// (`wide` 0) or a product `[M, wide·ohw]` of `wide` images, transposed back to NCHW
    /// (`y` and `res` at the images' first; `bias`, `res` may be 0).
    #[allow(clippy::too_many_arguments)]
    fn epilogue_pass(
        &self,
        s: &Shape,
        images: usize,
        wide: usize,
        src: u64,
        y: u64,
        bias: u64,
        res: u64,
        stream: &Stream,
    ) -> Result<(), String> {
        let i = |v: usize| arg_i32(v, WHAT);
        let total = images * s.m * s.oh * s.ow;
        let aligned = [src, y, res].iter().all(|p| p % 16 == 0);
        let mut args = KernelArgs::new()
            .ptr(src)
            .ptr(y)
            .ptr(bias)
            .ptr(res)
            .i32(i(s.m)?)
            .i32(i(s.oh * s.ow)?)
            .i32(i(wide)?)
            .i64(total as i64)
            .i32(i32::from(aligned))
            .i32(self.epilogue.code)
            .f32(self.epilogue.p0)
            .f32(self.epilogue.p1);
        let blocks = grid_for(total.div_ceil(16 / self.dtype.size()), THREADS);
        // SAFETY: the arguments match `conv_epilogue_*`; `y` (and `res`) hold `total`
        // elements, `src` as many (`y` itself, or the product of `wide` images).
        unsafe {
            self.finish
                .launch(stream, (blocks, 1, 1), (THREADS, 1, 1), 0, &mut args)
        }
        .map_err(|e| format!("{WHAT}: {e}"))
    }

    /// The tactic for this run's input shape: timed on its first run (`run` queues one
    /// tactic into the given output, `Ok(false)` where it does not apply), then remembered.
    fn choose(
        &self,
        s: &Shape,
        k: [usize; 2],
        stream: &Stream,
        mut run: impl FnMut(Tactic, u64) -> Result<bool, String>,
    ) -> Result<Tactic, String> {
        let bytes = s.n * s.m * s.oh * s.ow * self.dtype.size();
        let mut scratch = None;
        self.tactics
            .choose([s.n, s.h, s.w], k[0] * k[1], stream, |t| {
                if scratch.is_none() {
                    let out = stream.device().allocator().alloc(bytes);
                    scratch = Some(out.map_err(|e| format!("{WHAT}: tactic scratch: {e}"))?);
                }
                run(t, scratch.as_ref().map_or(0, |b| b.ptr()))
            })
    }

    /// A channels-last run ([`Convolution::channels_last`]): the implicit GEMM, or for a
    /// pointwise layer whichever of it and one cuBLAS product is faster at this shape (the
    /// product also where the sizes exceed the implicit GEMM's 32-bit indexing).
    fn run_channels_last(
        &self,
        s: &Shape,
        k: [usize; 2],
        [x, w, bias, res, y]: [u64; 5],
        stream: &Stream,
    ) -> Result<(), String> {
        let ig = self.implicit.as_ref().ok_or_else(|| {
            format!("{WHAT}: a channels-last convolution needs the tensor-core kernel")
        })?;
        let p = self.problem(s, k);
        let g = &self.geo;
        let pointwise = k == [1, 1] && g.stride == [1, 1] && g.pad == [0, 0] && g.pad_end == [0, 0];
        let tactic = if pointwise {
            self.choose(s, k, stream, |t, out| match t {
                Tactic::Implicit | Tactic::Tile(_) => ig.run(&p, true, [x, bias, res, out], stream),
                Tactic::Gemm => self
                    .pointwise_nhwc(s, [x, w, bias, res, out], stream)
                    .map(|()| true),
            })?
        } else {
            Tactic::Implicit
        };
        if tactic == Tactic::Gemm {
            return self.pointwise_nhwc(s, [x, w, bias, res, y], stream);
        }
        match ig.run(&p, true, [x, bias, res, y], stream)? {
            true => Ok(()),
            false if pointwise => self.pointwise_nhwc(s, [x, w, bias, res, y], stream),
            false => Err(format!(
                "{WHAT}: channels-last x [{}, {}, {}, {}] exceeds the kernel's 32-bit indexing",
                s.n, s.h, s.w, s.c
            )),
        }
    }

    /// A pointwise channels-last convolution as one product `y [N·H·W, M] = x [N·H·W, C] ·
    /// wᵀ`: with the bias and the residual, or the bias and ReLU, in cuBLASLt's epilogue,
    /// else (or where cuBLASLt has no algorithm for that epilogue) followed by the epilogue
    /// pass in place (each position an image of one pixel).
    fn pointwise_nhwc(
        &self,
        s: &Shape,
        [x, w, bias, res, y]: [u64; 5],
        stream: &Stream,
    ) -> Result<(), String> {
        let rows = s.n * s.h * s.w;
        let gemm = Gemm {
            m: rows,
            n: s.m,
            k: s.c,
            trans_a: false,
            trans_b: true,
            ty: self.ty,
        };
        let blas = BlasScope::new(&self.blas, stream, WHAT)?;
        let relu = self.epilogue.code == 1;
        if (self.epilogue.code == 0 || relu && res == 0) && s.c > 0 {
            let fused = Fused {
                bias,
                residual: res,
                relu,
            };
            // SAFETY: x holds `[N·H·W, C]`, the weights `[M, C]` (one tap), y and the
            // residual `[N·H·W, M]`, the bias M values.
            if unsafe { blas.gemm_fused(stream, &gemm, [x, w, y], fused) }.is_ok() {
                return Ok(());
            }
        }
        let strides = BatchStrides { a: 0, b: 0, c: 0 };
        // SAFETY: x holds `[N·H·W, C]`, the weights `[M, C]` (one tap), y `[N·H·W, M]`.
        unsafe { blas.gemm_strided_batched(stream, &gemm, 1, strides, [x, w, y]) }
            .map_err(|e| format!("{WHAT}: {e}"))?;
        drop(blas);
        let pixels = Shape {
            n: rows,
            oh: 1,
            ow: 1,
            ..*s
        };
        self.finish(&pixels, bias, res, y, stream)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_gemm(
        &self,
        s: &Shape,
        k: [usize; 2],
        x: u64,
        w: u64,
        bias: u64,
        res: u64,
        y: u64,
        stream: &Stream,
    ) -> Result<(), String> {
        let g = &self.geo;
        let size = self.ty.size();
        let (hw, ohw, kk) = (s.h * s.w, s.oh * s.ow, k[0] * k[1]);
        let mg = s.m / self.groups;
        let wide = self.groups == 1 && s.n > 1 && ohw <= WIDE_HW;
        let direct =
            !wide && kk == 1 && g.stride == [1, 1] && g.pad == [0, 0] && g.pad_end == [0, 0];
        let rows = if direct {
            s.cg
        } else {
            self.packed_rows.unwrap_or(s.cg * kk)
        };
        let per_image = self.groups * rows * ohw * size;
        let chunk = if direct {
            s.n
        } else {
            (COL_BYTES / per_image.max(1)).clamp(1, s.n)
        };
        let alloc = |bytes: usize, what: &str| {
            stream
                .device()
                .allocator()
                .alloc(bytes)
                .map_err(|e| format!("{WHAT}: {what}: {e}"))
        };
        let scratch = if direct {
            None
        } else {
            Some(alloc(per_image * chunk, "im2col scratch")?)
        };
        let product = if wide {
            Some(alloc(s.m * ohw * chunk * size, "product scratch")?)
        } else {
            None
        };
        let blas = BlasScope::new(&self.blas, stream, WHAT)?;
        let mut n0 = 0;
        while n0 < s.n {
            let nb = chunk.min(s.n - n0);
            let xs = x + (n0 * s.c * hw * size) as u64;
            let ys = y + (n0 * s.m * ohw * size) as u64;
            let src = match &scratch {
                None => xs,
                Some(col) => {
                    let gather = Gather {
                        x: xs,
                        col: col.ptr(),
                        groups: nb * self.groups,
                        cg: s.cg,
                        rows,
                        input: [s.h, s.w],
                        kernel: k,
                        stride: g.stride,
                        pad: g.pad,
                        dilation: g.dilation,
                        output: [s.oh, s.ow],
                        interleave: wide,
                    };
                    self.im2col.run(&gather, stream)?;
                    col.ptr()
                }
            };
            if let Some(out) = &product {
                let gemm = Gemm {
                    m: s.m,
                    n: nb * ohw,
                    k: rows,
                    trans_a: false,
                    trans_b: false,
                    ty: self.ty,
                };
                let strides = BatchStrides { a: 0, b: 0, c: 0 };
                // SAFETY: the weights are `[M, rows]`, the gathered columns `[rows, nb·ohw]`
                // and the product scratch `[M, nb·ohw]`.
                unsafe {
                    blas.gemm_strided_batched(stream, &gemm, 1, strides, [w, src, out.ptr()])
                }
                .map_err(|e| format!("{WHAT}: {e}"))?;
                let rs = if res == 0 {
                    0
                } else {
                    res + (n0 * s.m * ohw * size) as u64
                };
                self.epilogue_pass(s, nb, nb, out.ptr(), ys, bias, rs, stream)?;
                n0 += nb;
                continue;
            }
            let gemm = Gemm {
                m: mg,
                n: ohw,
                k: rows,
                trans_a: false,
                trans_b: false,
                ty: self.ty,
            };
            let strides = BatchStrides {
                a: 0,
                b: self.groups * rows * ohw,
                c: s.m * ohw,
            };
            for grp in 0..self.groups {
                let ptrs = [
                    w + (grp * mg * rows * size) as u64,
                    src + (grp * rows * ohw * size) as u64,
                    ys + (grp * mg * ohw * size) as u64,
                ];
                // SAFETY: each image's operands lie inside the weights, the input (or its
                // im2col copy) and the output, whose shapes were checked.
                unsafe { blas.gemm_strided_batched(stream, &gemm, nb, strides, ptrs) }
                    .map_err(|e| format!("{WHAT}: {e}"))?;
            }
            n0 += nb;
        }
        drop(blas);
        drop(scratch);
        if wide {
            return Ok(());
        }
        self.finish(s, bias, res, y, stream)
    }
}

impl DeviceKernel for ConvKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_inputs(WHAT, inputs, outputs, 2..=4, 1)?;
        expect_dtype(WHAT, inputs, self.dtype)?;
        expect_dtype(WHAT, outputs, self.dtype)?;
        let (xd, wd, yd) = (
            dims(&inputs[0].desc)?,
            dims(&inputs[1].desc)?,
            dims(&outputs[0].desc)?,
        );
        let [x_first, y_first] = channels_first_dims(WHAT, self.channels_last, &xd, &yd)?;
        let (s, k) = self.shape(&x_first, &wd, &y_first)?;
        check_extras(WHAT, inputs, s.m, &yd)?;
        if s.n * s.m * s.oh * s.ow == 0 {
            return Ok(());
        }
        let w = self.packed.as_ref().map_or(inputs[1].ptr, Weights::ptr);
        let bias = inputs.get(2).map_or(0, |b| b.ptr);
        let res = inputs.get(3).map_or(0, |r| r.ptr);
        let (x, y) = (inputs[0].ptr, outputs[0].ptr);
        if let Some(dw) = &self.nhwc_depthwise {
            let run = Run {
                n: s.n,
                input: [s.h, s.w],
                c: s.c,
                output: [s.oh, s.ow],
                pad: self.geo.pad,
            };
            return dw.run(&run, [x, inputs[1].ptr, bias, res, y], stream);
        }
        if self.channels_last {
            return self.run_channels_last(&s, k, [x, w, bias, res, y], stream);
        }
        if s.cg == 1 && self.groups > 1 {
            return self.run_direct(&s, k, x, w, bias, res, y, stream);
        }
        let Some(ig) = &self.implicit else {
            return self.run_gemm(&s, k, x, w, bias, res, y, stream);
        };
        let p = self.problem(&s, k);
        let tactic = self.choose(&s, k, stream, |t, out| match t {
            Tactic::Implicit | Tactic::Tile(_) => ig.run(&p, false, [x, bias, res, out], stream),
            Tactic::Gemm => self
                .run_gemm(&s, k, x, w, bias, res, out, stream)
                .map(|()| true),
        })?;
        if tactic == Tactic::Implicit && ig.run(&p, false, [x, bias, res, y], stream)? {
            return Ok(());
        }
        self.run_gemm(&s, k, x, w, bias, res, y, stream)
    }
}

/// Elements the tiled depthwise kernel reads per load of an input row `w` wide at `x`
/// (elements of `size` bytes): 4 where rows and planes start at multiples of 4 (`w` a
/// multiple, `x` aligned), else 1. Pairs were measured and not kept: on the H200, 7×7 and
/// 5×5 layers on 14-wide rows took a quarter longer than one element at a time
/// (BENCHMARKS.md, round 2 session 13); groups of 4 took 11–32 % less on 28- to 112-wide rows.
fn staging_width(w: usize, x: u64, size: usize) -> usize {
    if w.is_multiple_of(4) && x.is_multiple_of(4 * size as u64) {
        4
    } else {
        1
    }
}

#[cfg(test)]
mod staging_tests {
    use super::staging_width;

    #[test]
    fn rows_are_read_in_fours_where_they_align() {
        assert_eq!(staging_width(56, 0x1000, 2), 4);
        assert_eq!(staging_width(14, 0x1000, 2), 1);
        assert_eq!(staging_width(7, 0x1000, 2), 1);
        assert_eq!(staging_width(56, 0x1004, 2), 1);
        assert_eq!(staging_width(56, 0x1008, 2), 4);
        assert_eq!(staging_width(28, 0x1010, 4), 4);
        assert_eq!(staging_width(28, 0x1008, 4), 1);
    }
}
