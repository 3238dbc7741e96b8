//! Running a configured layer on host tensors: dtype dispatch, then planes (and, when
//! planes are few or large, blocks of output rows) in parallel.

use rayon::prelude::*;
use torchtrt_plugin_api::{DType, HostTensor, HostTensorMut, numel};

use super::config::Config;
use super::coord::{AxisGeom, CoordMode};
use super::plan::Plan;
use super::separable::Scratch;
use crate::kernels::float::Float;
use crate::kernels::par;

/// Output elements per work unit above which a plane is split (keeps a unit's scratch in
/// cache).
const UNIT_ELEMS: usize = 1 << 17;
/// Work units per thread to aim for, for load balance.
const UNITS_PER_THREAD: usize = 4;

/// Runs `config` from `input` into `output` (shapes already checked against each other) on
/// a pool of `threads` threads (`0`: the global pool); errors are messages for the caller
/// to attach the layer to.
pub fn run(
    config: &Config,
    input: &HostTensor<'_>,
    output: &mut HostTensorMut<'_>,
    threads: usize,
) -> Result<(), String> {
    let bytes = input.data.len() + output.data.len();
    par::install(threads, bytes, || match input.desc.dtype {
        DType::F32 => run_typed::<f32>(config, input, output),
        DType::F16 => run_typed::<half::f16>(config, input, output),
        DType::BF16 => run_typed::<half::bf16>(config, input, output),
        other => Err(format!("dtype {other} is not supported")),
    })
}

fn dims(shape: &[i64]) -> Result<Vec<usize>, String> {
    shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect()
}

fn run_typed<T: Float>(
    config: &Config,
    input: &HostTensor<'_>,
    output: &mut HostTensorMut<'_>,
) -> Result<(), String> {
    compute_typed::<T>(config, input, output)?;
    if config.coord == CoordMode::TfCropAndResize {
        let in_dims = dims(&input.desc.shape)?;
        let out_dims = dims(&output.desc.shape)?;
        let dst = output.typed_mut::<T>().map_err(|e| e.to_string())?;
        extrapolate(config, &in_dims[2..], &out_dims[2..], dst);
    }
    Ok(())
}

/// Sets every output whose coordinate along some axis falls outside the input to the
/// extrapolation value (`tf_crop_and_resize`).
fn extrapolate<T: Float>(config: &Config, input: &[usize], output: &[usize], dst: &mut [T]) {
    let outside: Vec<Vec<bool>> = input
        .iter()
        .zip(output)
        .enumerate()
        .map(|(a, (&i, &o))| {
            let g = AxisGeom {
                input: i,
                output: o,
                scale: config.size.scale(a),
                roi: config.roi_of(a),
            };
            (0..o).map(|d| config.coord.extrapolates(&g, d)).collect()
        })
        .collect();
    if outside.iter().all(|m| !m.contains(&true)) {
        return;
    }
    let value = T::from_f32(config.extrapolation_value);
    let plane: usize = output.iter().product();
    if plane == 0 {
        return;
    }
    let mut index = vec![0usize; output.len()];
    for k in 0..plane {
        let mut rest = k;
        for (a, &n) in output.iter().enumerate().rev() {
            index[a] = rest % n;
            rest /= n;
        }
        if index.iter().zip(&outside).any(|(&i, m)| m[i]) {
            for v in dst.iter_mut().skip(k).step_by(plane) {
                *v = value;
            }
        }
    }
}

fn compute_typed<T: Float>(
    config: &Config,
    input: &HostTensor<'_>,
    output: &mut HostTensorMut<'_>,
) -> Result<(), String> {
    let in_dims = dims(&input.desc.shape)?;
    let out_dims = dims(&output.desc.shape)?;
    let overflow = || "shape too large".to_string();
    let in_plane = numel(&input.desc.shape[2..]).ok_or_else(overflow)?;
    let out_plane = numel(&output.desc.shape[2..]).ok_or_else(overflow)?;
    let planes = numel(&input.desc.shape[..2]).ok_or_else(overflow)?;
    let src = input.typed::<T>().map_err(|e| e.to_string())?;
    let dst = output.typed_mut::<T>().map_err(|e| e.to_string())?;
    let (need_in, need_out) = (
        planes.checked_mul(in_plane).ok_or_else(overflow)?,
        planes.checked_mul(out_plane).ok_or_else(overflow)?,
    );
    if src.len() != need_in || dst.len() != need_out {
        return Err(format!(
            "buffers hold {} and {} elements, shapes need {need_in} and {need_out}",
            src.len(),
            dst.len(),
        ));
    }
    if need_out == 0 {
        return Ok(());
    }
    let plan = Plan::new(config, &in_dims[2..], &out_dims[2..]);
    let outer = out_dims[2];
    let block = out_plane / outer;
    let bytes = std::mem::size_of_val(src) + std::mem::size_of_val(dst);
    let threads = if bytes <= par::MIN_TASK_BYTES {
        1
    } else {
        rayon::current_num_threads()
    };
    let for_threads = if threads > 1 {
        (threads * UNITS_PER_THREAD).div_ceil(planes)
    } else {
        1
    };
    let splits = for_threads
        .max(out_plane.div_ceil(UNIT_ELEMS))
        .clamp(1, outer);
    let rows = outer.div_ceil(splits);
    let unit = |p: usize, u: usize, chunk: &mut [T], scratch: &mut Scratch| {
        let start = u * rows;
        let end = (start + rows).min(outer);
        plan.run(
            &src[p * in_plane..(p + 1) * in_plane],
            start..end,
            chunk,
            scratch,
        );
    };
    if threads == 1 {
        let mut scratch = Scratch::default();
        for (p, plane) in dst.chunks_mut(out_plane).enumerate() {
            for (u, chunk) in plane.chunks_mut(rows * block).enumerate() {
                unit(p, u, chunk, &mut scratch);
            }
        }
        return Ok(());
    }
    if splits == 1 {
        // Whole planes per unit: hand each task a run of planes, so that small planes do
        // not pay a parallel split each.
        let per = planes.div_ceil(threads * UNITS_PER_THREAD).max(1);
        let groups: Vec<_> = dst.chunks_mut(out_plane * per).enumerate().collect();
        par::share(groups, Scratch::default, |scratch, (g, group)| {
            for (i, plane) in group.chunks_mut(out_plane).enumerate() {
                unit(g * per + i, 0, plane, scratch);
            }
        });
        return Ok(());
    }
    dst.par_chunks_mut(out_plane)
        .enumerate()
        .flat_map(|(p, plane)| {
            plane
                .par_chunks_mut(rows * block)
                .enumerate()
                .map(move |(u, chunk)| (p, u, chunk))
        })
        .for_each_init(Scratch::default, |scratch, (p, u, chunk)| {
            unit(p, u, chunk, scratch)
        });
    Ok(())
}
