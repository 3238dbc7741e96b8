//! `NonZero` layers of any dtype, in three passes over chunks of [`CHUNK`] elements: each
//! block counts its chunk's non-zero elements, one block turns the counts into offsets,
//! and each block writes its chunk's coordinates in order (a ballot per warp, a scan over
//! the warps). The count itself is known before the run (the runtime infers the output
//! shape from the input's value). Float zeros of either sign count as zero, NaN does not.

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::access::ACCESS;
use super::operands::{dims, expect_arity};
use super::prelude::{Program, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "NonZero";

/// Elements per block.
const CHUNK: usize = 4096;
const THREADS: u32 = 256;
/// The highest rank the kernels take.
const MAX_RANK: usize = 8;

static PROGRAM: Program = Program::new("core_non_zero", || {
    let mut entries = String::new();
    for (e, s) in [(1, "u8"), (2, "u16"), (4, "u32"), (8, "u64")] {
        entries.push_str(&format!(
            "extern \"C\" __global__ void nz_count_{e}(const {s}* x, i64 n, u64 mask, i64* counts) \
             {{ nz_count<{s}>(x, n, mask, counts); }}\n\
             extern \"C\" __global__ void nz_write_{e}(const {s}* x, i64 n, u64 mask, \
             const i64* offsets, i64* out, i64 count, int rank, DIMS8) \
             {{ nz_write<{s}>(x, n, mask, offsets, out, count, rank, DIMS8_ARGS); }}\n"
        ));
    }
    with_prelude(&format!("{ACCESS}{BODY}{entries}"))
});

const BODY: &str = r#"
#define NZ_CHUNK 4096
#define DIMS8 i64 e0, i64 e1, i64 e2, i64 e3, i64 e4, i64 e5, i64 e6, i64 e7
#define DIMS8_ARGS Dims8{{e0, e1, e2, e3, e4, e5, e6, e7}}
struct Dims8 { i64 d[8]; };

template <typename S>
__device__ __forceinline__ bool nonzero(S v, u64 mask) { return ((u64)v & mask) != 0; }

template <typename S>
__device__ __forceinline__ void nz_count(const S* x, i64 n, u64 mask, i64* counts) {
    __shared__ float sh[32];
    i64 base = (i64)blockIdx.x * NZ_CHUNK;
    float c = 0.0f;
    for (int k = threadIdx.x; k < NZ_CHUNK; k += blockDim.x) {
        i64 i = base + k;
        if (i < n && nonzero(x[i], mask)) c += 1.0f;
    }
    c = block_sum(c, sh);
    if (threadIdx.x == 0) counts[blockIdx.x] = (i64)c;
}

/* Exclusive prefix sums of `counts` in place, by one block. */
extern "C" __global__ void nz_scan(i64* counts, i64 blocks) {
    __shared__ i64 warp_tot[32];
    __shared__ i64 carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (i64 t0 = 0; t0 < blocks; t0 += blockDim.x) {
        i64 i = t0 + threadIdx.x;
        i64 v = i < blocks ? counts[i] : 0;
        i64 incl = v;
        for (int o = 1; o < 32; o <<= 1) {
            i64 u = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += u;
        }
        if (lane == 31) warp_tot[warp] = incl;
        __syncthreads();
        i64 before = carry;
        for (int w = 0; w < warp; ++w) before += warp_tot[w];
        if (i < blocks) counts[i] = before + incl - v;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) {
            i64 all = carry;
            for (int w = 0; w < warps; ++w) all += warp_tot[w];
            carry = all;
        }
        __syncthreads();
    }
}

