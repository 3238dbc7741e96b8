//! Matrix multiplication through cuBLAS (`cublasGemmEx`): f32, TF32, f16 and bf16, row-major,
//! on a stream. The building block for the GPU's MatMul/Gemm layers.

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::cublas::{result, sys};

use crate::blas_lt::Lt;
use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult};
use crate::stream::Stream;

/// Element type and arithmetic of a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmType {
    /// f32 in and out, f32 arithmetic.
    F32,
    /// f32 in and out, TF32 tensor-core arithmetic with f32 accumulation.
    Tf32,
    /// f16 in and out, f32 accumulation.
    F16,
    /// bf16 in and out, f32 accumulation.
    Bf16,
}

impl GemmType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            GemmType::F32 | GemmType::Tf32 => 4,
            GemmType::F16 | GemmType::Bf16 => 2,
        }
    }

    fn data(self) -> sys::cudaDataType {
        match self {
            GemmType::F32 | GemmType::Tf32 => sys::cudaDataType::CUDA_R_32F,
            GemmType::F16 => sys::cudaDataType::CUDA_R_16F,
            GemmType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        }
    }

    fn compute(self) -> sys::cublasComputeType_t {
        match self {
            GemmType::Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }
}

/// A row-major matrix product `C[m×n] = A[m×k] · B[k×n]` (A or B optionally transposed,
/// i.e. stored as `[k×m]` / `[n×k]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gemm {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    /// A is stored `[k×m]`.
    pub trans_a: bool,
    /// B is stored `[n×k]`.
    pub trans_b: bool,
    /// Element type and arithmetic.
    pub ty: GemmType,
}

/// A cuBLAS handle of one device.
pub struct Blas {
    handle: sys::cublasHandle_t,
    device: CudaDevice,
    workspace: std::cell::Cell<Option<(u64, usize)>>,
    /// The cuBLASLt handle, created by the first product that needs it.
    lt: std::cell::RefCell<Option<Lt>>,
}

// SAFETY: the handle is used by one call at a time through `&self` methods that set the
// stream first; cuBLAS handles may move between threads.
unsafe impl Send for Blas {}

fn blas_error(call: &'static str) -> impl FnOnce(result::CublasError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        message: format!("{:?}", e.0),
    }
}

impl Blas {
    /// A handle on `device`; [`CudaError::NoDevice`] when cuBLAS is not installed.
    pub fn new(device: &CudaDevice) -> CudaResult<Blas> {
        static PRESENT: OnceLock<bool> = OnceLock::new();
        // SAFETY: only tries to dlopen cuBLAS by its candidate names.
        if !*PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) {
            return Err(CudaError::NoDevice(
                "libcublas was not found (install cuBLAS or set LD_LIBRARY_PATH)".into(),
            ));
        }
        device.bind()?;
        let handle = result::create_handle().map_err(blas_error("cublasCreate"))?;
        Ok(Blas {
            handle,
            device: device.clone(),
            workspace: std::cell::Cell::new(None),
            lt: std::cell::RefCell::new(None),
        })
    }

    /// Makes this handle's device current on the calling thread.
    pub(crate) fn bind(&self) -> CudaResult<()> {
        self.device.bind()
    }

    /// The workspace of [`Blas::use_workspace`], if one is set.
    pub(crate) fn workspace(&self) -> Option<(u64, usize)> {
        self.workspace.get()
    }

    /// The cuBLASLt handle, created on first use.
    pub(crate) fn lt(&self) -> CudaResult<std::cell::RefMut<'_, Lt>> {
        let mut slot = self
            .lt
            .try_borrow_mut()
            .map_err(|_| CudaError::Invalid("the cuBLASLt handle is in use".into()))?;
        if slot.is_none() {
            *slot = Some(Lt::new()?);
        }
        std::cell::RefMut::filter_map(slot, Option::as_mut)
            .map_err(|_| CudaError::Invalid("no cuBLASLt handle".into()))
    }

    /// Makes the following products use `bytes` bytes at device address `ptr` as cuBLAS
    /// workspace instead of the handle's own pool (`None`: back to the pool). A workspace
    /// taken from the stream-ordered caching allocator keeps products on different streams
    /// that share this handle from sharing scratch.
    ///
    /// # Safety
    /// `ptr` must hold `bytes` bytes of device memory of this device until every product
    /// queued with it has run.
    pub unsafe fn use_workspace(&self, workspace: Option<(u64, usize)>) {
        self.workspace.set(workspace);
    }

    /// Installs the workspace of [`Blas::use_workspace`] (after `cublasSetStream`, which
    /// resets it).
    fn apply_workspace(&self) -> CudaResult<()> {
        let Some((ptr, bytes)) = self.workspace.get() else {
            return Ok(());
        };
        // SAFETY: per `use_workspace`'s contract the memory is valid for the products.
        let status = unsafe { sys::cublasSetWorkspace_v2(self.handle, ptr as *mut c_void, bytes) };
        match status {
            sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
            e => Err(CudaError::Driver {
                call: "cublasSetWorkspace",
                message: format!("{e:?}"),
            }),
        }
    }

    /// Queues `C = A · B` on `stream`.
    ///
    /// # Safety
    /// `a`, `b` and `c` must be device pointers of this device holding `m·k`, `k·n` and
    /// `m·n` elements of `g.ty`, valid until the stream has run the product.
    pub unsafe fn gemm(&self, stream: &Stream, g: &Gemm, a: u64, b: u64, c: u64) -> CudaResult<()> {
        // SAFETY: one product of the operands this function's contract describes.
        unsafe { self.gemm_strided_batched(stream, g, 1, BatchStrides::default(), [a, b, c]) }
    }
}

