//! CUDA C for tensor-core kernels (the helpers do nothing below sm_80): `mma.m16n8k16` with f32
//! accumulation on f16 or bf16 operands, `mma.m16n8k32` with 32-bit integer sums on bytes, `ldmatrix` fragment loads, `cp.async` 16-byte
//! copies into shared memory, and rounding pairs of floats into 16-bit pairs.

/// Prepended to the bodies of programs that use tensor cores (after the prelude).
pub(super) const TENSOR_CORES: &str = r#"
template <int BF>
__device__ __forceinline__ void tc_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* The m16n8k32 products of signed weight bytes (a) and input bytes (b: signed, or unsigned
   with U) added to 32-bit sums. Each register holds four bytes along k where the m16n8k16
   fragments hold two 16-bit elements, so the same shared-memory rows feed both. */
template <int U>
__device__ __forceinline__ void tc_imma(int* c, const unsigned* a, unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    if (U)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* Two floats rounded to nearest even into one f16x2 / bf16x2 word, `lo` in the low half. */
template <int BF>
__device__ __forceinline__ unsigned tc_pack(float lo, float hi) {
    unsigned r = 0;
#if __CUDA_ARCH__ >= 800
    if (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ unsigned tc_shared(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}

/* 16 bytes from `src` into shared `dst`, or zeros when `ok` is false (nothing is read). */
__device__ __forceinline__ void tc_copy16(void* dst, const void* src, bool ok) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(tc_shared(dst)), "l"(src), "r"(ok ? 16 : 0));
#endif
}

__device__ __forceinline__ void tc_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Waits until at most N of this thread's committed groups of copies are still in flight. */
template <int N>
__device__ __forceinline__ void tc_wait_group() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#endif
}

/* Waits until every committed group of copies has landed. */
__device__ __forceinline__ void tc_wait() { tc_wait_group<0>(); }

/* Four 8×8 matrices of 16-bit elements from shared memory, rows addressed by lanes 8m..8m+7
   for matrix m; transposed with TRANS. */
template <int TRANS>
__device__ __forceinline__ void tc_ldmatrix(unsigned* r, const u16* row) {
#if __CUDA_ARCH__ >= 800
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_shared(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_shared(row)));
#endif
}

"#;
