//! MatMul on cuBLAS: numpy broadcasting of the batch dims, rank-1 promotion and transposes
//! as the CPU kernel has them. Batches whose operands advance by constant strides become
//! one strided-batched GEMM per run; a dense A against one shared B becomes a single GEMM.
//! A third input, the bias of B's columns (the builder's `fuse_matmul_bias`), and a fourth,
//! a residual of the output's shape (`fuse_matmul_residual`), are added by cuBLASLt as it
//! writes the product.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{dims, expect_arity};
use super::{DeviceKernel, PrepareCtx};
use crate::blas::{BatchStrides, Blas, Gemm, GemmType};
use crate::blas_lt::Fused;
use crate::device::CudaDevice;
use crate::memory::DeviceBuffer;
use crate::stream::Stream;

const WHAT: &str = "MatMul";

/// The cuBLAS handle of `device`, shared by every kernel on it.
pub(crate) fn shared_blas(device: &CudaDevice) -> Result<Arc<Mutex<Blas>>, String> {
    static HANDLES: OnceLock<Mutex<HashMap<usize, Arc<Mutex<Blas>>>>> = OnceLock::new();
    let mut map = HANDLES
        .get_or_init(Default::default)
        .lock()
        .map_err(|_| "the cuBLAS handle table lock was poisoned".to_string())?;
    if let Some(b) = map.get(&device.ordinal()) {
        return Ok(b.clone());
    }
    let blas = Arc::new(Mutex::new(
        Blas::new(device).map_err(|e| format!("cuBLAS on {device:?}: {e}"))?,
    ));
    map.insert(device.ordinal(), blas.clone());
    Ok(blas)
}

/// cuBLAS workspace per kernel run (what cuBLAS asks for on Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// The locked cuBLAS handle of one kernel run, its workspace taken from the stream's
/// caching allocator (so runs on other streams sharing the handle never share scratch).
pub(crate) struct BlasScope<'a> {
    blas: MutexGuard<'a, Blas>,
    _workspace: DeviceBuffer,
}

impl<'a> BlasScope<'a> {
    /// Locks `blas` for products queued on `stream`.
    pub(crate) fn new(
        blas: &'a Mutex<Blas>,
        stream: &Stream,
        what: &str,
    ) -> Result<BlasScope<'a>, String> {
        let workspace = stream
            .device()
            .allocator()
            .alloc(WORKSPACE_BYTES)
            .map_err(|e| format!("{what}: cuBLAS workspace: {e}"))?;
        let blas = blas
            .lock()
            .map_err(|_| format!("{what}: the cuBLAS handle lock was poisoned"))?;
        // SAFETY: the workspace outlives the products queued through this scope: it goes
        // back to the stream-ordered cache only after `drop` detaches it.
        unsafe { blas.use_workspace(Some((workspace.ptr(), workspace.len()))) };
        Ok(BlasScope {
            blas,
            _workspace: workspace,
        })
    }
}

impl Deref for BlasScope<'_> {
    type Target = Blas;
    fn deref(&self) -> &Blas {
        &self.blas
    }
}

impl Drop for BlasScope<'_> {
    fn drop(&mut self) {
        // SAFETY: detaching needs no memory.
        unsafe { self.blas.use_workspace(None) };
    }
}

/// The GEMM type of a float dtype the kernels support (plain f32 arithmetic for f32).
pub(crate) fn gemm_type(dtype: DType) -> Option<GemmType> {
    match dtype {
        DType::F32 => Some(GemmType::F32),
        DType::F16 => Some(GemmType::F16),
        DType::BF16 => Some(GemmType::Bf16),
        _ => None,
    }
}

struct MatMulKernel {
    transpose_a: bool,
    transpose_b: bool,
    ty: GemmType,
    blas: Arc<Mutex<Blas>>,
    /// A third input holds one value per column of the output.
    bias: bool,
    /// A fourth input, of the output's shape, is added to it.
    residual: bool,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::MatMul(l) = layer else {
        return None;
    };
    let (bias, residual) = match inputs {
        [_, _] => (false, false),
        [_, b, c, rest @ ..] if rest.len() <= 1 => {
            // A single product over a dense A: what the builder fuses a bias into.
            if l.transpose_a || b.shape.len() != 2 || c.shape.len() != 1 {
                return None;
            }
            (true, !rest.is_empty())
        }
        _ => return None,
    };
    let ty = ctx.gemm_type(inputs.first()?.dtype)?;
    if inputs.iter().any(|i| ctx.gemm_type(i.dtype) != Some(ty)) {
        return None;
    }
    Some(shared_blas(ctx.device).map(|blas| {
        Box::new(MatMulKernel {
            transpose_a: l.transpose_a,
            transpose_b: l.transpose_b,
            ty,
            blas,
            bias,
            residual,
        }) as Box<dyn DeviceKernel>
    }))
}

