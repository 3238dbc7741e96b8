//! The CUDA kernels: one block per batch and class ranks the candidates by falling score
//! (ties by rising index) and sweeps them in order, the block voting on whether a kept box
//! suppresses each; a second kernel places every class's kept boxes at its offset in the
//! selection and writes the count.

use torchtrt_plugin_api::{CudaLaunch, DType, PluginResult};

use super::rule::{Layout, Rule};
use crate::cuda::{self, Args, Program};
use crate::support::Origin;

pub(crate) const PROGRAM: Program = Program {
    name: "nms",
    source: r#"
/* Scores as integers ordered as floats are by total order (NaN above +inf). */
__device__ __forceinline__ int score_key(float s) {
    int b = __float_as_int(s);
    return b < 0 ? b ^ 0x7fffffff : b;
}
__device__ __forceinline__ void box_corners(const float* q, int centered, float* c) {
    if (centered) {
        float hw = q[2] * 0.5f, hh = q[3] * 0.5f;
        c[0] = q[1] - hh; c[1] = q[0] - hw; c[2] = q[1] + hh; c[3] = q[0] + hw;
    } else {
        c[0] = fminf(q[0], q[2]); c[1] = fminf(q[1], q[3]);
        c[2] = fmaxf(q[0], q[2]); c[3] = fmaxf(q[1], q[3]);
    }
}
__device__ __forceinline__ bool suppresses(const float* a, const float* b, float iou) {
    float y0 = fmaxf(a[0], b[0]), x0 = fmaxf(a[1], b[1]);
    float y1 = fminf(a[2], b[2]), x1 = fminf(a[3], b[3]);
    if (x1 <= x0 || y1 <= y0) return false;
    float inter = (x1 - x0) * (y1 - y0);
    float area_a = (a[2] - a[0]) * (a[3] - a[1]);
    float area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float uni = area_a + area_b - inter;
    if (inter <= 0.0f || area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) return false;
    return inter / uni > iou;
}
template <typename D>
__device__ __forceinline__ void load_box(const typename D::T* boxes, i64 i, int centered, float* c) {
    float q[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] = Elem<D>::load(boxes, 4 * i + k);
    box_corners(q, centered, c);
}

/* Block p = batch * C + class. order: [P, N] ranked candidates; kept: [P, keep]; counts: [P]. */
template <typename D>
__device__ __forceinline__ void nms_class(const typename D::T* boxes, const typename D::T* scores,
        int* order, int* kept, int* counts, i64 N, i64 C, i64 keep, int centered, float iou,
        int use_thr, float thr) {
    __shared__ int valid_count;
    __shared__ int kept_count;
    i64 p = blockIdx.x;
    const typename D::T* s = scores + p * N;
    const typename D::T* b = boxes + (p / C) * N * 4;
    int* ord = order + p * N;
    int* kp = kept + p * keep;
    if (threadIdx.x == 0) { valid_count = 0; kept_count = 0; }
    __syncthreads();
    for (i64 i = threadIdx.x; i < N; i += blockDim.x) {
        float si = Elem<D>::load(s, i);
        if (use_thr && !(si > thr)) continue;
        int ki = score_key(si);
        int rank = 0;
        for (i64 j = 0; j < N; ++j) {
            float sj = Elem<D>::load(s, j);
            if (use_thr && !(sj > thr)) continue;
            int kj = score_key(sj);
            rank += (kj > ki) || (kj == ki && j < i);
        }
        ord[rank] = (int)i;
        atomicAdd(&valid_count, 1);
    }
    __syncthreads();
    int m = valid_count;
    for (int r = 0; r < m; ++r) {
        int k = kept_count;
        if (k >= keep) break;
        int i = ord[r];
        float ci[4];
        load_box<D>(b, i, centered, ci);
        bool hit = false;
        for (int t = threadIdx.x; t < k; t += blockDim.x) {
            float ct[4];
            load_box<D>(b, kp[t], centered, ct);
            hit = hit || suppresses(ct, ci, iou);
        }
        bool suppressed = __syncthreads_or(hit);
        if (!suppressed && threadIdx.x == 0) { kp[k] = i; kept_count = k + 1; }
        __syncthreads();
    }
    if (threadIdx.x == 0) counts[p] = kept_count;
}

/* Block p copies class p's kept boxes to its offset (the kept boxes of the classes before
   it); the last block writes the total. width 3: (batch, class, box) rows; 1: box indices. */
__device__ __forceinline__ void nms_gather(const int* kept, const int* counts, i64* out,
        i64* count, i64 P, i64 C, i64 keep, int width) {
    __shared__ i64 offset;
    i64 p = blockIdx.x;
    if (threadIdx.x == 0) offset = 0;
    __syncthreads();
    i64 part = 0;
    for (i64 q = threadIdx.x; q < p && q < P; q += blockDim.x) part += counts[q];
    if (part) atomicAdd((unsigned long long*)&offset, (unsigned long long)part);
    __syncthreads();
    if (p >= P) { if (threadIdx.x == 0) *count = 0; return; }
    int k = counts[p];
    for (int t = threadIdx.x; t < k; t += blockDim.x) {
        i64 row = offset + t;
        i64 box = kept[p * keep + t];
        if (width == 3) {
            out[3 * row] = p / C; out[3 * row + 1] = p % C; out[3 * row + 2] = box;
        } else {
            out[row] = box;
        }
    }
    if (p == P - 1 && threadIdx.x == 0) *count = offset + k;
}

#define NMS_KERNELS(name, D) \
extern "C" __global__ void nms_class_##name(const D::T* b, const D::T* s, int* o, int* k, int* c, \
        i64 N, i64 C, i64 keep, int centered, float iou, int use_thr, float thr) \
    { nms_class<D>(b, s, o, k, c, N, C, keep, centered, iou, use_thr, thr); }
