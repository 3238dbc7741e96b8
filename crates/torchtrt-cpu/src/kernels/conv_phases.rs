//! Dilated stride-1 convolutions as undilated ones on the input's phases (space to batch,
//! as in TensorFlow's atrous convolution). With dilation `d`, padding a multiple of `d` and
//! an image a multiple of `d` across, output phase `(a, b)` (the outputs at rows `≡ a` and
//! columns `≡ b` mod `d`) is the undilated convolution of input phase `(a, b)` with the
//! padding divided by `d`. The phases become images of one batch, so a dilated 3×3 layer
//! runs through Winograd (DeepLabV3's backbone at dilations 2 and 4 on 28×28 features).

use rayon::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::DType;

const WHAT: &str = "Convolution";

/// Fewest outputs along each side of a phase: Winograd on smaller phases computes tiles
/// that overhang them (7×7 outputs in 2×2 tiles are 8×8), and measured slower than the
/// rectangles of [`super::conv_regions`] (DeepLabV3's 512-channel layers at dilation 4 on
/// 28×28: 14.1 ms in rectangles, 20.4 on 7×7 phases; at dilation 2 on 14×14 phases 16.9 →
/// 12.0 ms).
const LEAST_SIDE: usize = 14;

/// How a dilated layer's images split into phases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Phases {
    /// The dilation along each spatial dim: the phases per dim.
    d: [usize; 2],
}

impl Phases {
    /// The phases of `layer` on images of `spatial` dims and the undilated layer that runs
    /// on them, when `layer` is 2-D, of stride 1, dilated, its padding (at most the image
    /// on each side) and images are multiples of the dilation, and each phase has at least
    /// [`LEAST_SIDE`] outputs across for a 3×3 window.
    pub(super) fn of(layer: &Convolution, spatial: &[usize]) -> Option<(Phases, Convolution)> {
        let ([h, w], [dh, dw]) = (
            <[usize; 2]>::try_from(spatial).ok()?,
            <[i64; 2]>::try_from(layer.dilations.as_slice()).ok()?,
        );
        let d = [usize::try_from(dh).ok()?, usize::try_from(dw).ok()?];
        let planar = layer.pads_begin.len() == 2 && layer.pads_end.len() == 2;
        if layer.strides != [1, 1] || d == [1, 1] || !planar {
            return None;
        }
        let divides = |v: i64, d: usize| usize::try_from(v).is_ok_and(|v| v % d == 0);
        let fits = (0..2).all(|i| {
            let (begin, end) = (layer.pads_begin[i], layer.pads_end[i]);
            let n = [h, w][i] as i64;
            let pads = begin.saturating_add(end);
            d[i] > 0
                && begin <= n
                && end <= n
                && divides(layer.pads_begin[i], d[i])
                && divides(layer.pads_end[i], d[i])
                && n % d[i] as i64 == 0
                && n.saturating_add(pads) / d[i] as i64 - 2 >= LEAST_SIDE as i64
        });
        if !fits {
            return None;
        }
        let mut inner = layer.clone();
        inner.dilations = vec![1, 1];
        for (i, &d) in d.iter().enumerate() {
            inner.pads_begin[i] /= d as i64;
            inner.pads_end[i] /= d as i64;
        }
        Some((Phases { d }, inner))
    }

    /// The sides of one phase of an image of `spatial` dims.
    pub(super) fn sides(&self, spatial: &[usize]) -> [usize; 2] {
        [spatial[0] / self.d[0], spatial[1] / self.d[1]]
    }

    /// The shape of the phases of outputs of `shape` (`[N, M, OH, OW]`).
    pub(super) fn of_output(&self, shape: &[usize]) -> Result<Vec<usize>, String> {
        let [dh, dw] = self.d;
        match *shape {
            [n, m, oh, ow] if oh % dh == 0 && ow % dw == 0 => {
                Ok(vec![n * dh * dw, m, oh / dh, ow / dw])
            }
            _ => Err(format!(
                "{WHAT}: outputs {shape:?} do not split into {dh}×{dw} phases"
            )),
        }
    }

