//! Host side of the strided walk in [`ACCESS`](super::access::ACCESS): dims with one
//! stride set per operand, merged and widened before launch, and packed into kernel
//! arguments; plus what the memory-bound kernels share (dtype tags, launch geometry,
//! programs generated per operation).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use torchtrt_plugin_api::DType;

use super::ProgramSource;
use super::access::{ACCESS, MAX_RANK};
use super::prelude::with_prelude;
use crate::launch::KernelArgs;

/// `(m, s)` such that `n / d == (umulhi(n, m) + n) >> s` for every `n < 2³¹` (`d ≥ 1`).
pub(crate) fn fast_div(d: u32) -> (u32, u32) {
    let d = u64::from(d.max(1));
    let s = (0..32).find(|&s| (1u64 << s) >= d).unwrap_or(32);
    let m = ((1u64 << 32) * ((1u64 << s) - d)) / d + 1;
    (m as u32, s as u32)
}

/// A walk over `dims` (outermost first) with `N` stride sets, in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Walk<const N: usize> {
    /// Extents, outermost first.
    pub dims: Vec<usize>,
    /// Per dim, the stride of each operand.
    pub strides: Vec<[i64; N]>,
}

/// Row-major strides of `shape`, in elements.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (o, &d) in out.iter_mut().zip(shape).rev() {
        *o = acc;
        acc = acc.saturating_mul(d as i64);
    }
    out
}

/// Strides of an input of `shape` broadcast to `out` (numpy rules: leading dims added,
/// dims of 1 repeat with stride 0); an error when the shapes do not broadcast.
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Result<Vec<i64>, String> {
    if shape.len() > out.len() {
        return Err(format!("{shape:?} does not broadcast to {out:?}"));
    }
    let lead = out.len() - shape.len();
    let own = contiguous_strides(shape);
    (0..out.len())
        .map(|i| match i.checked_sub(lead) {
            None => Ok(0),
            Some(j) if shape[j] == out[i] => Ok(if out[i] == 1 { 0 } else { own[j] }),
            Some(j) if shape[j] == 1 => Ok(0),
            Some(_) => Err(format!("{shape:?} does not broadcast to {out:?}")),
        })
        .collect()
}

impl<const N: usize> Walk<N> {
    /// A walk from per-dim extents and strides.
    pub fn new(dims: Vec<usize>, strides: Vec<[i64; N]>) -> Walk<N> {
        Walk { dims, strides }
    }

