//! Flash attention on tensor cores (sm_80+) for the common f16/bf16 `Attention` layers:
//! head sizes 64 or 128 (queries/keys and values alike), no past keys, valid-key counts,
//! soft caps or windows. A block of four warps owns 64 query rows at head 128 and 128 at
//! head 64 ([`m_tiles`]); each warp keeps its rows' queries as `mma` operands in registers
//! and walks the keys in tiles of 64, staged in
//! shared memory by `cp.async` (a tile's values load while its scores are computed, the
//! next tile's keys while the values are applied) and read as `ldmatrix` fragments. Scores
//! `Q·Kᵀ` and the output `P·V` are `mma.m16n8k16` products with f32 accumulation, the
//! softmax is online (running maximum and sum per row, in the exp2 domain), and no score
//! matrix leaves the registers. Masks (bool or additive, broadcast by strides) and causal
//! masking apply per score; a query that may attend no key gets zeros, as in the general
//! kernel.

use torchtrt_plugin_api::DType;

use super::mma::TENSOR_CORES;
use super::prelude::{Program, with_prelude};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

/// Head sizes the kernel is instantiated for.
pub(crate) const HEADS: [usize; 2] = [64, 128];
/// Query m-tiles of 16 rows each warp of the four owns at head size `head`: two at 64 (each
/// key and value fragment read serves 32 rows), one at 128 (the registers hold no more).
fn m_tiles(head: usize) -> usize {
    if head <= 64 { 2 } else { 1 }
}

pub(crate) static PROGRAM: Program = Program::new("core_flash_attention", || {
    let mut entries = String::new();
    for (dt, bf) in [("f16", 0), ("bf16", 1)] {
        for (m, code) in [("none", 0), ("bool", 1), ("add", 2)] {
            for d in HEADS {
                let tag = if bf == 1 { "BF16" } else { "F16" };
                entries.push_str(&format!(
                    "extern \"C\" __global__ void __launch_bounds__(128) flash_{dt}_{m}_d{d}(\
                     FA_PARAMS) {{ flash<{tag}, {bf}, {code}, {d}, {mt}>(FA_ARGS); }}\n",
                    mt = m_tiles(d)
                ));
            }
        }
    }
    with_prelude(&format!("{TENSOR_CORES}{BODY}{entries}"))
});

/// The entry point for `dtype`, mask kind and head size.
pub(crate) fn entry(dtype: DType, mask: &str, head: usize) -> Option<String> {
    let dt = match dtype {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => return None,
    };
    HEADS
        .contains(&head)
        .then(|| format!("flash_{dt}_{mask}_d{head}"))
}

const BODY: &str = r#"
#define FA_PARAMS const void* q, const void* k, const void* v, const void* mask, void* y, \
    int S, int KV, int group, float scale_log2, int causal, \
    i64 qb, i64 qh, i64 qs, i64 kb, i64 kh, i64 ks, i64 vb, i64 vh, i64 vs, \
    i64 yb, i64 yh, i64 ys, i64 mb, i64 mh, i64 mq, i64 mk, i64 mlen
#define FA_ARGS q, k, v, mask, y, S, KV, group, scale_log2, causal, qb, qh, qs, kb, kh, ks, \
    vb, vh, vs, yb, yh, ys, mb, mh, mq, mk, mlen
#define FA_TILE 64

__device__ __forceinline__ float fa_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/* A 64-row tile of keys or values (rows from `first`, `stride` apart) into shared memory. */
template <int HD>
__device__ __forceinline__ void fa_stage(u16 (*tile)[HD + 8], const u16* base, i64 stride,
    int first, int count) {
    const int chunks = HD / 8;
    for (int c = threadIdx.x; c < FA_TILE * chunks; c += 128) {
        int r = c / chunks, col = (c % chunks) * 8;
        bool ok = first + r < count;
        tc_copy16(&tile[r][col], ok ? base + (i64)(first + r) * stride + col : base, ok);
    }
}

/* MT m-tiles of 16 query rows per warp, so the block owns 64·MT rows; each key and value
   fragment read from shared memory serves all of them. */