    /// The phases of every image of `x` (`[N, C, H, W]`, f32) as one batch
    /// `[N·dh·dw, C, H/dh, W/dw]`: phase `(a, b)` of image `n` is image `(n·dh + a)·dw + b`.
    pub(super) fn split(&self, x: &Tensor) -> Result<Tensor, String> {
        let &[n, c, h, w] = x.shape() else {
            return Err(format!("{WHAT}: {x} is not an image batch"));
        };
        let [dh, dw] = self.d;
        if h % dh != 0 || w % dw != 0 {
            return Err(format!("{WHAT}: {x} does not split into {dh}×{dw} phases"));
        }
        let (ph, pw) = (h / dh, w / dw);
        let src = x.as_slice::<f32>().map_err(|e| format!("{WHAT}: {e}"))?;
        let mut out = vec![0f32; src.len()];
        out.par_chunks_mut(ph * pw)
            .enumerate()
            .for_each(|(i, dst)| {
                let (phase, channel) = (i / c, i % c);
                let (image, a, b) = (phase / (dh * dw), phase / dw % dh, phase % dw);
                let plane = &src[(image * c + channel) * h * w..][..h * w];
                for (row, line) in dst.chunks_exact_mut(pw).enumerate() {
                    let from = &plane[(row * dh + a) * w + b..];
                    line.iter_mut()
                        .zip(from.iter().step_by(dw))
                        .for_each(|(d, &s)| *d = s);
                }
            });
        Tensor::from_vec(&[n * dh * dw, c, ph, pw], out).map_err(|e| format!("{WHAT}: {e}"))
    }

    /// Writes the phases `phases` (`[N·dh·dw, M, OH/dh, OW/dw]`) back into `out`
    /// (`[N, M, OH, OW]`, f32): the inverse of [`Phases::split`].
    pub(super) fn merge(&self, phases: &Tensor, out: &mut Tensor) -> Result<(), String> {
        let [dh, dw] = self.d;
        let (&[n, m, oh, ow], &[pn, pm, ph, pw]) = (out.shape(), phases.shape()) else {
            return Err(format!("{WHAT}: {out} or {phases} is not an image batch"));
        };
        if out.dtype() != DType::F32 || (pn, pm, ph * dh, pw * dw) != (n * dh * dw, m, oh, ow) {
            return Err(format!(
                "{WHAT}: {phases} are not the {dh}×{dw} phases of {out}"
            ));
        }
        let src = phases
            .as_slice::<f32>()
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let dst = out
            .as_mut_slice::<f32>()
            .map_err(|e| format!("{WHAT}: {e}"))?;
        dst.par_chunks_mut(oh * ow)
            .enumerate()
            .for_each(|(i, plane)| {
                let (image, channel) = (i / m, i % m);
                for a in 0..dh {
                    for b in 0..dw {
                        let phase = (image * dh + a) * dw + b;
                        let from = &src[(phase * m + channel) * ph * pw..][..ph * pw];
                        for (row, line) in from.chunks_exact(pw).enumerate() {
                            let to = &mut plane[(row * dh + a) * ow + b..];
                            to.iter_mut()
                                .step_by(dw)
                                .zip(line)
                                .for_each(|(d, &s)| *d = s);
                        }
                    }
                }
            });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(dilation: i64, pad: i64) -> Convolution {
        let mut l = Convolution::new(2);
        l.dilations = vec![dilation; 2];
        l.pads_begin = vec![pad; 2];
        l.pads_end = vec![pad; 2];
        l
    }

    #[test]
    fn same_padding_splits_into_undilated_phases() {
        let (p, inner) = Phases::of(&layer(4, 4), &[56, 56]).unwrap();
        assert_eq!(p.d, [4, 4]);
        assert!(
            Phases::of(&layer(4, 4), &[28, 28]).is_none(),
            "phases of 7×7"
        );
        assert_eq!(
            (inner.dilations, inner.pads_begin),
            (vec![1, 1], vec![1, 1])
        );
        assert!(
            Phases::of(&layer(4, 2), &[28, 28]).is_none(),
            "padding not a multiple"
        );
        assert!(
            Phases::of(&layer(12, 12), &[28, 28]).is_none(),
            "image not a multiple"
        );
        assert!(Phases::of(&layer(1, 1), &[28, 28]).is_none(), "not dilated");
        let huge = i64::MAX / 2 * 2;
        assert!(
            Phases::of(&layer(2, huge), &[28, 28]).is_none(),
            "padding past the image"
        );
        assert!(
            Phases::of(&layer(i64::MAX, 0), &[28, 28]).is_none(),
            "dilation past the image"
        );
    }

    #[test]
    fn merging_the_split_gives_the_image_back() {
        let p = Phases { d: [2, 2] };
        let x = Tensor::from_vec(&[2, 3, 6, 4], (0..144).map(|v| v as f32).collect()).unwrap();
        let phases = p.split(&x).unwrap();
        assert_eq!(phases.shape(), [8, 3, 3, 2]);
        let first = &phases.as_slice::<f32>().unwrap()[..6];
        assert_eq!(
            first,
            [0.0, 2.0, 8.0, 10.0, 16.0, 18.0],
            "phase (0, 0) of channel 0"
        );
        let mut back = Tensor::zeros(DType::F32, &[2, 3, 6, 4]);
        p.merge(&phases, &mut back).unwrap();
        assert_eq!(
            back.as_slice::<f32>().unwrap(),
            x.as_slice::<f32>().unwrap()
        );
    }
}
