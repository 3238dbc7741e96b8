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