template <typename D, int BF, int MASK, int HD, int MT>
__device__ __forceinline__ void flash(FA_PARAMS) {
#if __CUDA_ARCH__ >= 800
    __shared__ __align__(16) u16 kt[FA_TILE][HD + 8];
    __shared__ __align__(16) u16 vt[FA_TILE][HD + 8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / group;
    const int rows = 64 * MT, q0 = blockIdx.x * rows + warp * 16 * MT;
    const float ninf = -__int_as_float(0x7f800000);
    const u16* qp = (const u16*)q + b * qb + h * qh;
    const u16* kp = (const u16*)k + b * kb + hk * kh;
    const u16* vp = (const u16*)v + b * vb + hk * vh;

    unsigned qa[MT][HD / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                int row = q0 + 16 * mt + g + 8 * (r & 1), col = 16 * kk + 2 * t + 8 * (r >> 1);
                qa[mt][kk][r] = row < S ? *(const unsigned*)(qp + (i64)row * qs + col) : 0u;
            }

    float o[MT][HD / 8][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
        m[mt][0] = m[mt][1] = ninf;
        l[mt][0] = l[mt][1] = 0.0f;
    }

    int end = KV;
    if (causal) end = min(end, (int)blockIdx.x * rows + rows);
    const int tiles = (end + FA_TILE - 1) / FA_TILE, mat = lane >> 3;
    if (tiles > 0) {
        fa_stage<HD>(kt, kp, ks, 0, KV);
        tc_commit();
    }
    for (int it = 0; it < tiles; ++it) {
        const int j0 = it * FA_TILE;
        /* Keys j0.. have landed and every warp is done with the last tile's values: fetch
           this tile's values while the scores are computed. */
        tc_wait();
        __syncthreads();
        fa_stage<HD>(vt, vp, vs, j0, KV);
        tc_commit();

        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                unsigned f[4];
                tc_ldmatrix<0>(f, kt[(n + (mat >> 1)) * 8 + (lane & 7)] + 16 * kk + (mat & 1) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    tc_mma<BF>(s[mt][n], qa[mt][kk], f[0], f[1]);
                    tc_mma<BF>(s[mt][n + 1], qa[mt][kk], f[2], f[3]);
                }
            }

        unsigned pa[MT][4][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float best[2] = {ninf, ninf};
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    int row = q0 + 16 * mt + g + 8 * (e >> 1), key = j0 + n * 8 + 2 * t + (e & 1);
                    float x = s[mt][n][e] * scale_log2;
                    bool out = key >= KV || (causal && key > row);
                    if (MASK != 0 && !out) {
                        if (key >= mlen) {
                            out = true;
                        } else if (row < S) {
                            i64 at = b * mb + h * mh + row * mq + key * mk;
                            if (MASK == 1) out = !((const unsigned char*)mask)[at];
                            else x += LOAD(D, mask, at) * 1.4426950408889634f;
                        }
                    }
                    s[mt][n][e] = out ? ninf : x;
                    best[e >> 1] = fmaxf(best[e >> 1], s[mt][n][e]);
                }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                best[r] = fmaxf(best[r], __shfl_xor_sync(0xffffffffu, best[r], 1));
                best[r] = fmaxf(best[r], __shfl_xor_sync(0xffffffffu, best[r], 2));
                float mn = fmaxf(m[mt][r], best[r]);
                float use = mn == ninf ? 0.0f : mn;
                float c = fa_exp2(m[mt][r] - use);
                l[mt][r] *= c;
#pragma unroll
                for (int n = 0; n < HD / 8; ++n) {
                    o[mt][n][2 * r] *= c;
                    o[mt][n][2 * r + 1] *= c;
                }
                m[mt][r] = mn;
                best[r] = use;
            }
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                float p0 = fa_exp2(s[mt][n][0] - best[0]), p1 = fa_exp2(s[mt][n][1] - best[0]);
                float p2 = fa_exp2(s[mt][n][2] - best[1]), p3 = fa_exp2(s[mt][n][3] - best[1]);
                l[mt][0] += p0 + p1;
                l[mt][1] += p2 + p3;
                pa[mt][n >> 1][2 * (n & 1)] = tc_pack<BF>(p0, p1);
                pa[mt][n >> 1][2 * (n & 1) + 1] = tc_pack<BF>(p2, p3);
            }
        }
        /* This tile's values have landed and every warp is done with its keys: fetch the
           next tile's keys while the values are applied. */
        tc_wait();
        __syncthreads();
        if (it + 1 < tiles) {
            fa_stage<HD>(kt, kp, ks, j0 + FA_TILE, KV);
            tc_commit();
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int n = 0; n < HD / 8; n += 2) {
                unsigned f[4];
                tc_ldmatrix<1>(f, vt[16 * kk + (mat & 1) * 8 + (lane & 7)] + (n + (mat >> 1)) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    tc_mma<BF>(o[mt][n], pa[mt][kk], f[0], f[1]);
                    tc_mma<BF>(o[mt][n + 1], pa[mt][kk], f[2], f[3]);
                }
            }
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            int row = q0 + 16 * mt + g + 8 * r;
            if (row >= S) continue;
            float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
            u16* yp = (u16*)y + b * yb + h * yh + (i64)row * ys + 2 * t;