/// Element strides between consecutive matrices of a strided-batched GEMM; `0` repeats
/// one matrix for every product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStrides {
    /// Between the A matrices.
    pub a: usize,
    /// Between the B matrices.
    pub b: usize,
    /// Between the C matrices.
    pub c: usize,
}

impl Blas {
    /// Queues `batch` products `C_i = A_i · B_i` on `stream`, the i-th operands
    /// `i · strides` elements past `a`, `b` and `c`.
    ///
    /// # Safety
    /// Every operand of every product must lie in device memory of this device holding
    /// elements of `g.ty`, valid until the stream has run the products; the C matrices must
    /// not overlap.
    pub unsafe fn gemm_strided_batched(
        &self,
        stream: &Stream,
        g: &Gemm,
        batch: usize,
        strides: BatchStrides,
        [a, b, c]: [u64; 3],
    ) -> CudaResult<()> {
        let dim = |v: usize| {
            i32::try_from(v)
                .map_err(|_| CudaError::Invalid(format!("GEMM dimension {v} exceeds i32")))
        };
        let stride = |v: usize| {
            i64::try_from(v)
                .map_err(|_| CudaError::Invalid(format!("GEMM batch stride {v} exceeds i64")))
        };
        let (m, n, k, count) = (dim(g.m)?, dim(g.n)?, dim(g.k)?, dim(batch)?);
        if m == 0 || n == 0 || count == 0 {
            return Ok(());
        }
        self.device.bind()?;
        let op = |t: bool| match t {
            true => sys::cublasOperation_t::CUBLAS_OP_T,
            false => sys::cublasOperation_t::CUBLAS_OP_N,
        };
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands.
        let lda = if g.trans_a { m } else { k };
        let ldb = if g.trans_b { k } else { n };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: per the function's contract; alpha and beta live through the call.
        unsafe {
            result::set_stream(self.handle, stream.raw().cast())
                .map_err(blas_error("cublasSetStream"))?;
            self.apply_workspace()?;
            result::gemm_strided_batched_ex(
                self.handle,
                op(g.trans_b),
                op(g.trans_a),
                n,
                m,
                k,
                (&alpha as *const f32).cast::<c_void>(),
                b as *const c_void,
                g.ty.data(),
                ldb,
                stride(strides.b)?,
                a as *const c_void,
                g.ty.data(),
                lda,
                stride(strides.a)?,
                (&beta as *const f32).cast::<c_void>(),
                c as *mut c_void,
                g.ty.data(),
                n,
                stride(strides.c)?,
                count,
                g.ty.compute(),
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
            )
        }
        .map_err(blas_error("cublasGemmStridedBatchedEx"))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            let _ = unsafe { result::destroy_handle(self.handle) };
        }
    }
}
