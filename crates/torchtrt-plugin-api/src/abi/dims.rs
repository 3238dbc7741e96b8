//! Symbolic dimensions across the ABI. The host keeps a [`DimArena`] of expressions behind
//! the handles it hands out; a Rust plugin behind the ABI sees input dimensions it cannot
//! read as opaque symbols ([`BuilderDims`]) and turns its results back into handles.

use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use super::types::{
    TTRT_DIM_INVALID, TTRT_MAX_DIMS, TtrtDimConstantFn, TtrtDimConstantValueFn, TtrtDimHandle,
    TtrtDimOperationFn, TtrtDimUnknownFn, TtrtExprBuilder, TtrtShapeExpr,
};
use crate::dims::{DimExpr, DimOp, ShapeExpr, UNKNOWN_DIM};

/// Most expressions one `output_shapes` call may build.
const ARENA_LIMIT: usize = 1 << 20;

/// The host's expressions, indexed by handle.
pub(crate) struct DimArena {
    exprs: Mutex<Vec<DimExpr>>,
}

impl DimArena {
    /// An empty arena.
    pub(crate) fn new() -> DimArena {
        DimArena {
            exprs: Mutex::new(Vec::new()),
        }
    }

    /// Stores `e`; [`TTRT_DIM_INVALID`] when the arena is full.
    pub(crate) fn push(&self, e: DimExpr) -> TtrtDimHandle {
        let Ok(mut exprs) = self.exprs.lock() else {
            return TTRT_DIM_INVALID;
        };
        if exprs.len() >= ARENA_LIMIT {
            return TTRT_DIM_INVALID;
        }
        exprs.push(e);
        TtrtDimHandle::try_from(exprs.len() - 1).unwrap_or(TTRT_DIM_INVALID)
    }

    /// The expression behind `h`.
    pub(crate) fn get(&self, h: TtrtDimHandle) -> Option<DimExpr> {
        let exprs = self.exprs.lock().ok()?;
        exprs.get(usize::try_from(h).ok()?).cloned()
    }

    /// Stores the dimensions of `shape` as a C shape.
    pub(crate) fn push_shape(&self, shape: &[DimExpr]) -> Result<TtrtShapeExpr, String> {
        if shape.len() > TTRT_MAX_DIMS {
            return Err(format!(
                "shape of {} dimensions; the ABI carries at most {TTRT_MAX_DIMS}",
                shape.len()
            ));
        }
        let mut dims = [TTRT_DIM_INVALID; TTRT_MAX_DIMS];
        for (d, e) in dims.iter_mut().zip(shape) {
            *d = self.push(e.clone());
            if *d == TTRT_DIM_INVALID {
                return Err("too many dimension expressions".to_string());
            }
        }
        Ok(TtrtShapeExpr {
            nb_dims: i32::try_from(shape.len()).unwrap_or(0),
            reserved: 0,
            dims,
        })
    }

    /// Reads a C shape whose handles must come from this arena.
    pub(crate) fn read_shape(&self, raw: &TtrtShapeExpr) -> Result<ShapeExpr, String> {
        let rank = usize::try_from(raw.nb_dims)
            .ok()
            .filter(|&r| r <= TTRT_MAX_DIMS)
            .ok_or_else(|| format!("{} dimensions is not in 0..={TTRT_MAX_DIMS}", raw.nb_dims))?;
        raw.dims[..rank]
            .iter()
            .map(|&h| {
                self.get(h)
                    .ok_or_else(|| format!("invalid dimension handle {h}"))
            })
            .collect()
    }

    /// The builder table pointing at this arena; valid while `self` is.
    pub(crate) fn builder(&self) -> TtrtExprBuilder {
        TtrtExprBuilder {
            ctx: std::ptr::from_ref(self).cast_mut().cast(),
            constant: Some(arena_constant),
            operation: Some(arena_operation),
            constant_value: Some(arena_constant_value),
            unknown: Some(arena_unknown),
        }
    }
}

