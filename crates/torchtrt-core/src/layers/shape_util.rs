//! Shape helpers shared by layer kinds.

use torchtrt_plugin_api::{DimExpr, ShapeExpr, format_shape};

/// Numpy-style broadcast of two shapes. Equal or 1 dims broadcast; two different unknown
/// dims become their maximum (checked again at run time).
pub fn broadcast_shapes(a: &[DimExpr], b: &[DimExpr]) -> Result<ShapeExpr, String> {
    let rank = a.len().max(b.len());
    let one = DimExpr::Const(1);
    (0..rank)
        .map(|i| {
            let da = (i + a.len()).checked_sub(rank).map_or(&one, |j| &a[j]);
            let db = (i + b.len()).checked_sub(rank).map_or(&one, |j| &b[j]);
            match (da.as_const(), db.as_const()) {
                _ if da == db => Ok(da.clone()),
                (Some(1), _) => Ok(db.clone()),
                (_, Some(1)) => Ok(da.clone()),
                (Some(x), Some(y)) => Err(format!(
                    "shapes {} and {} do not broadcast (dimension {i}: {x} vs {y})",
                    format_shape(a),
                    format_shape(b)
                )),
                _ => Ok(da.clone().max(db.clone())),
            }
        })
        .collect()
}

/// Whether shapes `a` and `b` may be equal at run time: the same rank, and no dim where both
/// are constants that differ. Structurally different symbolic dims may still be equal (the
/// builder's shape arithmetic names a dim `seq` where a plan read back without it names it
/// after the layer that computes it), so layers whose operands must match check their
/// concrete shapes again when they run.
pub fn may_equal(a: &[DimExpr], b: &[DimExpr]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| match (x.as_const(), y.as_const()) {
                (Some(x), Some(y)) => x == y,
                _ => true,
            })
}

/// Turns a possibly negative axis into an index below `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_may_be_equal_unless_constants_or_ranks_differ() {
        let (n, s) = (DimExpr::sym("n"), DimExpr::sym("s"));
        let c = |v: i64| DimExpr::Const(v);
        assert!(may_equal(&[n.clone(), c(4)], &[s.clone(), c(4)]));
        assert!(may_equal(&[n.clone(), c(4)], &[c(2), s.clone()]));
        assert!(!may_equal(&[n.clone(), c(4)], &[n.clone(), c(5)]));
        assert!(!may_equal(&[n.clone(), c(4)], &[n, c(4), c(1)]));
        assert!(may_equal(&[], &[]));
    }
}