/// One operand as a stack of row-major matrices.
struct Operand {
    batch: Vec<usize>,
    rows: usize,
    cols: usize,
    /// Stored transposed (`[cols × rows]`).
    trans: bool,
}

impl Operand {
    fn new(shape: &[usize], transpose: bool, lhs: bool) -> Result<Operand, String> {
        let n = shape.len();
        let batch = shape[..n.saturating_sub(2)].to_vec();
        let (rows, cols, trans) = match n {
            0 => return Err(format!("{WHAT} operands must have rank ≥ 1")),
            1 if lhs => (1, shape[0], false),
            1 => (shape[0], 1, false),
            _ if transpose => (shape[n - 1], shape[n - 2], true),
            _ => (shape[n - 2], shape[n - 1], false),
        };
        Ok(Operand {
            batch,
            rows,
            cols,
            trans,
        })
    }
}

/// numpy broadcast of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let y = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            match (x, y) {
                (x, y) if x == y => Ok(x),
                (1, y) => Ok(y),
                (x, 1) => Ok(x),
                _ => Err(format!(
                    "{WHAT}: batch dims {a:?} and {b:?} do not broadcast"
                )),
            }
        })
        .collect()
}

/// Matrix index into `batch` (right-aligned against `out`, size-1 dims repeating) of every
/// output matrix, in order.
fn matrix_indices(batch: &[usize], out: &[usize]) -> Vec<usize> {
    let skip = out.len() - batch.len();
    let mut strides = vec![0usize; out.len()];
    let mut s = 1;
    for (i, &d) in batch.iter().enumerate().rev() {
        strides[skip + i] = if d == 1 { 0 } else { s };
        s *= d;
    }
    let count: usize = out.iter().product();
    let mut idx = vec![0usize; out.len()];
    let mut result = Vec::with_capacity(count);
    for _ in 0..count {
        result.push(idx.iter().zip(&strides).map(|(i, s)| i * s).sum());
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    result
}

/// A run of products whose operands advance by constant matrix steps.
struct Run {
    first: usize,
    len: usize,
    start: [usize; 2],
    step: [usize; 2],
}

fn runs(pairs: &[[usize; 2]]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, &p) in pairs.iter().enumerate() {
        if let Some(r) = runs.last_mut() {
            let last = [
                r.start[0] + (r.len - 1) * r.step[0],
                r.start[1] + (r.len - 1) * r.step[1],
            ];
            let extends = if r.len == 1 {
                p[0] >= last[0] && p[1] >= last[1]
            } else {
                p == [last[0] + r.step[0], last[1] + r.step[1]]
            };
            if extends {
                r.step = [p[0] - r.start[0], p[1] - r.start[1]].map(|s| s / r.len);
                r.len += 1;
                continue;
            }
        }
        runs.push(Run {
            first: i,
            len: 1,
            start: p,
            step: [0, 0],
        });
    }
    runs
}

