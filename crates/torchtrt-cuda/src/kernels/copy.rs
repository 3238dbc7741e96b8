//! The strided copy every shuffle layer reduces to: `dst[Σ cₖ·dₖ] = src[Σ cₖ·sₖ]` over a
//! walk of merged dims, on elements of 1 to 16 bytes (dtype-agnostic; contiguous rows are
//! widened to 16-byte elements when aligned). A walk whose innermost destination dim is
//! strided in the source but another dim is contiguous there (a transpose that moves the
//! innermost dim) goes through shared-memory tiles instead (32×32, 64×64 for elements of
//! one or two bytes), every thread's loads issued before its stores.

use super::layout::{THREADS, Walk, blocks, generated};
use super::{PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const BODY: &str = r#"
template <typename S, typename I>
__device__ __forceinline__ void copy_walk(const S* src, S* dst, u64 n, int rank,
                                          const FastDiv* dv, const i64 (*st)[MAX_RANK]) {
    GRID_STRIDE(I, i, n) {
        typename Index<I>::SI off[2];
        walk<I, 2>(i, rank, dv, st, off);
        dst[off[1]] = src[off[0]];
    }
}

/* One T x T tile per block of 32 x 8 threads: each thread loads its (T/8) x (T/32)
   elements into registers (all loads in flight), parks them in shared memory, then writes
   the transposed tile with coalesced stores. */
template <typename S, int T>
__device__ __forceinline__ void transpose_tiles(const S* src, S* dst, u32 na, u32 nb, i64 sa,
                                                i64 db, u32 tiles_a, u64 batches, int rank,
                                                const FastDiv* dv, const i64 (*st)[MAX_RANK]) {
    const int R = T / 8, C = T / 32;
    __shared__ S tile[T][T + 1];
    u32 ta = blockIdx.x % tiles_a, tb = blockIdx.x / tiles_a;
    u32 tx = threadIdx.x, ty = threadIdx.y;
    for (u64 bi = blockIdx.y; bi < batches; bi += gridDim.y) {
        i64 off[2];
        walk<u64, 2>(bi, rank, dv, st, off);
        S v[R][C];
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
                u32 a = ta * T + ty + r * 8, b = tb * T + tx + c * 32;
                if (a < na && b < nb) v[r][c] = src[off[0] + (i64)a * sa + b];
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) tile[ty + r * 8][tx + c * 32] = v[r][c];
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
                u32 b = tb * T + ty + r * 8, a = ta * T + tx + c * 32;
                if (a < na && b < nb) dst[off[1] + (i64)b * db + a] = tile[tx + c * 32][ty + r * 8];
            }
        }
        __syncthreads();
    }
}

#define COPY_ENTRIES(E, S, T) \
extern "C" __global__ void copy32_##E(const S* src, S* dst, u64 n, int rank, DIMS_PARAMS, \
                                      STRIDE_PARAMS(x), STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    copy_walk<S, u32>(src, dst, n, rank, dv, st); \
} \
extern "C" __global__ void copy64_##E(const S* src, S* dst, u64 n, int rank, DIMS_PARAMS, \
                                      STRIDE_PARAMS(x), STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    copy_walk<S, u64>(src, dst, n, rank, dv, st); \
} \
extern "C" __global__ void tiles_##E(const S* src, S* dst, u32 na, u32 nb, i64 sa, i64 db, \
                                     u32 tiles_a, u64 batches, int rank, DIMS_PARAMS, \
                                     STRIDE_PARAMS(x), STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    transpose_tiles<S, T>(src, dst, na, nb, sa, db, tiles_a, batches, rank, dv, st); \
}
COPY_ENTRIES(1, u8, 64)
COPY_ENTRIES(2, u16, 64)
COPY_ENTRIES(4, u32, 32)
COPY_ENTRIES(8, u64, 32)
COPY_ENTRIES(16, uint4, 32)
"#;

/// The program, generated once per process.
pub(crate) fn program() -> Result<ProgramSource, String> {
    generated("core_copy".into(), || BODY.into())
}

/// The strided copy entry points of one device, by element size.
pub(crate) struct Copier {
    what: &'static str,
    /// `copy32_E`, `copy64_E`, `tiles_E` for E = 1, 2, 4, 8, 16.
    entries: Vec<[Function; 3]>,
}

const SIZES: [usize; 5] = [1, 2, 4, 8, 16];

