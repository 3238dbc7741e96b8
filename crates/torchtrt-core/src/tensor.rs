//! Host tensors: a dtype, a concrete shape, and 64-byte-aligned bytes (or, for tensors the
//! runtime binds to a caller's memory, that memory).

use std::fmt;

use torchtrt_plugin_api::{DType, Element, ShapeDisplay, TensorDesc};

use crate::error::{Error, Result};

/// The alignment of every tensor buffer, in bytes.
pub const ALIGN: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; ALIGN]);

/// Where a buffer's bytes are.
enum Storage {
    /// Blocks of its own.
    Owned(Vec<Block>),
    /// A caller's memory, borrowed for as long as the caller promised (see
    /// [`AlignedBuf::external`]); never freed here.
    External(std::ptr::NonNull<u8>, usize),
}

/// A 64-byte-aligned byte buffer of its own, or a view of a caller's memory (aligned to
/// at least 16 bytes) that the runtime reads and writes in place.
pub struct AlignedBuf {
    storage: Storage,
    len: usize,
}

// SAFETY: owned blocks are plain bytes; external memory is used under the contract of
// `AlignedBuf::external`, which makes its owner responsible for it being accessible from
// any thread while the view lives.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for AlignedBuf {}

impl Default for AlignedBuf {
    fn default() -> AlignedBuf {
        AlignedBuf {
            storage: Storage::Owned(Vec::new()),
            len: 0,
        }
    }
}

impl Clone for AlignedBuf {
    /// Copies the bytes into a buffer of its own (also for external views).
    fn clone(&self) -> AlignedBuf {
        match &self.storage {
            Storage::Owned(blocks) => AlignedBuf {
                storage: Storage::Owned(blocks.clone()),
                len: self.len,
            },
            Storage::External(..) => AlignedBuf::from_bytes(self.as_slice()),
        }
    }
}

/// The alignment a caller's memory needs to be used in place (see [`AlignedBuf::external`]).
pub const EXTERNAL_ALIGN: usize = 16;

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            storage: Storage::Owned(vec![Block([0; ALIGN]); len.div_ceil(ALIGN)]),
            len,
        }
    }

    /// A zeroed buffer of `len` bytes, or an error when the allocator refuses (a size that
    /// comes from input must not abort the process).
    pub fn try_zeroed(len: usize) -> Result<AlignedBuf> {
        let blocks = len.div_ceil(ALIGN);
        let mut v: Vec<Block> = Vec::new();
        v.try_reserve_exact(blocks)
            .map_err(|e| Error::InvalidArgument(format!("cannot allocate {len} bytes: {e}")))?;
        v.resize(blocks, Block([0; ALIGN]));
        Ok(AlignedBuf {
            storage: Storage::Owned(v),
            len,
        })
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    /// A view of `len` bytes of a caller's memory at `ptr`, read and written in place;
    /// `None` when `ptr` is null (with `len > 0`) or not aligned to [`EXTERNAL_ALIGN`].
    ///
    /// # Safety
    /// The memory must be valid for reads (and writes, if the view is written) of `len`
    /// bytes, from any thread, for as long as the view or a tensor holding it lives, and no
    /// one else may write it meanwhile.
    pub unsafe fn external(ptr: *mut u8, len: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return Some(AlignedBuf::default());
        }
        let ptr = std::ptr::NonNull::new(ptr)?;
        (ptr.as_ptr() as usize)
            .is_multiple_of(EXTERNAL_ALIGN)
            .then_some(AlignedBuf {
                storage: Storage::External(ptr, len),
                len,
            })
    }

    /// Whether the bytes are a caller's memory (see [`AlignedBuf::external`]).
    pub fn is_external(&self) -> bool {
        matches!(self.storage, Storage::External(..))
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that fit without reallocating.
    pub fn capacity(&self) -> usize {
        match &self.storage {
            Storage::Owned(blocks) => blocks.len() * ALIGN,
            Storage::External(_, len) => *len,
        }
    }

    /// Sets the length to `len` bytes. An owned buffer keeps its allocation up to its
    /// capacity and zeroes new bytes; an external view beyond its size becomes a zeroed
    /// buffer of its own.
    pub fn resize(&mut self, len: usize) {
        let blocks = len.div_ceil(ALIGN);
        match &mut self.storage {
            Storage::Owned(b) if blocks > b.len() => b.resize(blocks, Block([0; ALIGN])),
            Storage::Owned(_) => {}
            Storage::External(_, cap) if len <= *cap => {}
            Storage::External(..) => *self = AlignedBuf::zeroed(len),
        }
        self.len = len;
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.storage {
            Storage::Owned(blocks) => {
                let all: &[u8] = bytemuck::cast_slice(block_bytes(blocks));
                &all[..self.len]
            }
            // SAFETY: valid for `len` bytes per the contract of `external`.
            Storage::External(ptr, _) => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), self.len)
            },
        }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.storage {
            Storage::Owned(blocks) => {
                let all: &mut [u8] = bytemuck::cast_slice_mut(block_bytes_mut(blocks));
                &mut all[..len]
            }
            // SAFETY: valid and unshared for `len` bytes per the contract of `external`.
            Storage::External(ptr, _) => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), len)
            },
        }
    }
}