#pragma unroll
            for (int n = 0; n < HD / 8; ++n)
                *(unsigned*)(yp + 8 * n) = tc_pack<BF>(o[mt][n][2 * r] * inv, o[mt][n][2 * r + 1] * inv);
        }
#endif
}
"#;

/// Where the tensor-core kernel applies: the operands' geometry and its launch.
pub(crate) struct FlashLaunch {
    /// Batch, query heads, query length, key length, heads per key head.
    pub dims: [usize; 5],
    /// Head size (of queries, keys and values).
    pub head: usize,
    /// Base pointers of q, k, v, the mask (0 for none) and the output.
    pub ptrs: [u64; 5],
    /// Row strides (batch, head, position) of q, k, v and the output, then the mask's
    /// (batch, head, query, key) strides and its key count.
    pub strides: [i64; 17],
    /// `scale · log₂e`.
    pub scale_log2: f32,
    /// Keys after a query's position are masked.
    pub causal: bool,
}

impl FlashLaunch {
    /// Whether every operand is aligned for 16-byte copies and 32-bit pair accesses: row
    /// starts at multiples of 8 elements from 16-byte-aligned bases.
    pub(crate) fn aligned(&self) -> bool {
        let rows = [0..3, 3..6, 6..9, 9..12].map(|r| &self.strides[r]);
        let ptrs = [0, 1, 2, 4].map(|i| self.ptrs[i]);
        ptrs.iter().all(|p| p % 16 == 0) && rows.iter().all(|s| s.iter().all(|v| v % 8 == 0))
    }

    /// Queues the kernel `f` on `stream`.
    pub(crate) fn launch(&self, f: &Function, stream: &Stream) -> Result<(), String> {
        let [b, h, s, kv, group] = self.dims;
        let word = |v: usize| {
            i32::try_from(v).map_err(|_| format!("flash attention: {v} exceeds a 32-bit argument"))
        };
        let grid_dim = |v: usize| {
            u32::try_from(v)
                .ok()
                .filter(|&v| v <= 65_535)
                .ok_or_else(|| format!("flash attention: {v} exceeds the CUDA grid"))
        };
        let grid = (
            u32::try_from(s.div_ceil(64 * m_tiles(self.head)))
                .map_err(|_| format!("flash attention: {s} query rows exceed the CUDA grid"))?,
            grid_dim(h)?,
            grid_dim(b)?,
        );
        let args = self.ptrs.iter().fold(KernelArgs::new(), |a, &p| a.ptr(p));
        let args = args
            .i32(word(s)?)
            .i32(word(kv)?)
            .i32(word(group)?)
            .f32(self.scale_log2)
            .i32(i32::from(self.causal));
        let mut args = self.strides.iter().fold(args, |a, &v| a.i64(v));
        // SAFETY: the arguments match `flash_*`; the caller checked every operand holds the
        // elements its shape describes, the alignment (`aligned`) and the head size of the
        // entry point, and the operands outlive the queued work.
        unsafe { f.launch(stream, grid, (128, 1, 1), 0, &mut args) }
            .map_err(|e| format!("flash attention: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn entries_name_dtype_mask_and_head() {
        use torchtrt_plugin_api::DType;
        assert_eq!(
            super::entry(DType::F16, "add", 64).as_deref(),
            Some("flash_f16_add_d64")
        );
        assert_eq!(super::entry(DType::F32, "none", 64), None);
        assert_eq!(super::entry(DType::BF16, "bool", 96), None);
    }
}