    /// Elements visited.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Drops dims of extent 1 and merges neighbours that every operand walks as one.
    pub fn merged(&self) -> Walk<N> {
        let mut dims: Vec<usize> = Vec::new();
        let mut strides: Vec<[i64; N]> = Vec::new();
        for (&d, s) in self.dims.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            match (dims.last_mut(), strides.last_mut()) {
                (Some(pd), Some(ps)) if (0..N).all(|j| ps[j] == s[j] * d as i64) => {
                    *pd *= d;
                    *ps = *s;
                }
                _ => {
                    dims.push(d);
                    strides.push(*s);
                }
            }
        }
        Walk { dims, strides }
    }

    /// How many elements of `elem` bytes to move as one, up to 16 bytes: the innermost dim
    /// must be contiguous for every operand and divisible, the other strides and every
    /// address (`ptrs`) aligned. Returns the widened walk and the new element size.
    pub fn widened(&self, elem: usize, ptrs: &[u64; N]) -> (Walk<N>, usize) {
        let Some((&inner, inner_st)) = self.dims.last().zip(self.strides.last()) else {
            return (self.clone(), elem);
        };
        if inner_st.iter().any(|&s| s != 1) {
            return (self.clone(), elem);
        }
        let mut k = 16 / elem.max(1);
        while k > 1 {
            let fits = inner.is_multiple_of(k)
                && ptrs.iter().all(|&p| p.is_multiple_of((k * elem) as u64))
                && self.strides[..self.strides.len() - 1]
                    .iter()
                    .all(|s| s.iter().all(|&v| v % k as i64 == 0));
            if fits {
                break;
            }
            k /= 2;
        }
        if k <= 1 {
            return (self.clone(), elem);
        }
        let mut w = self.clone();
        if let Some(d) = w.dims.last_mut() {
            *d /= k;
        }
        let last = w.strides.len() - 1;
        for (i, s) in w.strides.iter_mut().enumerate() {
            if i != last {
                s.iter_mut().for_each(|v| *v /= k as i64);
            }
        }
        (w, elem * k)
    }

    /// Whether index math fits in 32 bits: fewer than 2³¹ elements and every offset, for
    /// each operand, below 2³¹ in magnitude.
    pub fn fits_u32(&self) -> bool {
        let limit = 1i64 << 31;
        if self.len() as u64 >= limit as u64 {
            return false;
        }
        (0..N).all(|j| {
            let span: i64 = self
                .dims
                .iter()
                .zip(&self.strides)
                .map(|(&d, s)| (d as i64 - 1).saturating_mul(s[j].abs()))
                .fold(0i64, |a, b| a.saturating_add(b));
            span < limit
        })
    }

    /// Appends `rank`, the [`MAX_RANK`] dim triples (innermost first) and the stride sets;
    /// an error when the walk has more dims than the kernels take.
    pub fn push_args(&self, mut args: KernelArgs, what: &str) -> Result<KernelArgs, String> {
        let rank = self.dims.len();
        if rank > MAX_RANK {
            return Err(format!(
                "{what}: {rank} dims after merging, CUDA kernels take at most {MAX_RANK}"
            ));
        }
        args = args.i32(rank as i32);
        for k in 0..MAX_RANK {
            let d = if k < rank { self.dims[rank - 1 - k] } else { 1 };
            let d = u32::try_from(d).map_err(|_| format!("{what}: dim {d} exceeds 32 bits"))?;
            let (m, s) = fast_div(d);
            args = args.i32(d as i32).i32(m as i32).i32(s as i32);
        }
        for j in 0..N {
            for k in 0..MAX_RANK {
                let st = if k < rank {
                    self.strides[rank - 1 - k][j]
                } else {
                    0
                };
                args = args.i64(st);
            }
        }
        Ok(args)
    }
}

/// The entry-point suffix of `dtype` (`f32`, `bool`, …).
pub(crate) fn suffix(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F64 => "f64",
        DType::I64 => "i64",
        DType::I32 => "i32",
        DType::I16 => "i16",
        DType::I8 => "i8",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        DType::Bool => "bool",
    }
}

/// The CUDA C tag of `dtype` (`F32`, `BOOL`, …).
pub(crate) fn tag(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F64 => "F64",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::I16 => "I16",
        DType::I8 => "I8",
        DType::U8 => "U8",
        DType::U16 => "U16",
        DType::U32 => "U32",
        DType::U64 => "U64",
        DType::Bool => "BOOL",
    }
}

/// Threads per block of the element-wise kernels.
pub(crate) const THREADS: u32 = 256;

/// Blocks for `items` work items of one thread each, capped (the kernels loop).
pub(crate) fn blocks(items: usize) -> u32 {
    items.div_ceil(THREADS as usize).clamp(1, 1 << 16) as u32
}

