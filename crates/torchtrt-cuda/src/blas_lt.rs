//! Row-major products with the bias added as cuBLASLt writes them (`CUBLASLT_EPILOGUE_BIAS`):
//! `C[m×n] = A · B + bias[n] (+ R)` in one kernel, where the bias and a residual `R` would
//! otherwise cost a pass over C each (the residual enters as cuBLASLt's `C` with β = 1).
//! The descriptors and the algorithm cuBLASLt's heuristic picks are kept per shape.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::cublaslt::{result, sys};

use crate::blas::{Blas, Gemm, GemmType};
use crate::error::{CudaError, CudaResult};
use crate::stream::Stream;

/// Shapes whose plans one handle keeps before it starts over (a server with a dynamic
/// batch sees a bounded set; a fuzzer does not).
const MAX_PLANS: usize = 256;

fn lt_error(call: &'static str) -> impl FnOnce(result::CublasError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        message: format!("{:?}", e.0),
    }
}

fn data_type(ty: GemmType) -> sys::cudaDataType {
    match ty {
        GemmType::F32 | GemmType::Tf32 => sys::cudaDataType::CUDA_R_32F,
        GemmType::F16 => sys::cudaDataType::CUDA_R_16F,
        GemmType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
    }
}

fn compute_type(ty: GemmType) -> sys::cublasComputeType_t {
    match ty {
        GemmType::Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    }
}

/// The alignment in bytes (a power of two, at most 256) every one of `ptrs` has.
fn alignment(ptrs: &[u64]) -> u32 {
    let bits = ptrs.iter().fold(256u64, |acc, &p| acc | p);
    1 << bits.trailing_zeros().min(8)
}

/// What one plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    gemm: Gemm,
    align: u32,
    workspace: usize,
    residual: bool,
}

/// A product's descriptors and algorithm.
struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by `Plan::new`, destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
            let _ = result::destroy_matmul_desc(self.desc);
        }
    }
}

impl Plan {
    /// Column-major cuBLASLt computes `Cᵀ[n×m] = Bᵀ · Aᵀ`, so its A is our B and its bias,
    /// one value per row of its D, is one per column of ours.
    fn new(handle: sys::cublasLtHandle_t, key: &Key) -> CudaResult<Plan> {
        let g = key.gemm;
        let dims = |v: usize| {
            u64::try_from(v).map_err(|_| CudaError::Invalid(format!("GEMM dimension {v}")))
        };
        let (m, n, k) = (dims(g.m)?, dims(g.n)?, dims(g.k)?);
        let ld = |v: u64| {
            i64::try_from(v).map_err(|_| CudaError::Invalid(format!("GEMM leading dim {v}")))
        };
        let ty = data_type(g.ty);
        let layout = |rows: u64, cols: u64| {
            result::create_matrix_layout(ty, rows, cols, ld(rows)?)
                .map_err(lt_error("cublasLtMatrixLayoutCreate"))
        };
        let desc = result::create_matmul_desc(compute_type(g.ty), sys::cudaDataType::CUDA_R_32F)
            .map_err(lt_error("cublasLtMatmulDescCreate"))?;
        let mut plan = Plan {
            desc,
            layouts: [std::ptr::null_mut(); 3],
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        };
        plan.layouts[0] = if g.trans_b {
            layout(k, n)?
        } else {
            layout(n, k)?
        };
        plan.layouts[1] = if g.trans_a {
            layout(m, k)?
        } else {
            layout(k, m)?
        };
        plan.layouts[2] = layout(n, m)?;
        let op = |t: bool| match t {
            true => cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T,
            false => cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
        };
        let epilogue = sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS;
        // SAFETY: each attribute gets a value of its documented type and size.
        unsafe {
            plan.set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                &op(g.trans_b),
            )?;
            plan.set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                &op(g.trans_a),
            )?;
            plan.set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &epilogue,
            )?;
        }
        plan.choose(handle, key)?;
        Ok(plan)
    }

    /// # Safety
    /// `value` must be the type cuBLASLt documents for `attr`.
    unsafe fn set<T>(
        &self,
        attr: sys::cublasLtMatmulDescAttributes_t,
        value: &T,
    ) -> CudaResult<()> {
        // SAFETY: per the contract; cuBLASLt copies the value.
        unsafe {
            result::set_matmul_desc_attribute(
                self.desc,
                attr,
                (value as *const T).cast(),
                std::mem::size_of::<T>(),
            )
        }
        .map_err(lt_error("cublasLtMatmulDescSetAttribute"))
    }

    /// Asks cuBLASLt's heuristic for the best algorithm within the workspace and alignment.
    fn choose(&mut self, handle: sys::cublasLtHandle_t, key: &Key) -> CudaResult<()> {
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        let pref =
            result::create_matmul_pref().map_err(lt_error("cublasLtMatmulPreferenceCreate"))?;
        let workspace = key.workspace as u64;
        let set = |attr: P, value: *const c_void, size: usize| {
            // SAFETY: `pref` is live; the value has the attribute's documented type.
            unsafe { result::set_matmul_pref_attribute(pref, attr, value, size) }
                .map_err(lt_error("cublasLtMatmulPreferenceSetAttribute"))
        };
        let chosen = (|| {
            set(
                P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace as *const u64).cast(),
                8,
            )?;
            for attr in [
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                set(attr, (&key.align as *const u32).cast(), 4)?;
            }
            let [a, b, d] = self.layouts;
            // SAFETY: every descriptor is live.
            unsafe { result::get_matmul_algo_heuristic(handle, self.desc, a, b, d, d, pref) }
                .map_err(lt_error("cublasLtMatmulAlgoGetHeuristic"))
        })();
        // SAFETY: created above, destroyed once.
        let _ = unsafe { result::destroy_matmul_pref(pref) };
        self.algo = chosen?.algo;
        Ok(())
    }
}

