//! What the suppression computes, shared by the CPU kernel and the CUDA launch: the layout
//! of boxes, scores and selection, the thresholds, and the IoU test.

use torchtrt_plugin_api::{DimExpr, ShapeExpr, ShapeValues};

/// How boxes, scores and the selection are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// ONNX `NonMaxSuppression`: boxes `[B, N, 4]`, scores `[B, C, N]`, selection `[K, 3]`.
    Onnx,
    /// torchvision `nms`: boxes `[N, 4]`, scores `[N]`, selection `[K]`.
    Torchvision,
}

impl Layout {
    pub(crate) fn parse(name: &str) -> Option<Layout> {
        match name {
            "onnx" => Some(Layout::Onnx),
            "torchvision" => Some(Layout::Torchvision),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout::Onnx => "onnx",
            Layout::Torchvision => "torchvision",
        }
    }

    /// The ranks of boxes and scores.
    fn ranks(self) -> (usize, usize) {
        match self {
            Layout::Onnx => (3, 3),
            Layout::Torchvision => (2, 1),
        }
    }
}

/// The suppression's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rule {
    pub layout: Layout,
    /// Boxes are centre x, centre y, width, height (else two opposite corners).
    pub centered: bool,
    /// Most boxes kept per batch and class; `None` for no limit.
    pub max_out: Option<u64>,
    /// A box is suppressed by a kept box whose IoU with it is greater.
    pub iou: f32,
    /// Boxes scoring this or less are dropped; `None` keeps every box.
    pub score: Option<f32>,
}

/// Where the limit and thresholds come from: fields, or inputs whose values the host reads
/// (shape inputs), by input index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ValueInputs {
    pub max_out: Option<usize>,
    pub iou: Option<usize>,
    pub score: Option<usize>,
}

impl ValueInputs {
    /// The inputs, in index order.
    pub(crate) fn indices(&self) -> Vec<usize> {
        let mut v: Vec<usize> = [self.max_out, self.iou, self.score]
            .into_iter()
            .flatten()
            .collect();
        v.sort_unstable();
        v
    }

    /// Replaces what `rule` takes from inputs with their values (ONNX's reading: an empty
    /// tensor is an absent one; a negative limit keeps nothing). `None` when a value is not
    /// known yet.
    pub(crate) fn apply(
        &self,
        rule: &Rule,
        values: &[ShapeValues],
    ) -> Result<Option<Rule>, String> {
        let mut r = *rule;
        let value = |i: usize, what: &str| -> Result<Option<Option<f64>>, String> {
            let v = values.get(i).and_then(ShapeValues::floats);
            match v.as_deref() {
                None => Ok(None),
                Some([]) => Ok(Some(None)),
                Some([x]) => Ok(Some(Some(*x))),
                Some(more) => Err(format!(
                    "input {i} (`{what}`) holds {} values, not one",
                    more.len()
                )),
            }
        };
        if let Some(i) = self.max_out {
            match value(i, "max_output_boxes_per_class")? {
                None => return Ok(None),
                Some(m) => {
                    r.max_out = Some(m.map_or(0, |m| m.max(0.0).min(u64::MAX as f64) as u64))
                }
            }
        }
        if let Some(i) = self.iou {
            match value(i, "iou_threshold")? {
                None => return Ok(None),
                Some(t) => r.iou = t.map_or(0.0, |t| t as f32),
            }
        }
        if let Some(i) = self.score {
            match value(i, "score_threshold")? {
                None => return Ok(None),
                Some(t) => r.score = t.map(|t| t as f32),
            }
        }
        Ok(Some(r))
    }
}

impl Rule {
    /// Checks the ranks of boxes and scores.
    pub(crate) fn check_ranks(&self, boxes: usize, scores: usize) -> Result<(), String> {
        let (b, s) = self.layout.ranks();
        if (boxes, scores) != (b, s) {
            return Err(format!(
                "layout {} takes boxes of rank {b} and scores of rank {s}, got {boxes} and {scores}",
                self.layout.name()
            ));
        }
        Ok(())
    }

    /// `(batches, classes, boxes)` of concrete shapes, checked against each other.
    pub(crate) fn problem(
        &self,
        boxes: &[i64],
        scores: &[i64],
    ) -> Result<(usize, usize, usize), String> {
        self.check_ranks(boxes.len(), scores.len())?;
        let dims: Vec<usize> = boxes
            .iter()
            .chain(scores)
            .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is not concrete")))
            .collect::<Result<_, _>>()?;
        let (b, c, n, box_n, box_b) = match self.layout {
            Layout::Onnx => (dims[3], dims[4], dims[5], dims[1], dims[0]),
            Layout::Torchvision => (1, 1, dims[2], dims[0], 1),
        };
        let corners = boxes[boxes.len() - 1];
        if corners != 4 || box_n != n || box_b != b {
            return Err(format!(
                "boxes {boxes:?} do not match scores {scores:?} (layout {})",
                self.layout.name()
            ));
        }
        Ok((b, c, n))
    }

    /// Boxes kept per batch and class at most, of `n` candidates.
    pub(crate) fn kept_per_class(&self, n: usize) -> usize {
        match self.max_out {
            Some(m) => usize::try_from(m).map_or(n, |m| m.min(n)),
            None => n,
        }
    }

    /// The length the selection is allocated at: every batch and class keeping as many
    /// boxes as it may.
    pub(crate) fn upper_bound(
        &self,
        boxes: &ShapeExpr,
        scores: &ShapeExpr,
    ) -> Result<DimExpr, String> {
        self.check_ranks(boxes.len(), scores.len())?;
        let n = scores[scores.len() - 1].clone();
        let kept = match self.max_out {
            Some(m) => n.min(DimExpr::Const(i64::try_from(m).unwrap_or(i64::MAX))),
            None => n,
        };
        Ok(match self.layout {
            Layout::Onnx => scores[0].clone() * scores[1].clone() * kept,
            Layout::Torchvision => kept,
        })
    }

    /// The box as `(y_min, x_min, y_max, x_max)` — or the same with x and y swapped, which
    /// IoU does not mind — from its four coordinates.
    #[inline]
    pub(crate) fn corners(&self, b: [f32; 4]) -> [f32; 4] {
        if self.centered {
            let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
            [b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw]
        } else {
            [
                b[0].min(b[2]),
                b[1].min(b[3]),
                b[0].max(b[2]),
                b[1].max(b[3]),
            ]
        }
    }

    /// Whether a kept box `a` suppresses box `b` (corners from [`Rule::corners`]): their
    /// intersection is not empty, both areas are positive, and the IoU exceeds the
    /// threshold (ONNX's rule; torchvision's for boxes of positive area).
    #[inline]
    pub(crate) fn suppresses(&self, a: [f32; 4], b: [f32; 4]) -> bool {
        let (y0, x0) = (a[0].max(b[0]), a[1].max(b[1]));
        let (y1, x1) = (a[2].min(b[2]), a[3].min(b[3]));
        if x1 <= x0 || y1 <= y0 {
            return false;
        }
        let inter = (x1 - x0) * (y1 - y0);
        let area_a = (a[2] - a[0]) * (a[3] - a[1]);
        let area_b = (b[2] - b[0]) * (b[3] - b[1]);
        let union = area_a + area_b - inter;
        if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > self.iou
    }
}
