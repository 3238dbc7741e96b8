//! Row-major products with their epilogue applied as cuBLASLt writes them
//! (`CUBLASLT_EPILOGUE_BIAS`, `_RELU_BIAS`, `_RELU`): `C[m×n] = act(A · B + bias[n] + R)` in
//! one kernel, where the bias, a residual `R` and a ReLU would otherwise cost a pass over C
//! each (the residual enters as cuBLASLt's `C` with β = 1).
//! The descriptors are kept per shape, with the algorithm: of cuBLASLt's heuristic's first
//! [`CANDIDATES`], the fastest when timed on the first run of the shape ([`timing`]) (its top pick can be
//! far from the best with a residual), the top pick while the stream is being captured.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::cublaslt::{result, sys};

use crate::blas::{Blas, Gemm, GemmType};
use crate::error::{CudaError, CudaResult};
use crate::stream::Stream;
use crate::timing;

/// Shapes whose plans one handle keeps before it starts over (a server with a dynamic
/// batch sees a bounded set; a fuzzer does not).
const MAX_PLANS: usize = 256;
/// Algorithms of the heuristic's ranking that are timed.
const CANDIDATES: usize = 6;

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

/// What a product adds to `A · B` as it writes C: device pointers (0: absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct Fused {
    /// One value per column of C, in the product's element type.
    pub bias: u64,
    /// A matrix of C's shape added to the product.
    pub residual: u64,
    /// Whether ReLU applies to the sum.
    pub relu: bool,
}

/// cuBLASLt's epilogue for a product with or without a bias and ReLU.
fn epilogue(bias: bool, relu: bool) -> sys::cublasLtEpilogue_t {
    use sys::cublasLtEpilogue_t as E;
    match (bias, relu) {
        (true, true) => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        (true, false) => E::CUBLASLT_EPILOGUE_BIAS,
        (false, true) => E::CUBLASLT_EPILOGUE_RELU,
        (false, false) => E::CUBLASLT_EPILOGUE_DEFAULT,
    }
}

/// What one plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    gemm: Gemm,
    align: u32,
    workspace: usize,
    residual: bool,
    bias: bool,
    relu: bool,
}