FOR_EACH_DTYPE(NMS_KERNELS)
extern "C" __global__ void nms_gather_i64(const int* k, const int* c, i64* out, i64* count, i64 P,
        i64 C, i64 keep, int width)
    { nms_gather(k, c, out, count, P, C, keep, width); }
"#,
};

/// Threads per block of both kernels.
const THREADS: u32 = 256;

/// Workspace bytes for `b` batches, `c` classes and `n` boxes: each class's ranked
/// candidates and kept boxes (`i32`) and its count.
pub(crate) fn workspace_bytes(b: usize, c: usize, n: usize) -> usize {
    let problems = b.saturating_mul(c);
    problems
        .saturating_mul(n)
        .saturating_mul(2)
        .saturating_add(problems)
        .saturating_mul(4)
}

/// Queues the suppression of one launch.
pub(super) fn enqueue(origin: &Origin, rule: &Rule, c: &CudaLaunch<'_>) -> PluginResult<()> {
    let ([boxes, scores, ..], [selected, count]) = (c.inputs, c.outputs) else {
        return Err(origin.input_error(format!(
            "expects boxes, scores and 2 outputs, got {} inputs and {} outputs",
            c.inputs.len(),
            c.outputs.len()
        )));
    };
    let (b, classes, n) = rule
        .problem(&boxes.desc.shape, &scores.desc.shape)
        .map_err(|e| origin.input_error(e))?;
    let dtype = boxes.desc.dtype;
    let suffix = cuda::suffix(dtype)
        .filter(|_| scores.desc.dtype == dtype)
        .ok_or_else(|| origin.input_error(format!("no CUDA kernel for {dtype}")))?;
    let keep = rule.kept_per_class(n);
    let width = match rule.layout {
        Layout::Onnx => 3,
        Layout::Torchvision => 1,
    };
    let problems = b * classes;
    let numel = |shape: &[i64]| torchtrt_plugin_api::numel(shape).unwrap_or(0);
    if selected.desc.dtype != DType::I64
        || numel(&selected.desc.shape) < problems * keep * width
        || count.desc.dtype != DType::I64
        || numel(&count.desc.shape) != 1
    {
        return Err(origin.input_error(format!(
            "outputs {} and {} do not hold {problems}×{keep} selections and a count",
            selected.desc, count.desc
        )));
    }
    let grid = |blocks: usize| {
        u32::try_from(blocks.max(1))
            .map_err(|_| origin.input_error(format!("{blocks} classes exceed one CUDA grid")))
    };
    let order = c.workspace;
    let kept = order + (problems * n * 4) as u64;
    let counts = kept + (problems * n * 4) as u64;
    let big = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    if problems > 0 {
        let args = Args::default()
            .ptr(boxes.ptr)
            .ptr(scores.ptr)
            .ptr(order)
            .ptr(kept)
            .ptr(counts)
            .i64(big(n))
            .i64(big(classes))
            .i64(big(keep))
            .i32(i32::from(rule.centered))
            .f32(rule.iou)
            .i32(i32::from(rule.score.is_some()))
            .f32(rule.score.unwrap_or(0.0));
        // SAFETY: the arguments match the kernel; inputs and outputs were checked against
        // the shapes; the workspace holds the ranked, kept and count tables.
        unsafe {
            cuda::launch(
                &PROGRAM,
                &format!("nms_class_{suffix}"),
                c,
                (grid(problems)?, 1, 1),
                (THREADS, 1, 1),
                0,
                args,
            )
        }?;
    }
    let args = Args::default()
        .ptr(kept)
        .ptr(counts)
        .ptr(selected.ptr)
        .ptr(count.ptr)
        .i64(big(problems))
        .i64(big(classes))
        .i64(big(keep))
        .i32(width as i32);
    // SAFETY: as above; the selection holds `problems × keep` rows of `width`.
    unsafe {
        cuda::launch(
            &PROGRAM,
            "nms_gather_i64",
            c,
            (grid(problems)?, 1, 1),
            (THREADS, 1, 1),
            0,
            args,
        )
    }
}
