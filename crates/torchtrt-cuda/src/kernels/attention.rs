//! `Attention` layers in f32, f16 and bf16 with head sizes up to [`MAX_HEAD`]: a warp per
//! query row walks the keys with an online softmax in f32 (running maximum, sum and output
//! in registers), so no score matrix is stored. Each key's score is one dot product
//! reduced across the warp. Grouped heads, past keys and values, bool or additive masks,
//! causal masking, soft caps and both layouts are read in place.

use torchtrt_core::layers::{Attention, InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::access::ACCESS;
use super::flash_attention::{self, FlashLaunch};
use super::operands::{dims, expect_arity};
use super::prelude::{Program, dtype_suffix, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Attention";

/// The largest head size (of queries/keys and of values) the kernel holds in registers.
pub(crate) const MAX_HEAD: usize = 256;
const WARPS: u32 = 4;

static PROGRAM: Program = Program::new("core_attention", || {
    let mut entries = String::new();
    for (dt, d) in [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")] {
        for (m, code) in [("none", 0), ("bool", 1), ("add", 2)] {
            entries.push_str(&format!(
                "extern \"C\" __global__ void __launch_bounds__(128) attention_{dt}_{m}(\
                 ATTN_PARAMS) {{ attention<{d}, {code}>(ATTN_ARGS); }}\n"
            ));
        }
    }
    with_prelude(&format!("{ACCESS}{BODY}{entries}"))
});

const BODY: &str = r#"
#define ATTN_MAXV 8
#define ATTN_PARAMS const void* q, const void* k, const void* v, const void* pk, \
    const void* pv, const void* mask, void* y, int B, int H, int S, int HD, int DV, int group, \
    int KV, int P, float scale, float softcap, int causal, const i64* nonpad, int left, \
    int right, \
    i64 qb, i64 qh, i64 qs, i64 kb, i64 kh, i64 ks, i64 vb, i64 vh, i64 vs, \
    i64 yb, i64 yh, i64 ys, i64 mb, i64 mh, i64 mq, i64 mk, i64 mlen
#define ATTN_ARGS q, k, v, pk, pv, mask, y, B, H, S, HD, DV, group, KV, P, scale, softcap, \
    causal, nonpad, left, right, qb, qh, qs, kb, kh, ks, vb, vh, vs, yb, yh, ys, mb, mh, mq, mk, mlen

template <typename D, int MASK>
__device__ __forceinline__ void attention(ATTN_PARAMS) {
    i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= (i64)B * H * S) return;
    int lane = threadIdx.x & 31;
    int i = (int)(row % S);
    int h = (int)((row / S) % H);
    int b = (int)(row / ((i64)S * H));
    int hk = h / group;
    const float ninf = -__int_as_float(0x7f800000);
    float qv[ATTN_MAXV], acc[ATTN_MAXV];
#pragma unroll
    for (int t = 0; t < ATTN_MAXV; ++t) {
        int d = lane + 32 * t;
        qv[t] = d < HD ? LOAD(D, q, b * qb + h * qh + i * qs + d) * scale : 0.0f;
        acc[t] = 0.0f;
    }
    float m = ninf, l = 0.0f;
    bool allowed = false;
    int total = P + KV;
    i64 valid = nonpad ? nonpad[b] : (i64)total;
    i64 offset = nonpad ? valid - S : (i64)P;
    for (int j = 0; j < total; ++j) {
        i64 diff = i + offset - j;
        if (j >= valid || (causal && diff < 0)) break;
        bool in_window = !(left >= 0 && diff > left) && !(right >= 0 && -diff > right);
        i64 krow, vrow;
        const void* kp;
        const void* vp;
        if (j < P) {
            kp = pk; vp = pv;
            krow = ((i64)b * (H / group) + hk) * (i64)P * HD + (i64)j * HD;
            vrow = ((i64)b * (H / group) + hk) * (i64)P * DV + (i64)j * DV;
        } else {
            kp = k; vp = v;
            krow = b * kb + hk * kh + (i64)(j - P) * ks;
            vrow = b * vb + hk * vh + (i64)(j - P) * vs;
        }
        float part = 0.0f;
#pragma unroll
        for (int t = 0; t < ATTN_MAXV; ++t) {
            int d = lane + 32 * t;
            if (d < HD) part += qv[t] * LOAD(D, kp, krow + d);
        }
        float s = warp_sum(part);
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        float bias = 0.0f;
        if (MASK != 0) {
            if (j < mlen) {
                i64 at = b * mb + h * mh + i * mq + j * mk;
                bias = MASK == 1 ? (((const u8*)mask)[at] ? 0.0f : ninf) : LOAD(D, mask, at);
            } else {
                bias = ninf;
            }
        }
        if (!in_window) bias = ninf;
        if (bias != ninf) allowed = true;
        s += bias;
        if (s == ninf || s != s) continue;
        float mn = fmaxf(m, s);
        float c = __expf(m - mn), p = __expf(s - mn);
        l = l * c + p;
#pragma unroll
        for (int t = 0; t < ATTN_MAXV; ++t) {
            int d = lane + 32 * t;
            if (d < DV) acc[t] = acc[t] * c + p * LOAD(D, vp, vrow + d);
        }
        m = mn;
    }
    float inv = (allowed && l > 0.0f) ? 1.0f / l : 0.0f;
#pragma unroll
    for (int t = 0; t < ATTN_MAXV; ++t) {
        int d = lane + 32 * t;
        if (d < DV) STORE(D, y, b * yb + h * yh + i * ys + d, acc[t] * inv);
    }
}
"#;

/// Where an operand's rows lie: strides of batch, head and sequence position.
fn strides(shape: &[usize], heads: usize) -> Option<([usize; 4], [i64; 3])> {
    match (shape, heads) {
        (&[b, h, s, d], 0) => Some(([b, h, s, d], [(h * s * d) as i64, (s * d) as i64, d as i64])),
        (&[b, s, hidden], n) if n > 0 && hidden % n == 0 => Some((
            [b, n, s, hidden / n],
            [(s * hidden) as i64, (hidden / n) as i64, hidden as i64],
        )),
        _ => None,
    }
}

/// Prepares an `Attention` layer; head sizes known to exceed [`MAX_HEAD`] stay on the host.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Attention(l) = layer else {
        return None;
    };
    if l.scores.is_some() {
        return None;
    }
    let q = inputs.first()?;
    let dt = dtype_suffix(q.dtype)?;
    let too_wide = |t: &InferInput<'_>, heads: usize| {
        let last = t.shape.last().and_then(|d| d.as_const()).unwrap_or(0) as usize;
        let head = last.checked_div(heads).unwrap_or(last);
        head > MAX_HEAD
    };
    if too_wide(q, l.q_heads) || inputs.get(2).is_some_and(|v| too_wide(v, l.kv_heads)) {
        return None;
    }
    let mask = match (l.mask, inputs.get(3).map(|m| m.dtype)) {
        (false, _) => "none",
        (true, Some(DType::Bool)) => "bool",
        (true, Some(d)) if d == q.dtype => "add",
        _ => return None,
    };
    let entry = format!("attention_{dt}_{mask}");
    let prepared = ctx
        .programs
        .function(&PROGRAM.source(), &entry)
        .map_err(|e| e.to_string())
        .and_then(|f| Ok((f, flash_functions(l, q.dtype, mask, ctx)?)))
        .map_err(|e| format!("{WHAT}: {e}"));
    Some(prepared.map(|(f, flash)| {
        Box::new(AttentionKernel {
            layer: l.clone(),
            dtype: q.dtype,
            f,
            flash,
        }) as Box<dyn DeviceKernel>
    }))
}