/// The cuBLASLt handle of a [`Blas`] and its plans.
pub(crate) struct Lt {
    handle: sys::cublasLtHandle_t,
    plans: HashMap<Key, Plan>,
}

impl Lt {
    pub(crate) fn new() -> CudaResult<Lt> {
        static PRESENT: OnceLock<bool> = OnceLock::new();
        // SAFETY: only tries to dlopen cuBLASLt by its candidate names.
        if !*PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) {
            return Err(CudaError::NoDevice(
                "libcublasLt was not found (install cuBLAS or set LD_LIBRARY_PATH)".into(),
            ));
        }
        let handle = result::create_handle().map_err(lt_error("cublasLtCreate"))?;
        Ok(Lt {
            handle,
            plans: HashMap::new(),
        })
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: created in `new`, destroyed once, after its plans.
        let _ = unsafe { result::destroy_handle(self.handle) };
    }
}

impl Blas {
    /// Queues `C = A · B + bias (+ R)` on `stream`, `bias` holding one value per column of C
    /// in the GEMM's element type, `residual` (`R`, if any) a matrix of C's shape.
    ///
    /// # Safety
    /// `a`, `b`, `c`, `bias` and `residual` must be device pointers of this device holding
    /// `m·k`, `k·n`, `m·n`, `n` and `m·n` elements of `g.ty`, valid until the stream has run
    /// the product.
    pub unsafe fn gemm_bias(
        &self,
        stream: &Stream,
        g: &Gemm,
        [a, b, c, bias]: [u64; 4],
        residual: Option<u64>,
    ) -> CudaResult<()> {
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        if g.k == 0 {
            return Err(CudaError::Invalid(
                "a product with a bias over an empty inner dimension".into(),
            ));
        }
        let size = g.ty.size() as u64;
        let r = residual.unwrap_or(c);
        if [a, b, c, bias, r].iter().any(|p| p % size != 0) {
            return Err(CudaError::Invalid(format!(
                "GEMM operands not aligned to their {size}-byte elements"
            )));
        }
        self.bind()?;
        let (ws_ptr, ws_bytes) = self.workspace().unwrap_or((0, 0));
        let key = Key {
            gemm: *g,
            align: alignment(&[a, b, c, r]),
            workspace: ws_bytes,
            residual: residual.is_some(),
        };
        let mut lt = self.lt()?;
        let lt = &mut *lt;
        if !lt.plans.contains_key(&key) {
            if lt.plans.len() >= MAX_PLANS {
                lt.plans.clear();
            }
            let plan = Plan::new(lt.handle, &key)?;
            lt.plans.insert(key, plan);
        }
        let plan = &lt.plans[&key];
        let (alpha, beta) = (1.0f32, if residual.is_some() { 1.0f32 } else { 0.0 });
        let [la, lb, ld] = plan.layouts;
        // SAFETY: per the function's contract; the bias pointer is read by the product
        // queued right after it is set, under this handle's lock; alpha and beta live
        // through the call; the workspace is the scope's, valid for the product.
        unsafe {
            plan.set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &(bias as *const c_void),
            )?;
            result::matmul(
                lt.handle,
                plan.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b as *const c_void,
                la,
                a as *const c_void,
                lb,
                r as *const c_void,
                ld,
                c as *mut c_void,
                ld,
                &plan.algo,
                ws_ptr as *mut c_void,
                ws_bytes,
                stream.raw().cast(),
            )
        }
        .map_err(lt_error("cublasLtMatmul"))
    }
}

#[cfg(test)]
mod tests {
    use super::alignment;

    #[test]
    fn alignment_is_the_largest_power_of_two_all_share() {
        assert_eq!(alignment(&[0, 512, 1024]), 256);
        assert_eq!(alignment(&[256, 2]), 2);
        assert_eq!(alignment(&[16, 48, 4096]), 16);
        assert_eq!(alignment(&[]), 256);
    }
}