unsafe extern "C" fn arena_unknown(ctx: *mut c_void) -> TtrtDimHandle {
    // SAFETY: the builder's own context.
    let Some(a) = (unsafe { arena(ctx) }) else {
        return TTRT_DIM_INVALID;
    };
    catch_unwind(AssertUnwindSafe(|| a.push(DimExpr::unknown()))).unwrap_or(TTRT_DIM_INVALID)
}

/// # Safety
/// `ctx` is the arena of a builder made by [`DimArena::builder`], still alive.
unsafe fn arena<'a>(ctx: *mut c_void) -> Option<&'a DimArena> {
    // SAFETY: NULL or a live arena by the caller's promise.
    unsafe { ctx.cast::<DimArena>().cast_const().as_ref() }
}

unsafe extern "C" fn arena_constant(ctx: *mut c_void, value: i64) -> TtrtDimHandle {
    // SAFETY: the builder's own context.
    let Some(a) = (unsafe { arena(ctx) }) else {
        return TTRT_DIM_INVALID;
    };
    catch_unwind(AssertUnwindSafe(|| a.push(DimExpr::Const(value)))).unwrap_or(TTRT_DIM_INVALID)
}

unsafe extern "C" fn arena_operation(
    ctx: *mut c_void,
    op: i32,
    x: TtrtDimHandle,
    y: TtrtDimHandle,
) -> TtrtDimHandle {
    // SAFETY: the builder's own context.
    let Some(a) = (unsafe { arena(ctx) }) else {
        return TTRT_DIM_INVALID;
    };
    let build = || {
        let (Some(op), Some(x), Some(y)) = (DimOp::from_raw(op), a.get(x), a.get(y)) else {
            return TTRT_DIM_INVALID;
        };
        a.push(DimExpr::op(op, x, y))
    };
    catch_unwind(AssertUnwindSafe(build)).unwrap_or(TTRT_DIM_INVALID)
}

unsafe extern "C" fn arena_constant_value(
    ctx: *mut c_void,
    h: TtrtDimHandle,
    value: *mut i64,
) -> i32 {
    // SAFETY: the builder's own context.
    let Some(a) = (unsafe { arena(ctx) }) else {
        return 0;
    };
    let known = catch_unwind(AssertUnwindSafe(|| a.get(h)?.as_const()))
        .ok()
        .flatten();
    match known {
        Some(v) if !value.is_null() => {
            // SAFETY: non-NULL; the plugin passes a writable i64.
            unsafe { value.write(v) };
            1
        }
        _ => 0,
    }
}

/// A host's builder as seen by a Rust plugin behind the ABI: input handles become constants
/// when known and symbols `#<handle>` otherwise; results are rebuilt through the builder.
pub(crate) struct BuilderDims {
    ctx: *mut c_void,
    constant: TtrtDimConstantFn,
    operation: TtrtDimOperationFn,
    constant_value: TtrtDimConstantValueFn,
    unknown: Option<TtrtDimUnknownFn>,
    symbols: HashMap<Arc<str>, TtrtDimHandle>,
}

impl BuilderDims {
    /// Wraps a builder; an error when it or one of its functions is NULL. `unknown` is read
    /// only from hosts of ABI version 3 and later, which this crate's hosts always are.
    ///
    /// # Safety
    /// A non-NULL `builder` must be valid, with functions valid for its context, as long
    /// as the result is used.
    pub(crate) unsafe fn new(builder: *const TtrtExprBuilder) -> Result<BuilderDims, String> {
        // SAFETY: NULL or valid by the caller's promise.
        let b = unsafe { builder.as_ref() }.ok_or("expression builder is NULL")?;
        match (b.constant, b.operation, b.constant_value) {
            (Some(constant), Some(operation), Some(constant_value)) => Ok(BuilderDims {
                ctx: b.ctx,
                constant,
                operation,
                constant_value,
                unknown: b.unknown,
                symbols: HashMap::new(),
            }),
            _ => Err("expression builder has a NULL function".to_string()),
        }
    }