/// One product's operands (`r` is the residual, or the output when β is 0) and where it
/// runs.
struct Operands<'s> {
    a: u64,
    b: u64,
    r: u64,
    bias: u64,
    beta: f32,
    workspace: (u64, usize),
    stream: &'s Stream,
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
    fn new(key: &Key) -> CudaResult<Plan> {
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
        let epilogue = epilogue(key.bias, key.relu);
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

    /// The heuristic's ranking of algorithms for this product within the workspace and
    /// alignment, best first (at most [`CANDIDATES`]).
    fn candidates(
        &self,
        handle: sys::cublasLtHandle_t,
        key: &Key,
    ) -> CudaResult<Vec<sys::cublasLtMatmulAlgo_t>> {
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        let pref =
            result::create_matmul_pref().map_err(lt_error("cublasLtMatmulPreferenceCreate"))?;
        let workspace = key.workspace as u64;
        let set = |attr: P, value: *const c_void, size: usize| {
            // SAFETY: `pref` is live; the value has the attribute's documented type.
            unsafe { result::set_matmul_pref_attribute(pref, attr, value, size) }
                .map_err(lt_error("cublasLtMatmulPreferenceSetAttribute"))
        };
        let ranked = (|| {
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
            // SAFETY: all-zero bytes are a valid (empty) heuristic result.
            let mut results: [sys::cublasLtMatmulHeuristicResult_t; CANDIDATES] =
                unsafe { std::mem::zeroed() };
            let mut count = 0i32;
            // SAFETY: every descriptor is live; `results` holds `CANDIDATES` entries.
            unsafe {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    handle,
                    self.desc,
                    a,
                    b,
                    d,
                    d,
                    pref,
                    CANDIDATES as i32,
                    results.as_mut_ptr(),
                    &mut count,
                )
            }
            .result()
            .map_err(lt_error("cublasLtMatmulAlgoGetHeuristic"))?;
            let found: Vec<_> = results[..count.clamp(0, CANDIDATES as i32) as usize]
                .iter()
                .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
                .map(|r| r.algo)
                .collect();
            if found.is_empty() {
                return Err(CudaError::Invalid(format!(
                    "cuBLASLt has no algorithm for {:?}",
                    key.gemm
                )));
            }
            Ok(found)
        })();
        // SAFETY: created above, destroyed once.
        let _ = unsafe { result::destroy_matmul_pref(pref) };
        ranked
    }

    /// Queues the product with `algo`, writing `d`.
    ///
    /// # Safety
    /// As [`Blas::gemm_fused`]; the bias (if any) is set on the descriptor for this call.
    unsafe fn run(
        &self,
        handle: sys::cublasLtHandle_t,
        algo: &sys::cublasLtMatmulAlgo_t,
        o: &Operands<'_>,
        d: u64,
    ) -> CudaResult<()> {
        let Operands {
            a,
            b,
            r,
            bias,
            beta,
            workspace: (ws_ptr, ws_bytes),
            stream,
        } = *o;
        let alpha = 1.0f32;
        let [la, lb, ld] = self.layouts;
        // SAFETY: per the function's contract; alpha and beta live through the call.
        unsafe {
            if bias != 0 {
                self.set(
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &(bias as *const c_void),
                )?;
            }
            result::matmul(
                handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b as *const c_void,
                la,
                a as *const c_void,
                lb,
                r as *const c_void,
                ld,
                d as *mut c_void,
                ld,
                algo,
                ws_ptr as *mut c_void,
                ws_bytes,
                stream.raw().cast(),
            )
        }
        .map_err(lt_error("cublasLtMatmul"))
    }

    /// The fastest of `algos` on this product, each timed writing a scratch output
    /// ([`timing::fastest`]); algorithms that fail to launch are skipped.
    ///
    /// # Safety
    /// As [`Blas::gemm_fused`].
    unsafe fn fastest(
        &self,
        handle: sys::cublasLtHandle_t,
        algos: &[sys::cublasLtMatmulAlgo_t],
        o: &Operands<'_>,
        out_bytes: usize,
    ) -> CudaResult<sys::cublasLtMatmulAlgo_t> {
        let scratch = o.stream.device().allocator().alloc(out_bytes)?;
        // SAFETY: the scratch output holds the product; the rest per the contract.
        let launch =
            |algo: &&sys::cublasLtMatmulAlgo_t| unsafe { self.run(handle, algo, o, scratch.ptr()) };
        let ran: Vec<&sys::cublasLtMatmulAlgo_t> =
            algos.iter().filter(|algo| launch(algo).is_ok()).collect();
        let best = timing::fastest(o.stream, &ran, launch, |e| e)?;
        best.map(|i| *ran[i]).ok_or_else(|| {
            CudaError::Invalid(format!("none of {} cuBLASLt algorithms ran", algos.len()))
        })
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
    /// Queues `C = act(A · B + bias + R)` on `stream` with what `fused` adds.
    ///
    /// # Safety
    /// `a`, `b`, `c` and `fused`'s bias and residual (where not 0) must be device pointers of
    /// this device holding `m·k`, `k·n`, `m·n`, `n` and `m·n` elements of `g.ty`, valid until
    /// the stream has run the product.
    pub unsafe fn gemm_fused(
        &self,
        stream: &Stream,
        g: &Gemm,
        [a, b, c]: [u64; 3],
        fused: Fused,
    ) -> CudaResult<()> {
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        if g.k == 0 {
            return Err(CudaError::Invalid(
                "a fused product over an empty inner dimension".into(),
            ));
        }
        let size = g.ty.size() as u64;
        let Fused { bias, residual, .. } = fused;
        let r = if residual != 0 { residual } else { c };
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
            residual: residual != 0,
            bias: bias != 0,
            relu: fused.relu,
        };
        let mut lt = self.lt()?;
        let lt = &mut *lt;
        let ops = Operands {
            a,
            b,
            r,
            bias,
            beta: if residual != 0 { 1.0 } else { 0.0 },
            workspace: (ws_ptr, ws_bytes),
            stream,
        };
        if !lt.plans.contains_key(&key) {
            if lt.plans.len() >= MAX_PLANS {
                lt.plans.clear();
            }
            let mut plan = Plan::new(&key)?;
            let algos = plan.candidates(lt.handle, &key)?;
            if stream.is_capturing()? {
                // SAFETY: per the function's contract.
                return unsafe { plan.run(lt.handle, &algos[0], &ops, c) };
            }
            plan.algo = match algos[..] {
                [only] => only,
                // SAFETY: per the function's contract.
                _ => unsafe { plan.fastest(lt.handle, &algos, &ops, g.m * g.n * g.ty.size())? },
            };
            lt.plans.insert(key, plan);
        }
        let plan = &lt.plans[&key];
        // SAFETY: per the function's contract; the bias pointer is read by the product
        // queued right after it is set, under this handle's lock; the workspace is the
        // scope's, valid for the product.
        unsafe { plan.run(lt.handle, &plan.algo, &ops, c) }
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