/// The tensor-core kernels for each head size, where the layer and the device allow them:
/// f16 or bf16 on sm_80 or newer, without past keys, valid-key counts, soft caps or windows.
fn flash_functions(
    l: &Attention,
    dtype: DType,
    mask: &str,
    ctx: &PrepareCtx<'_>,
) -> Result<Vec<(usize, Function)>, String> {
    let plain = !l.past && !l.nonpad && l.softcap == 0.0 && l.left_window < 0 && l.right_window < 0;
    if !plain || ctx.device.compute_capability() < (8, 0) {
        return Ok(Vec::new());
    }
    flash_attention::HEADS
        .iter()
        .filter_map(|&head| flash_attention::entry(dtype, mask, head).map(|e| (head, e)))
        .map(|(head, e)| {
            let f = ctx
                .programs
                .function(&flash_attention::PROGRAM.source(), &e);
            f.map(|f| (head, f)).map_err(|e| e.to_string())
        })
        .collect()
}

struct AttentionKernel {
    layer: Attention,
    dtype: DType,
    f: Function,
    /// Tensor-core kernels by head size (empty where the layer or device rules them out).
    flash: Vec<(usize, Function)>,
}

impl DeviceKernel for AttentionKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let l = &self.layer;
        let n_in = l.input_count();
        expect_arity(WHAT, inputs, outputs, n_in, 1)?;
        if inputs[..3]
            .iter()
            .chain(outputs)
            .any(|t| t.desc.dtype != self.dtype)
        {
            return Err(format!("{WHAT}: prepared for {} tensors", self.dtype));
        }
        let bad = || format!("{WHAT}: q, k, v and the output do not fit one another");
        let (qd, qs) = strides(&dims(&inputs[0].desc)?, l.q_heads).ok_or_else(bad)?;
        let (kd, ks) = strides(&dims(&inputs[1].desc)?, l.kv_heads).ok_or_else(bad)?;
        let (vd, vs) = strides(&dims(&inputs[2].desc)?, l.kv_heads).ok_or_else(bad)?;
        let [b, h, s, d] = qd;
        let (hk, kv, dv) = (kd[1], kd[2], vd[3]);
        if kd[0] != b || kd[3] != d || vd[..3] != kd[..3] || hk == 0 || h % hk != 0 {
            return Err(bad());
        }
        if d > MAX_HEAD || dv > MAX_HEAD {
            return Err(format!(
                "{WHAT}: head sizes {d} and {dv} exceed the CUDA kernel's {MAX_HEAD}"
            ));
        }
        let y_shape = if l.q_heads == 0 {
            vec![b, h, s, dv]
        } else {
            vec![b, s, h * dv]
        };
        if dims(&outputs[0].desc)? != y_shape {
            return Err(bad());
        }
        let (_, ys) = strides(&y_shape, l.q_heads).ok_or_else(bad)?;
        let (mask_ptr, mstrides, mlen) = if l.mask {
            let m = &inputs[3];
            let ms = dims(&m.desc)?;
            let len = *ms.last().unwrap_or(&1);
            let full = [b, h, s, len];
            let st = super::layout::broadcast_strides(&ms, &full)
                .map_err(|e| format!("{WHAT}: mask {e}"))?;
            (m.ptr, [st[0], st[1], st[2], st[3]], len as i64)
        } else {
            (0, [0; 4], 0)
        };
        let (pk, pv, past) = if l.past {
            let at = l.past_input();
            let pks = dims(&inputs[at].desc)?;
            let pvs = dims(&inputs[at + 1].desc)?;
            if pks.len() != 4
                || pks[..2] != [b, hk]
                || pks[3] != d
                || pvs[..3] != pks[..3]
                || pvs[3] != dv
            {
                return Err(format!("{WHAT}: past keys or values do not fit"));
            }
            (inputs[at].ptr, inputs[at + 1].ptr, pks[2])
        } else {
            (0, 0, 0)
        };
        let nonpad = if l.nonpad {
            let t = &inputs[l.nonpad_input()];
            if t.desc.dtype != DType::I64 || dims(&t.desc)? != [b] {
                return Err(format!("{WHAT}: the valid-key counts must be i64[{b}]"));
            }
            t.ptr
        } else {
            0
        };
        let window = |w: i64| i32::try_from(w.max(-1)).unwrap_or(i32::MAX);
        let rows = b * h * s;
        if rows == 0 {
            return Ok(());
        }
        let scale = l.scale.unwrap_or(1.0 / (d as f32).sqrt());
        let mut strides = [0i64; 17];
        let all = qs.iter().chain(&ks).chain(&vs).chain(&ys).chain(&mstrides);
        for (slot, &v) in strides.iter_mut().zip(all.chain([&mlen])) {
            *slot = v;
        }
        if let Some((_, f)) = self.flash.iter().find(|(head, _)| *head == d && dv == d) {
            let launch = FlashLaunch {
                dims: [b, h, s, kv, h / hk],
                head: d,
                ptrs: [
                    inputs[0].ptr,
                    inputs[1].ptr,
                    inputs[2].ptr,
                    mask_ptr,
                    outputs[0].ptr,
                ],
                strides,
                scale_log2: scale * std::f32::consts::LOG2_E,
                causal: l.causal,
            };
            if launch.aligned() {
                return launch.launch(f, stream).map_err(|e| format!("{WHAT}: {e}"));
            }
        }
        let word = |v: usize| {
            i32::try_from(v).map_err(|_| format!("{WHAT}: {v} exceeds a 32-bit argument"))
        };
        let args = KernelArgs::new()
            .ptr(inputs[0].ptr)
            .ptr(inputs[1].ptr)
            .ptr(inputs[2].ptr)
            .ptr(pk)
            .ptr(pv)
            .ptr(mask_ptr)
            .ptr(outputs[0].ptr)
            .i32(word(b)?)
            .i32(word(h)?)
            .i32(word(s)?)
            .i32(word(d)?)
            .i32(word(dv)?)
            .i32(word(h / hk)?)
            .i32(word(kv)?)
            .i32(word(past)?)
            .f32(scale)
            .f32(l.softcap)
            .i32(i32::from(l.causal))
            .ptr(nonpad)
            .i32(window(l.left_window))
            .i32(window(l.right_window));
        let mut args = strides.iter().fold(args, |a, &v| a.i64(v));
        let grid = u32::try_from(rows.div_ceil(WARPS as usize))
            .map_err(|_| format!("{WHAT}: {rows} query rows exceed the CUDA grid"))?;
        // SAFETY: the arguments match `attention_*`; every operand holds the elements its
        // shape describes (checked above) and outlives the queued work.
        unsafe {
            self.f
                .launch(stream, (grid, 1, 1), (32 * WARPS, 1, 1), 0, &mut args)
        }
        .map_err(|e| format!("{WHAT}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn both_layouts_give_row_strides() {
        let (d, s) = super::strides(&[2, 3, 4, 8], 0).unwrap();
        assert_eq!((d, s), ([2, 3, 4, 8], [96, 32, 8]));
        let (d, s) = super::strides(&[2, 4, 24], 3).unwrap();
        assert_eq!((d, s), ([2, 3, 4, 8], [96, 8, 24]));
        assert!(super::strides(&[2, 4, 25], 3).is_none());
    }
}
