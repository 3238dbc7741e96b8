//! Plain, obviously-correct references: f64 values with direct index math, one file per
//! layer family. Slow by design.

pub mod activation;
pub mod attention;
pub mod cast;
pub mod convolution;
pub mod elementwise;
pub mod indexing;
pub mod matmul;
pub mod movement;
pub mod normalization;
pub mod pooling;
pub mod reduce;
pub mod softmax;
pub mod unary;

/// A dense row-major array of f64.
#[derive(Clone, Debug, PartialEq)]
pub struct Nd {
    /// Dims.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f64>,
}

impl Nd {
    /// An array from its shape and values.
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Nd {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Nd { shape, data }
    }

    /// An array of `shape` whose element at each index is `f(index)`.
    pub fn from_fn(shape: Vec<usize>, mut f: impl FnMut(&[usize]) -> f64) -> Nd {
        let n = shape.iter().product();
        let data = (0..n).map(|i| f(&unravel(i, &shape))).collect();
        Nd { shape, data }
    }

    /// The element at `index`.
    pub fn at(&self, index: &[usize]) -> f64 {
        self.data[ravel(index, &self.shape)]
    }

    /// Every element mapped through `f`.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Nd {
        Nd::new(
            self.shape.clone(),
            self.data.iter().map(|&v| f(v)).collect(),
        )
    }
}

/// The multi-index of flat position `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        index[d] = i % shape[d];
        i /= shape[d];
    }
    index
}

/// The flat position of `index` in `shape`.
pub fn ravel(index: &[usize], shape: &[usize]) -> usize {
    index.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// All multi-indices of `shape`, row-major.
pub fn indices(shape: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    (0..shape.iter().product()).map(move |i| unravel(i, shape))
}