impl Copier {
    /// Loads the copy program (compiling it on first use).
    pub(crate) fn new(what: &'static str, ctx: &PrepareCtx<'_>) -> Result<Copier, String> {
        let program = program()?;
        let load = |entry: String| {
            ctx.programs
                .function(&program, &entry)
                .map_err(|e| format!("{what}: {e}"))
        };
        let entries = SIZES
            .iter()
            .map(|e| {
                Ok([
                    load(format!("copy32_{e}"))?,
                    load(format!("copy64_{e}"))?,
                    load(format!("tiles_{e}"))?,
                ])
            })
            .collect::<Result<_, String>>()?;
        Ok(Copier { what, entries })
    }

    /// Queues `dst[walk] = src[walk]` (stride set 0: source, 1: destination, in elements of
    /// `elem` bytes from the addresses `src`, `dst`).
    pub(crate) fn copy(
        &self,
        stream: &Stream,
        walk: &Walk<2>,
        elem: usize,
        src: u64,
        dst: u64,
    ) -> Result<(), String> {
        let walk = walk.merged();
        let n = walk.len();
        if n == 0 {
            return Ok(());
        }
        if let Some(done) = self.try_tiles(stream, &walk, elem, src, dst) {
            return done;
        }
        let (walk, elem) = walk.widened(elem, &[src, dst]);
        let [c32, c64, _] = self.entry(elem)?;
        let f = if walk.fits_u32() { c32 } else { c64 };
        let args = KernelArgs::new().ptr(src).ptr(dst).i64(walk.len() as i64);
        let mut args = walk.push_args(args, self.what)?;
        self.launch(
            f,
            stream,
            (blocks(walk.len()), 1, 1),
            (THREADS, 1, 1),
            &mut args,
        )
    }

    /// The tiled transpose when the destination's innermost dim `a` is strided in the
    /// source and another dim `b` is contiguous there; `None` when the walk is not such.
    fn try_tiles(
        &self,
        stream: &Stream,
        walk: &Walk<2>,
        elem: usize,
        src: u64,
        dst: u64,
    ) -> Option<Result<(), String>> {
        let rank = walk.dims.len();
        let inner = rank.checked_sub(1)?;
        if walk.strides[inner][1] != 1 || walk.strides[inner][0] == 1 || elem > 8 {
            return None;
        }
        let b = (0..inner).rev().find(|&k| walk.strides[k][0] == 1)?;
        let (na, nb) = (walk.dims[inner], walk.dims[b]);
        if na < 8 || nb < 8 {
            return None;
        }
        let (sa, db) = (walk.strides[inner][0], walk.strides[b][1]);
        let keep: Vec<usize> = (0..rank).filter(|&k| k != inner && k != b).collect();
        let batch = Walk::new(
            keep.iter().map(|&k| walk.dims[k]).collect(),
            keep.iter().map(|&k| walk.strides[k]).collect(),
        );
        Some((|| {
            let [_, _, f] = self.entry(elem)?;
            let side = tile_side(elem);
            let tiles_a = na.div_ceil(side);
            let tiles = tiles_a * nb.div_ceil(side);
            let batches = batch.len();
            let grid = (
                u32::try_from(tiles).map_err(|_| format!("{}: {tiles} tiles", self.what))?,
                batches.clamp(1, 65_535) as u32,
                1,
            );
            let args = KernelArgs::new()
                .ptr(src)
                .ptr(dst)
                .i32(na as i32)
                .i32(nb as i32)
                .i64(sa)
                .i64(db)
                .i32(tiles_a as i32)
                .i64(batches as i64);
            let mut args = batch.push_args(args, self.what)?;
            self.launch(f, stream, grid, (32, 8, 1), &mut args)
        })())
    }

    fn entry(&self, elem: usize) -> Result<&[Function; 3], String> {
        SIZES
            .iter()
            .position(|&e| e == elem)
            .map(|i| &self.entries[i])
            .ok_or_else(|| format!("{}: no copy kernel for {elem}-byte elements", self.what))
    }

    fn launch(
        &self,
        f: &Function,
        stream: &Stream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &mut KernelArgs,
    ) -> Result<(), String> {
        // SAFETY: the arguments match the entry point; the caller's walk stays inside both
        // tensors, which outlive the queued work.
        unsafe { f.launch(stream, grid, block, 0, args) }.map_err(|e| format!("{}: {e}", self.what))
    }
}

/// The side of a transpose tile of `elem`-byte elements (as the program instantiates it):
/// 64 for 1- and 2-byte elements, so a warp moves 64 bytes per access, else 32.
fn tile_side(elem: usize) -> usize {
    if elem <= 2 { 64 } else { 32 }
}

/// Elements of `elem` bytes as a byte offset, for pointer arithmetic on device addresses.
pub(crate) fn byte_offset(elements: i64, elem: usize) -> i64 {
    elements * elem as i64
}