fn block_bytes(b: &[Block]) -> &[[u8; ALIGN]] {
    // SAFETY: `Block` is `repr(C)` around `[u8; ALIGN]` with no padding.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len()) }
}

fn block_bytes_mut(b: &mut [Block]) -> &mut [[u8; ALIGN]] {
    // SAFETY: as in `block_bytes`, and the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast(), b.len()) }
}

/// A dense, row-major host tensor. The default is an empty f32 scalar-less tensor of shape `[0]`.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: AlignedBuf,
}

impl Default for Tensor {
    fn default() -> Tensor {
        Tensor::zeros(DType::F32, &[0])
    }
}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBuf::zeroed(n * dtype.size()),
        }
    }

    /// A zero-filled tensor, or an error when its size overflows or the allocator refuses.
    pub fn try_zeros(dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let len = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("a {dtype} tensor of shape {shape:?} overflows"))
            })?;
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBuf::try_zeroed(len)?,
        })
    }

    /// A tensor taking its elements from a vector; errors when the element count differs
    /// from the shape's.
    pub fn from_vec<T: Element>(shape: &[usize], values: Vec<T>) -> Result<Tensor> {
        Tensor::from_slice(shape, &values)
    }

    /// A tensor copying its elements from a slice; errors when the element count differs
    /// from the shape's.
    pub fn from_slice<T: Element>(shape: &[usize], values: &[T]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != values.len() {
            return Err(Error::InvalidArgument(format!(
                "{} values for shape {:?} ({n} elements)",
                values.len(),
                shape
            )));
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            data: AlignedBuf::from_bytes(bytemuck::cast_slice(values)),
        })
    }

    /// A tensor from raw little-endian bytes.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n * dtype.size() != bytes.len() {
            return Err(Error::InvalidArgument(format!(
                "{} bytes for {dtype} tensor of shape {shape:?}",
                bytes.len()
            )));
        }
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBuf::from_bytes(bytes),
        })
    }

    /// A scalar (rank-0) tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor {
            dtype: T::DTYPE,
            shape: vec![],
            data: AlignedBuf::from_bytes(bytemuck::bytes_of(&value)),
        }
    }

    /// Builds a tensor over an existing buffer, resizing it to fit.
    pub fn with_buffer(dtype: DType, shape: &[usize], mut data: AlignedBuf) -> Tensor {
        let n: usize = shape.iter().product();
        data.resize(n * dtype.size());
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    /// Gives the buffer back, e.g. to a pool.
    pub fn into_buffer(self) -> AlignedBuf {
        self.data
    }

    /// A tensor over `buf` without resizing it; `None` when its length is not the shape's
    /// byte size.
    pub fn over(dtype: DType, shape: &[usize], buf: AlignedBuf) -> Option<Tensor> {
        let n = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))?;
        (n == buf.len()).then(|| Tensor {
            dtype,
            shape: shape.to_vec(),
            data: buf,
        })
    }

    /// Re-shapes this tensor in place to `dtype` and `shape` over a buffer of `len` bytes,
    /// reusing its shape storage: how pooled tensors are handed out without allocating.
    pub(crate) fn reset(&mut self, dtype: DType, shape: &[usize]) {
        self.dtype = dtype;
        self.shape.clear();
        self.shape.extend_from_slice(shape);
        self.data
            .resize(shape.iter().product::<usize>() * dtype.size());
    }

    /// Bytes the tensor's buffer holds without reallocating.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Whether the bytes are a caller's memory.
    pub fn is_external(&self) -> bool {
        self.data.is_external()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Changes the shape without touching the data; errors when the element count differs.
    pub fn reshape(&mut self, shape: &[usize]) -> Result<()> {
        if shape.iter().product::<usize>() != self.numel() {
            return Err(Error::InvalidArgument(format!(
                "cannot reshape {:?} into {shape:?}",
                self.shape
            )));
        }
        self.shape = shape.to_vec();
        Ok(())
    }

    /// The description (dtype, shape, linear format).
    pub fn desc(&self) -> TensorDesc {
        TensorDesc::new(self.dtype, shape_i64(&self.shape))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The bytes, mutably.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    /// The elements as `T`; errors when `T` does not match the dtype (`u8` views `bool`).
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check::<T>()?;
        Ok(bytemuck::cast_slice(self.data.as_slice()))
    }

    /// The elements as `T`, mutably.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check::<T>()?;
        Ok(bytemuck::cast_slice_mut(self.data.as_mut_slice()))
    }

    /// The elements converted to `f64` (any dtype).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let b = self.bytes();
        macro_rules! conv {
            ($t:ty, $f:expr) => {
                bytemuck::cast_slice::<u8, $t>(b).iter().map($f).collect()
            };
        }
        match self.dtype {
            DType::F32 => conv!(f32, |&x| x as f64),
            DType::F16 => conv!(half::f16, |x| x.to_f64()),
            DType::BF16 => conv!(half::bf16, |x| x.to_f64()),
            DType::F64 => conv!(f64, |&x| x),
            DType::I64 => conv!(i64, |&x| x as f64),
            DType::I32 => conv!(i32, |&x| x as f64),
            DType::I16 => conv!(i16, |&x| x as f64),
            DType::I8 => conv!(i8, |&x| x as f64),
            DType::U8 | DType::Bool => conv!(u8, |&x| x as f64),
            DType::U16 => conv!(u16, |&x| x as f64),
            DType::U32 => conv!(u32, |&x| x as f64),
            DType::U64 => conv!(u64, |&x| x as f64),
        }
    }

    /// The elements of an integer tensor as `i64` (u64 values past `i64::MAX` saturate);
    /// `None` for floating-point dtypes.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        let b = self.bytes();
        macro_rules! conv {
            ($t:ty) => {
                bytemuck::cast_slice::<u8, $t>(b)
                    .iter()
                    .map(|&x| x as i64)
                    .collect()
            };
        }
        Some(match self.dtype {
            DType::I64 => conv!(i64),
            DType::I32 => conv!(i32),
            DType::I16 => conv!(i16),
            DType::I8 => conv!(i8),
            DType::U8 | DType::Bool => conv!(u8),
            DType::U16 => conv!(u16),
            DType::U32 => conv!(u32),
            DType::U64 => bytemuck::cast_slice::<u8, u64>(b)
                .iter()
                .map(|&x| x.min(i64::MAX as u64) as i64)
                .collect(),
            _ => return None,
        })
    }

    fn check<T: Element>(&self) -> Result<()> {
        let ok = T::DTYPE == self.dtype || (T::DTYPE == DType::U8 && self.dtype == DType::Bool);
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "{self} viewed as {}",
                T::DTYPE
            )))
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({self})")
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&shape_i64(&self.shape)))
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.dtype == other.dtype && self.shape == other.shape && self.bytes() == other.bytes()
    }
}

/// 64 well-mixed bits of `x` (the splitmix64 finaliser): for filling benchmark and timing
/// inputs with values in no order a branch predictor learns, the same every run.
pub fn mix_bits(x: u64) -> u64 {
    let mut h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 32)
}

/// A `usize` shape as `i64`s.
pub fn shape_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}