    /// The expression a Rust plugin sees for the input dimension `h`.
    pub(crate) fn input(&mut self, h: TtrtDimHandle) -> DimExpr {
        let mut v = 0i64;
        // SAFETY: the builder's functions with its own context; `v` is writable.
        if unsafe { (self.constant_value)(self.ctx, h, &mut v) } == 1 {
            return DimExpr::Const(v);
        }
        let name: Arc<str> = Arc::from(format!("#{h}"));
        self.symbols.insert(name.clone(), h);
        DimExpr::Sym(name)
    }

    /// Reads a C shape of input handles.
    pub(crate) fn input_shape(&mut self, raw: &TtrtShapeExpr) -> Result<ShapeExpr, String> {
        let rank = usize::try_from(raw.nb_dims)
            .ok()
            .filter(|&r| r <= TTRT_MAX_DIMS)
            .ok_or_else(|| format!("{} dimensions is not in 0..={TTRT_MAX_DIMS}", raw.nb_dims))?;
        Ok(raw.dims[..rank].iter().map(|&h| self.input(h)).collect())
    }

    /// The handle of `e`, built through the host's builder.
    pub(crate) fn handle(&self, e: &DimExpr) -> Result<TtrtDimHandle, String> {
        let h = match e {
            // SAFETY: the builder's function with its own context.
            DimExpr::Const(v) => unsafe { (self.constant)(self.ctx, *v) },
            DimExpr::Sym(s) if &**s == UNKNOWN_DIM => {
                let f = self
                    .unknown
                    .ok_or("the host's expression builder has no `unknown`")?;
                // SAFETY: the builder's function with its own context.
                unsafe { f(self.ctx) }
            }
            DimExpr::Sym(s) => *self.symbols.get(s).ok_or_else(|| {
                format!("output dimension uses `{s}`, which is not an input dimension")
            })?,
            DimExpr::Op(op, a, b) => {
                let (a, b) = (self.handle(a)?, self.handle(b)?);
                // SAFETY: the builder's function with its own context.
                unsafe { (self.operation)(self.ctx, *op as i32, a, b) }
            }
        };
        if h == TTRT_DIM_INVALID {
            return Err(format!("the host's expression builder refused {e}"));
        }
        Ok(h)
    }

    /// The C shape of `shape`.
    pub(crate) fn output_shape(&self, shape: &[DimExpr]) -> Result<TtrtShapeExpr, String> {
        if shape.len() > TTRT_MAX_DIMS {
            return Err(format!(
                "output of {} dimensions; the ABI carries at most {TTRT_MAX_DIMS}",
                shape.len()
            ));
        }
        let mut dims = [TTRT_DIM_INVALID; TTRT_MAX_DIMS];
        for (d, e) in dims.iter_mut().zip(shape) {
            *d = self.handle(e)?;
        }
        Ok(TtrtShapeExpr {
            nb_dims: i32::try_from(shape.len()).unwrap_or(0),
            reserved: 0,
            dims,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_round_trips_expressions_through_the_arena() {
        let arena = DimArena::new();
        let input = [DimExpr::sym("n"), DimExpr::Const(6)];
        let raw = arena.push_shape(&input).expect("rank 2");
        let builder = arena.builder();
        // SAFETY: `builder` points at `arena`, alive for the whole test.
        let mut dims = unsafe { BuilderDims::new(&builder) }.expect("complete builder");
        let seen = dims.input_shape(&raw).expect("valid rank");
        assert_eq!(seen[1], DimExpr::Const(6));
        let out = [(&seen[0] * 2).max(seen[1].clone()), seen[1].clone() - 1];
        let out_raw = dims.output_shape(&out).expect("known symbols");
        let back = arena.read_shape(&out_raw).expect("arena handles");
        assert_eq!(
            back,
            vec![(DimExpr::sym("n") * 2).max(6), DimExpr::Const(5)]
        );
        assert!(dims.handle(&DimExpr::sym("other")).is_err());
        assert!(
            arena
                .read_shape(&TtrtShapeExpr {
                    nb_dims: 1,
                    reserved: 0,
                    dims: [99; 8]
                })
                .is_err()
        );
    }
}
