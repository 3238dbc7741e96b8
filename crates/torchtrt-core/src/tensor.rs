//! Host tensors: a dtype, a concrete shape, and 64-byte-aligned bytes.

use std::fmt;

use torchtrt_plugin_api::{DType, Element, ShapeDisplay, TensorDesc};

use crate::error::{Error, Result};

/// The alignment of every tensor buffer, in bytes.
pub const ALIGN: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; ALIGN]);

/// An owned, 64-byte-aligned byte buffer.
#[derive(Clone, Default)]
pub struct AlignedBuf {
    blocks: Vec<Block>,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            blocks: vec![Block([0; ALIGN]); len.div_ceil(ALIGN)],
            len,
        }
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
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
        self.blocks.len() * ALIGN
    }

    /// Sets the length to `len` bytes (≤ capacity keeps the allocation); new bytes are zero.
    pub fn resize(&mut self, len: usize) {
        let blocks = len.div_ceil(ALIGN);
        if blocks > self.blocks.len() {
            self.blocks.resize(blocks, Block([0; ALIGN]));
        }
        self.len = len;
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        let all: &[u8] = bytemuck::cast_slice(block_bytes(&self.blocks));
        &all[..self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        let all: &mut [u8] = bytemuck::cast_slice_mut(block_bytes_mut(&mut self.blocks));
        &mut all[..len]
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
        }
    }

    /// The elements of an integer tensor as `i64`; `None` for floating-point dtypes.
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

/// A `usize` shape as `i64`s.
pub fn shape_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}