impl DeviceKernel for MatMulKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let arity = 2 + usize::from(self.bias) + usize::from(self.residual);
        expect_arity(WHAT, inputs, outputs, arity, 1)?;
        let ptr = |i: usize| inputs[i].ptr;
        let (sa, sb) = (dims(&inputs[0].desc)?, dims(&inputs[1].desc)?);
        let a = Operand::new(&sa, self.transpose_a, true)?;
        let b = Operand::new(&sb, self.transpose_b, false)?;
        if a.cols != b.rows {
            return Err(format!(
                "{WHAT}: inner dimensions differ: {sa:?} · {sb:?} ({} vs {})",
                a.cols, b.rows
            ));
        }
        let batch = broadcast(&a.batch, &b.batch)?;
        let mut shape = batch.clone();
        if sa.len() > 1 {
            shape.push(a.rows);
        }
        if sb.len() > 1 {
            shape.push(b.cols);
        }
        let out = dims(&outputs[0].desc)?;
        if out != shape {
            return Err(format!(
                "{WHAT}: output is {out:?}, expected {shape:?} for {sa:?} · {sb:?}"
            ));
        }
        let (m, k, n) = (a.rows, a.cols, b.cols);
        let size = self.ty.size();
        if self.bias {
            let bias = dims(&inputs[2].desc)?;
            if bias != [n] || sb.len() != 2 || a.trans {
                return Err(format!(
                    "{WHAT}: a bias {bias:?} needs a 2-D B and one value per its {n} columns"
                ));
            }
        }
        if self.residual {
            let r = dims(&inputs[3].desc)?;
            if r != out {
                return Err(format!(
                    "{WHAT}: the residual {r:?} is not the output's {out:?}"
                ));
            }
        }
        let blas = BlasScope::new(&self.blas, stream, WHAT)?;
        let ia = matrix_indices(&a.batch, &batch);
        let ib = matrix_indices(&b.batch, &batch);
        let count = ia.len();
        if m * n * count == 0 {
            return Ok(());
        }
        let gemm = |rows: usize| Gemm {
            m: rows,
            n,
            k,
            trans_a: a.trans,
            trans_b: b.trans,
            ty: self.ty,
        };
        let err = |e| format!("{WHAT} {sa:?} · {sb:?}: {e}");
        if self.bias {
            // SAFETY: a 2-D B against a dense, untransposed A is one product of
            // `count·m` rows (shapes checked above); the bias holds `n` elements, the
            // residual the output's.
            return unsafe {
                blas.gemm_fused(
                    stream,
                    &gemm(count * m),
                    [ptr(0), ptr(1), outputs[0].ptr],
                    Fused {
                        bias: ptr(2),
                        residual: if self.residual { ptr(3) } else { 0 },
                        relu: false,
                    },
                )
            }
            .map_err(err);
        }
        if k == 0 {
            let bytes = count * m * n * size;
            stream.device().bind().map_err(|e| format!("{WHAT}: {e}"))?;
            // SAFETY: the output holds `count·m·n` elements (its shape was checked).
            return unsafe {
                cudarc::driver::result::memset_d8_async(
                    outputs[0].ptr,
                    0,
                    bytes,
                    stream.raw().cast(),
                )
            }
            .map_err(|e| format!("{WHAT}: zero-filling an empty product: {e:?}"));
        }
        let foldable =
            !a.trans && ib.iter().all(|&j| j == 0) && ia.iter().enumerate().all(|(i, &j)| i == j);
        if foldable {
            // SAFETY: the tensors hold `count·m·k`, `k·n` and `count·m·n` elements (shapes
            // checked above) and stay valid while the stream runs.
            return unsafe { blas.gemm(stream, &gemm(count * m), ptr(0), ptr(1), outputs[0].ptr) }
                .map_err(err);
        }
        let pairs: Vec<[usize; 2]> = ia.iter().zip(&ib).map(|(&x, &y)| [x, y]).collect();
        for r in runs(&pairs) {
            let strides = BatchStrides {
                a: r.step[0] * m * k,
                b: r.step[1] * k * n,
                c: m * n,
            };
            let at = |base: u64, matrix: usize, elems: usize| base + (matrix * elems * size) as u64;
            let ptrs = [
                at(ptr(0), r.start[0], m * k),
                at(ptr(1), r.start[1], k * n),
                at(outputs[0].ptr, r.first, m * n),
            ];
            // SAFETY: every matrix of the run lies inside its tensor (indices from the
            // checked shapes); output matrices are disjoint.
            unsafe { blas.gemm_strided_batched(stream, &gemm(m), r.len, strides, ptrs) }
                .map_err(err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_dims_broadcast_like_numpy() {
        assert_eq!(broadcast(&[2, 1], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast(&[], &[4, 5]).unwrap(), vec![4, 5]);
        assert!(
            broadcast(&[2], &[3])
                .unwrap_err()
                .contains("do not broadcast")
        );
    }

    #[test]
    fn broadcast_batches_become_constant_stride_runs() {
        let out = [2, 3];
        let ia = matrix_indices(&[2, 1], &out);
        let ib = matrix_indices(&[3], &out);
        assert_eq!(ia, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(ib, vec![0, 1, 2, 0, 1, 2]);
        let pairs: Vec<[usize; 2]> = ia.iter().zip(&ib).map(|(&a, &b)| [a, b]).collect();
        let r = runs(&pairs);
        let got: Vec<_> = r
            .iter()
            .map(|r| (r.first, r.len, r.start, r.step))
            .collect();
        assert_eq!(got, vec![(0, 3, [0, 0], [0, 1]), (3, 3, [1, 0], [0, 1])]);
    }

    #[test]
    fn dense_batches_are_one_run() {
        let pairs: Vec<[usize; 2]> = (0..5).map(|i| [i, i]).collect();
        let r = runs(&pairs);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].len, r[0].step), (5, [1, 1]));
        let shared: Vec<[usize; 2]> = (0..4).map(|i| [2 * i, 0]).collect();
        let r = runs(&shared);
        assert_eq!((r.len(), r[0].step), (1, [2, 0]));
    }

    #[test]
    fn operands_promote_rank_one() {
        let a = Operand::new(&[7], false, true).unwrap();
        assert_eq!((a.rows, a.cols, a.trans), (1, 7, false));
        let b = Operand::new(&[7], true, false).unwrap();
        assert_eq!((b.rows, b.cols, b.trans), (7, 1, false));
        let t = Operand::new(&[2, 4, 6], true, true).unwrap();
        assert_eq!((t.batch, t.rows, t.cols, t.trans), (vec![2], 6, 4, true));
        assert!(Operand::new(&[], false, true).is_err());
    }
}