template <typename S>
__device__ __forceinline__ void nz_write(const S* x, i64 n, u64 mask, const i64* offsets,
                                         i64* out, i64 count, int rank, Dims8 dm) {
    __shared__ int warp_tot[32];
    __shared__ i64 written;
    if (threadIdx.x == 0) written = 0;
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    i64 base = (i64)blockIdx.x * NZ_CHUNK;
    i64 start = offsets[blockIdx.x];
    for (int t0 = 0; t0 < NZ_CHUNK; t0 += blockDim.x) {
        i64 i = base + t0 + threadIdx.x;
        bool f = i < n && nonzero(x[i], mask);
        unsigned ballot = __ballot_sync(0xffffffffu, f);
        int before_lane = __popc(ballot & ((1u << lane) - 1u));
        if (lane == 0) warp_tot[warp] = __popc(ballot);
        __syncthreads();
        int before = 0;
        for (int w = 0; w < warp; ++w) before += warp_tot[w];
        if (f) {
            i64 pos = start + written + before + before_lane;
            i64 rest = i;
            for (int d = rank - 1; d >= 0; --d) {
                i64 q = rest / dm.d[d];
                out[(i64)d * count + pos] = rest - q * dm.d[d];
                rest = q;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int all = 0;
            for (int w = 0; w < warps; ++w) all += warp_tot[w];
            written += all;
        }
        __syncthreads();
    }
}
"#;

/// The bits that make an element of `dtype` non-zero: all but a float's sign.
fn value_mask(dtype: DType) -> u64 {
    match dtype {
        DType::F32 => 0x7fff_ffff,
        DType::F64 => 0x7fff_ffff_ffff_ffff,
        DType::F16 | DType::BF16 => 0x7fff,
        other => u64::MAX >> (64 - 8 * other.size()),
    }
}

/// Prepares a `NonZero` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::NonZero(_) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let elem = x.dtype.size();
    if !matches!(elem, 1 | 2 | 4 | 8) || x.shape.len() > MAX_RANK {
        return None;
    }
    let source = PROGRAM.source();
    let load = |e: String| {
        ctx.programs
            .function(&source, &e)
            .map_err(|err| format!("{WHAT}: {err}"))
    };
    Some((|| {
        Ok(Box::new(NonZeroKernel {
            dtype: x.dtype,
            count: load(format!("nz_count_{elem}"))?,
            scan: load("nz_scan".into())?,
            write: load(format!("nz_write_{elem}"))?,
        }) as Box<dyn DeviceKernel>)
    })())
}

struct NonZeroKernel {
    dtype: DType,
    count: Function,
    scan: Function,
    write: Function,
}

impl DeviceKernel for NonZeroKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 1, 1)?;
        let (x, o) = (&inputs[0], &outputs[0]);
        let shape = dims(&x.desc)?;
        let out = dims(&o.desc)?;
        if x.desc.dtype != self.dtype || o.desc.dtype != DType::I64 || out.len() != 2 {
            return Err(format!(
                "{WHAT}: prepared for {} → i64[rank, count], got {} → {}{:?}",
                self.dtype, x.desc.dtype, o.desc.dtype, o.desc.shape
            ));
        }
        if shape.len() > MAX_RANK || out[0] != shape.len() {
            return Err(format!(
                "{WHAT}: input {shape:?} and output {out:?} disagree"
            ));
        }
        let n: usize = shape.iter().product();
        let count = out[1];
        if n == 0 || count == 0 {
            return Ok(());
        }
        let nblocks = n.div_ceil(CHUNK);
        let grid = u32::try_from(nblocks)
            .map_err(|_| format!("{WHAT}: {n} elements need too many blocks"))?;
        let scratch = stream
            .device()
            .allocator()
            .alloc(nblocks * 8)
            .map_err(|e| format!("{WHAT}: block counts: {e}"))?;
        let mask = value_mask(self.dtype);
        let mut counting = KernelArgs::new()
            .ptr(x.ptr)
            .i64(n as i64)
            .i64(mask as i64)
            .ptr(scratch.ptr());
        let mut scanning = KernelArgs::new().ptr(scratch.ptr()).i64(nblocks as i64);
        let mut dims8 = [1i64; MAX_RANK];
        for (d, &v) in dims8.iter_mut().zip(&shape) {
            *d = v as i64;
        }
        let writing = KernelArgs::new()
            .ptr(x.ptr)
            .i64(n as i64)
            .i64(mask as i64)
            .ptr(scratch.ptr())
            .ptr(o.ptr)
            .i64(count as i64)
            .i32(shape.len() as i32);
        let mut writing = dims8.iter().fold(writing, |a, &d| a.i64(d));
        let err = |e| format!("{WHAT}: {e}");
        // SAFETY: each argument list matches its entry point; `x` holds `n` elements, the
        // scratch `nblocks` counts and the output `rank · count` i64s, the count being the
        // number of non-zero elements the runtime inferred from the same input.
        unsafe {
            self.count
                .launch(stream, (grid, 1, 1), (THREADS, 1, 1), 0, &mut counting)
                .map_err(err)?;
            self.scan
                .launch(stream, (1, 1, 1), (1024, 1, 1), 0, &mut scanning)
                .map_err(err)?;
            self.write
                .launch(stream, (grid, 1, 1), (THREADS, 1, 1), 0, &mut writing)
                .map_err(err)?;
        }
        drop(scratch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn float_sign_bits_do_not_count() {
        use torchtrt_plugin_api::DType;
        assert_eq!(super::value_mask(DType::F16), 0x7fff);
        assert_eq!(super::value_mask(DType::I8), 0xff);
        assert_eq!(super::value_mask(DType::I64), u64::MAX);
    }
}
