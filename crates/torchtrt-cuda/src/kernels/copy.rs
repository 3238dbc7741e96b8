//! The strided copy every shuffle layer reduces to: `dst[Σ cₖ·dₖ] = src[Σ cₖ·sₖ]` over a
//! walk of merged dims, on elements of 1 to 16 bytes (dtype-agnostic; contiguous rows are
//! widened to 16-byte elements when aligned). A walk whose innermost destination dim is
//! strided in the source but another dim is contiguous there (a transpose that moves the
//! innermost dim) goes through shared-memory tiles instead: 64×64 moving two adjacent
//! elements per access when dims, strides and addresses are even, else 32×32; every
//! thread's loads are issued before its stores.

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

/* One T x T tile per block of 32 x 8 threads. Each thread loads P adjacent elements of a
   source row per access, all its accesses in flight before they are parked in shared
   memory, then stores P adjacent elements of a destination row per access. With P > 1 the
   caller guarantees na, nb, sa, db and the batch offsets are multiples of P and both
   addresses are aligned to P elements. */
template <typename S, int T, int P>
__device__ __forceinline__ void transpose_tiles(const S* src, S* dst, u32 na, u32 nb, i64 sa,
                                                i64 db, u32 tiles_a, u64 batches, int rank,
                                                const FastDiv* dv, const i64 (*st)[MAX_RANK]) {
    const int R = T / 8, C = T / (32 * P);
    __shared__ S tile[T][T + 1];
    u32 ta = blockIdx.x % tiles_a, tb = blockIdx.x / tiles_a;
    u32 tx = threadIdx.x, ty = threadIdx.y;
    for (u64 bi = blockIdx.y; bi < batches; bi += gridDim.y) {
        i64 off[2];
        walk<u64, 2>(bi, rank, dv, st, off);
        Pack<S, P> v[R][C];
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
                u32 a = ta * T + ty + r * 8, b = tb * T + (tx + c * 32) * P;
                if (a < na && b < nb) v[r][c] = ld_pack<S, P>(src + off[0] + (i64)a * sa + b);
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
#pragma unroll
                for (int p = 0; p < P; ++p) tile[ty + r * 8][(tx + c * 32) * P + p] = v[r][c].e[p];
            }
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
                u32 b = tb * T + ty + r * 8, a = ta * T + (tx + c * 32) * P;
                if (a < na && b < nb) {
                    Pack<S, P> w;
#pragma unroll
                    for (int p = 0; p < P; ++p) w.e[p] = tile[(tx + c * 32) * P + p][ty + r * 8];
                    st_pack<S, P>(dst + off[1] + (i64)b * db + a, w);
                }
            }
        }
        __syncthreads();
    }
}

#define TILE_ENTRY(NAME, S, T, P) \
extern "C" __global__ void NAME(const S* src, S* dst, u32 na, u32 nb, i64 sa, i64 db, \
                                u32 tiles_a, u64 batches, int rank, DIMS_PARAMS, \
                                STRIDE_PARAMS(x), STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    transpose_tiles<S, T, P>(src, dst, na, nb, sa, db, tiles_a, batches, rank, dv, st); \
}

#define COPY_ENTRIES(E, S) \
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
TILE_ENTRY(tiles_##E, S, 32, 1)
COPY_ENTRIES(1, u8)
COPY_ENTRIES(2, u16)
COPY_ENTRIES(4, u32)
COPY_ENTRIES(8, u64)
COPY_ENTRIES(16, uint4)
TILE_ENTRY(tiles2_1, u8, 64, 2)
TILE_ENTRY(tiles2_2, u16, 64, 2)
TILE_ENTRY(tiles2_4, u32, 64, 2)
TILE_ENTRY(tiles2_8, u64, 64, 2)
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
    /// `tiles2_E` (64×64 tiles, two adjacent elements per access) for E = 1, 2, 4, 8.
    pairs: Vec<Function>,
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
        let pairs = SIZES[..4]
            .iter()
            .map(|e| load(format!("tiles2_{e}")))
            .collect::<Result<_, String>>()?;
        Ok(Copier {
            what,
            entries,
            pairs,
        })
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
        let even = |v: i64| v % 2 == 0;
        let paired = elem <= 8
            && [na as i64, nb as i64, sa, db].into_iter().all(even)
            && batch.strides.iter().flatten().all(|&v| even(v))
            && [src, dst].iter().all(|p| p.is_multiple_of(2 * elem as u64));
        Some((|| {
            let [_, _, single] = self.entry(elem)?;
            let (f, side) = match SIZES.iter().position(|&e| e == elem) {
                Some(i) if paired => (&self.pairs[i], 64),
                _ => (single, 32),
            };
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

/// Elements of `elem` bytes as a byte offset, for pointer arithmetic on device addresses.
pub(crate) fn byte_offset(elements: i64, elem: usize) -> i64 {
    elements * elem as i64
}
