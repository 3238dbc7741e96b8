//! The row machinery reductions, softmax and normalization share: a tensor viewed as
//! `[outer, R, inner]` around a run of consecutive axes is reduced along `R`. Contiguous
//! rows (`inner == 1`) go to a warp each (`R` ≤ [`WARP_ROW_MAX`]) or a block each; strided
//! ones to a thread per `(outer, inner)` column.

use super::operands::{arg_i32, grid_for};
use super::prelude::dtype_suffix;
use super::{PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;
use torchtrt_plugin_api::DType;

/// Rows up to this long get a warp each (longer ones a block: a warp walking a long row
/// waits on one load after another).
const WARP_ROW_MAX: usize = 256;
const BLOCK: u32 = 256;
const WARPS_PER_BLOCK: u32 = 4;

/// CUDA C: reduction op codes (0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 L1, 6 L2,
/// 7 sum of squares, 8 log-sum-exp) with NaN-propagating max/min, warp and block
/// reductions over any of them, and the two row groupings `Grp<false>` (a warp per row) and
/// `Grp<true>` (a block per row).
pub(crate) const ROWS: &str = r#"
__device__ __forceinline__ float rinit(int op) {
    switch (op) {
    case 2: case 8: return -__int_as_float(0x7f800000);
    case 3: return __int_as_float(0x7f800000);
    case 4: return 1.0f;
    default: return 0.0f;
    }
}
__device__ __forceinline__ float rcombine(int op, float a, float v) {
    switch (op) {
    case 2: case 8: return (v > a || v != v) ? v : a;
    case 3: return (v < a || v != v) ? v : a;
    case 4: return a * v;
    default: return a + v;
    }
}
__device__ __forceinline__ float rstep(int op, float a, float v) {
    switch (op) {
    case 5: return a + fabsf(v);
    case 6: case 7: return a + v * v;
    default: return rcombine(op, a, v);
    }
}
__device__ __forceinline__ float rfinish(int op, float a, int n) {
    switch (op) {
    case 1: return a / (float)n;
    case 6: return sqrtf(a);
    default: return a;
    }
}
__device__ __forceinline__ float warp_reduce(int op, float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = rcombine(op, v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float block_reduce(int op, float v, float* sh) {
    v = warp_reduce(op, v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    int lane = threadIdx.x & 31;
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : rinit(op);
    return warp_reduce(op, v);
}

template <bool BLOCK> struct Grp;
template <> struct Grp<false> {
    static __device__ __forceinline__ int lane() { return threadIdx.x & 31; }
    static __device__ __forceinline__ int size() { return 32; }
    static __device__ __forceinline__ i64 first() {
        return (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    }
    static __device__ __forceinline__ i64 step() { return (i64)gridDim.x * (blockDim.x >> 5); }
    static __device__ __forceinline__ float reduce(int op, float v, float*) {
        return warp_reduce(op, v);
    }
};
template <> struct Grp<true> {
    static __device__ __forceinline__ int lane() { return threadIdx.x; }
    static __device__ __forceinline__ int size() { return blockDim.x; }
    static __device__ __forceinline__ i64 first() { return blockIdx.x; }
    static __device__ __forceinline__ i64 step() { return gridDim.x; }
    static __device__ __forceinline__ float reduce(int op, float v, float* sh) {
        return block_reduce(op, v, sh);
    }
};

"#;

/// `[outer, R, inner]` of `shape` around axes `first..last` (exclusive).
pub(crate) fn split(shape: &[usize], first: usize, last: usize) -> [usize; 3] {
    let p = |s: &[usize]| s.iter().product::<usize>();
    [
        p(&shape[..first]),
        p(&shape[first..last]),
        p(&shape[last..]),
    ]
}

/// The three entry points of a row kernel for one dtype: `<name>_warp_<dt>`,
/// `<name>_block_<dt>` (arguments: pointers, `i64 outer`, `int R`, then the extras) and
/// `<name>_cols_<dt>` (pointers, `i64 outer`, `int R`, `int inner`, extras).
pub(crate) struct RowKernels {
    warp: Function,
    block: Function,
    cols: Function,
}

impl RowKernels {
    /// Loads `name`'s entry points for `dtype` from `program`; `None` for a dtype without.
    pub(crate) fn load(
        ctx: &PrepareCtx<'_>,
        program: &ProgramSource,
        name: &str,
        dtype: DType,
    ) -> Option<Result<RowKernels, String>> {
        let s = dtype_suffix(dtype)?;
        let f = |kind: &str| {
            let entry = format!("{name}_{kind}_{s}");
            ctx.programs
                .function(program, &entry)
                .map_err(|e| format!("loading {entry}: {e}"))
        };
        Some((|| {
            Ok(RowKernels {
                warp: f("warp")?,
                block: f("block")?,
                cols: f("cols")?,
            })
        })())
    }

    /// Queues the kernel over `[outer, r, inner]`: `ptrs` first, then the sizes, then
    /// `extra` appends the rest.
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        ptrs: &[u64],
        [outer, r, inner]: [usize; 3],
        extra: impl FnOnce(KernelArgs) -> KernelArgs,
        what: &str,
    ) -> Result<(), String> {
        if outer * inner == 0 {
            return Ok(());
        }
        let mut args = ptrs.iter().fold(KernelArgs::new(), |a, &p| a.ptr(p));
        args = args.i64(outer as i64).i32(arg_i32(r, what)?);
        let (f, grid, block) = if inner == 1 && r <= WARP_ROW_MAX {
            let rows = outer.div_ceil(WARPS_PER_BLOCK as usize);
            (
                &self.warp,
                rows.clamp(1, 1 << 20) as u32,
                32 * WARPS_PER_BLOCK,
            )
        } else if inner == 1 {
            (&self.block, outer.clamp(1, 1 << 20) as u32, BLOCK)
        } else {
            args = args.i32(arg_i32(inner, what)?);
            (&self.cols, grid_for(outer * inner, BLOCK), BLOCK)
        };
        let mut args = extra(args);
        // SAFETY: the entry points share this argument layout (see the type's docs), and the
        // caller passes pointers to tensors of `outer·r·inner` elements (and its extras).
        unsafe { f.launch(stream, (grid, 1, 1), (block, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{what}: {e}"))
    }
}

/// Entry points `<name>_{warp,block,cols}_<dt>` for every dtype from the device templates
/// `<name>_rows<D, BLOCK>(…)` and `<name>_cols<D>(…)`; `params` are the extra parameters
/// (with a leading comma) and `args` their names (likewise).
pub(crate) fn entry_points(
    name: &str,
    ptrs: &str,
    ptr_args: &str,
    params: &str,
    args: &str,
) -> String {
    let mut s = String::new();
    for (dt, d) in [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")] {
        s.push_str(&format!(
            "extern \"C\" __global__ void {name}_warp_{dt}({ptrs}, i64 outer, int R{params}) \
             {{ {name}_rows<{d}, false>({ptr_args}, outer, R{args}); }}\n\
             extern \"C\" __global__ void {name}_block_{dt}({ptrs}, i64 outer, int R{params}) \
             {{ {name}_rows<{d}, true>({ptr_args}, outer, R{args}); }}\n\
             extern \"C\" __global__ void {name}_cols_{dt}({ptrs}, i64 outer, int R, int inner{params}) \
             {{ {name}_cols<{d}>({ptr_args}, outer, R, inner{args}); }}\n"
        ));
    }
    s
}
