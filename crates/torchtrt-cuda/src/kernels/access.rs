//! CUDA C for the memory-bound core layers, appended to [`PRELUDE`](super::prelude::PRELUDE):
//! element types of every dtype with a compute type and conversions, chunked 16-byte
//! access, fast 32-bit division by run-time divisors and the strided walk.
//!
//! - `Ty<D>` for a dtype tag `D` (`F32`, `F16`, `BF16`, `F64`, `I64`, `I32`, `I16`, `I8`,
//!   `U8`, `BOOL`): storage type `S`, compute type `C` (f32 for the half types), `ld`/`st`.
//! - `Pack<S, V>`: `V` elements of `S` moved as one access of `V·sizeof(S)` bytes (≤ 16).
//! - `FastDiv {d, m, s}` divides a `u32` below 2³¹ by `d`, `m` and `s` from
//!   [`fast_div`](super::layout::fast_div).
//! - `walk<I, N>(i, rank, dv, st, off)`: the offsets, under `N` stride sets, of the `i`-th
//!   element (signed, `i32` or `i64`) of a row-major walk over `rank` dims given innermost first (`u32` index math
//!   with fast division, or `u64`). Kernels take the dims as [`MAX_RANK`] `DIM_PARAMS`
//!   triples and strides as `STRIDE_PARAMS`; [`Walk`](super::layout::Walk) fills them.

/// The largest rank of a strided walk after dims merge.
pub(crate) const MAX_RANK: usize = 6;

/// The CUDA C source.
pub(crate) const ACCESS: &str = r#"
typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef short i16;
typedef signed char i8;
typedef unsigned long long u64;

struct F64 {}; struct I64 {}; struct I32 {}; struct I16 {}; struct I8 {}; struct U8 {};
struct BOOL {};

template <typename D> struct Ty;
#define PLAIN_TY(D, TY) template <> struct Ty<D> { \
    typedef TY S; typedef TY C; \
    static __device__ __forceinline__ C ld(S v) { return v; } \
    static __device__ __forceinline__ S st(C v) { return v; } };
PLAIN_TY(F32, float)
PLAIN_TY(F64, double)
PLAIN_TY(I64, i64)
PLAIN_TY(I32, i32)
PLAIN_TY(I16, i16)
PLAIN_TY(I8, i8)
PLAIN_TY(U8, u8)
PLAIN_TY(BOOL, u8)
template <> struct Ty<F16> {
    typedef u16 S; typedef float C;
    static __device__ __forceinline__ float ld(u16 v) { return h2f(v); }
    static __device__ __forceinline__ u16 st(float v) { return f2h(v); }
};
template <> struct Ty<BF16> {
    typedef u16 S; typedef float C;
    static __device__ __forceinline__ float ld(u16 v) { return b2f(v); }
    static __device__ __forceinline__ u16 st(float v) { return f2b(v); }
};

template <int B> struct Chunk;
template <> struct Chunk<1> { typedef u8 T; };
template <> struct Chunk<2> { typedef u16 T; };
template <> struct Chunk<4> { typedef u32 T; };
template <> struct Chunk<8> { typedef uint2 T; };
template <> struct Chunk<16> { typedef uint4 T; };

template <typename S, int V> union Pack {
    typename Chunk<sizeof(S) * V>::T raw;
    S e[V];
};
template <typename S, int V> __device__ __forceinline__ Pack<S, V> ld_pack(const S* p) {
    Pack<S, V> v;
    v.raw = *reinterpret_cast<const typename Chunk<sizeof(S) * V>::T*>(p);
    return v;
}
template <typename S, int V> __device__ __forceinline__ void st_pack(S* p, const Pack<S, V>& v) {
    *reinterpret_cast<typename Chunk<sizeof(S) * V>::T*>(p) = v.raw;
}

struct FastDiv { u32 d, m, s; };

#define MAX_RANK 6
#define DIM_PARAMS(k) u32 d##k, u32 m##k, u32 s##k
#define DIMS_PARAMS DIM_PARAMS(0), DIM_PARAMS(1), DIM_PARAMS(2), DIM_PARAMS(3), \
    DIM_PARAMS(4), DIM_PARAMS(5)
#define DIMS_INIT(dv) const FastDiv dv[MAX_RANK] = {{d0, m0, s0}, {d1, m1, s1}, \
    {d2, m2, s2}, {d3, m3, s3}, {d4, m4, s4}, {d5, m5, s5}}
#define STRIDE_PARAMS(x) i64 x##0, i64 x##1, i64 x##2, i64 x##3, i64 x##4, i64 x##5
#define STRIDES_INIT(x) {x##0, x##1, x##2, x##3, x##4, x##5}

template <typename I> struct Index;
template <> struct Index<u32> {
    typedef i32 SI;
    static __device__ __forceinline__ u32 div(const FastDiv& f, u32 n) {
        return (__umulhi(n, f.m) + n) >> f.s;
    }
};
template <> struct Index<u64> {
    typedef i64 SI;
    static __device__ __forceinline__ u64 div(const FastDiv& f, u64 n) { return n / f.d; }
};

template <typename I, int N>
__device__ __forceinline__ void walk(I i, int rank, const FastDiv* dv,
                                     const i64 (*st)[MAX_RANK],
                                     typename Index<I>::SI* off) {
    typedef typename Index<I>::SI SI;
#pragma unroll
    for (int j = 0; j < N; ++j) off[j] = 0;
#pragma unroll
    for (int k = 0; k < MAX_RANK; ++k) {
        if (k < rank) {
            I c = i;
            if (k + 1 < rank) {
                I q = Index<I>::div(dv[k], i);
                c = i - q * (I)dv[k].d;
                i = q;
            }
#pragma unroll
            for (int j = 0; j < N; ++j) off[j] += (SI)c * (SI)st[j][k];
        }
    }
}

#define GRID_STRIDE(I, i, n) \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n); \
         i += (I)gridDim.x * blockDim.x)
"#;