/// The program `name` with source `ELEMENTS + PRELUDE + ACCESS + body()`, generated once per process
/// (programs of one operation or dtype pair, compiled only when a layer uses them).
pub(crate) fn generated(
    name: String,
    body: impl FnOnce() -> String,
) -> Result<ProgramSource, String> {
    static PROGRAMS: OnceLock<Mutex<HashMap<String, ProgramSource>>> = OnceLock::new();
    let mut map = PROGRAMS
        .get_or_init(Default::default)
        .lock()
        .map_err(|_| "the generated-program table lock was poisoned".to_string())?;
    if let Some(p) = map.get(&name) {
        return Ok(*p);
    }
    let source: &'static str =
        Box::leak(with_prelude(&format!("{ACCESS}{}", body())).into_boxed_str());
    let key: &'static str = Box::leak(name.clone().into_boxed_str());
    let program = ProgramSource { name: key, source };
    map.insert(name, program);
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_div_matches_division() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for d in (1..300u32).chain([641, 1 << 16, 65_537, 1_000_003, (1 << 31) - 1, 1 << 31]) {
            let (m, sh) = fast_div(d);
            for _ in 0..2000 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let n = (s as u32) & 0x7fff_ffff;
                let q = ((u64::from(n) * u64::from(m)) >> 32) as u32 + n;
                assert_eq!(q >> sh, n / d, "{n} / {d}");
            }
        }
    }

    #[test]
    fn merges_contiguous_and_broadcast_runs() {
        let w = Walk::new(vec![2, 3, 1, 4], vec![[12, 0], [4, 0], [4, 0], [1, 1]]);
        let m = w.merged();
        assert_eq!(m.dims, vec![6, 4]);
        assert_eq!(m.strides, vec![[4, 0], [1, 1]]);
        let t = Walk::new(vec![2, 3], vec![[1, 3], [2, 1]]).merged();
        assert_eq!(t.dims, vec![2, 3]);
    }

    #[test]
    fn widens_aligned_rows_only() {
        let w = Walk::new(vec![5, 8], vec![[16, 8], [1, 1]]);
        let (v, e) = w.widened(4, &[0, 64]);
        assert_eq!((v.dims.clone(), e), (vec![5, 2], 16));
        assert_eq!(v.strides, vec![[4, 2], [1, 1]]);
        let (_, e) = w.widened(4, &[4, 64]);
        assert_eq!(e, 4);
        let (_, e) = Walk::new(vec![6], vec![[1, 1]]).widened(2, &[0, 0]);
        assert_eq!(e, 4);
    }

    #[test]
    fn every_program_compiles() {
        use super::super::{
            activation, cast, copy, elementwise, gather, map, pad, quantize, unary, value_test,
        };
        if !crate::kernels::prelude::nvrtc_or_skip("every core program") {
            return;
        }
        let dtypes = [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
            DType::I64,
            DType::I32,
            DType::I16,
            DType::I8,
            DType::U8,
            DType::Bool,
        ];
        let casts = dtypes
            .iter()
            .flat_map(|&a| dtypes.iter().map(move |&b| cast::spec(a, b)));
        let maps = unary::all_specs()
            .into_iter()
            .chain(activation::all_specs())
            .chain(value_test::all_specs())
            .chain(quantize::all_specs())
            .chain(casts);
        let mut programs: Vec<ProgramSource> = maps.map(|s| map::program(&s).unwrap()).collect();
        programs.extend(elementwise::all_programs());
        programs.extend([copy::program(), gather::program(), pad::program()].map(Result::unwrap));
        let programs: Vec<(ProgramSource, (u32, u32))> = programs
            .into_iter()
            .flat_map(|p| {
                let archs = crate::kernels::prelude::archs_of(p.source);
                archs.iter().map(move |&a| (p, a))
            })
            .collect();
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let chunk = programs.len().div_ceil(threads);
        let failures: Vec<String> = std::thread::scope(|scope| {
            let jobs: Vec<_> = programs
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .filter_map(|(p, a)| {
                                crate::compile(p.name, p.source, crate::Arch::new(*a), &[]).err()
                            })
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            jobs.into_iter().flat_map(|j| j.join().unwrap()).collect()
        });
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn broadcasts_like_numpy() {
        assert_eq!(
            broadcast_strides(&[3, 1], &[2, 3, 4]).unwrap(),
            vec![0, 1, 0]
        );
        assert!(broadcast_strides(&[3], &[4]).is_err());
    }
}
