"""Outputs whose length the engine decides at run time: torchvision's `nms` in a compiled
module (the NonMaxSuppression plugin), against torchvision, and the plugin's capabilities
in the registry."""

import pytest

import torchtrt

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")


class Nms(torch.nn.Module):
    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return keep, boxes[keep]


def crowded(seed, n, ties=False):
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(n, 2, generator=g) * 4.0
    size = 0.5 + torch.rand(n, 2, generator=g) * 2.0
    boxes = torch.cat([centre - size / 2, centre + size / 2], dim=1)
    scores = torch.rand(n, generator=g)
    if ties:
        scores = torch.floor(scores * 10) / 10
    return boxes, scores


def test_nms_module_matches_torchvision_with_the_actual_number_of_boxes():
    model = Nms().eval()
    compiled = torchtrt.compile(model, inputs=list(crowded(0, 120)))
    lengths = set()
    for seed, ties in [(1, False), (2, True), (3, False)]:
        boxes, scores = crowded(seed, 120, ties)
        keep, kept = compiled(boxes, scores)
        want_keep, want_kept = model(boxes, scores)
        assert keep.dtype == torch.int64 and keep.shape == want_keep.shape
        assert torch.equal(keep, want_keep)
        assert torch.equal(kept, want_kept)
        lengths.add(keep.shape[0])
    assert len(lengths) > 1, lengths


def test_the_nms_plugin_lists_its_capabilities():
    plugins = {(p.namespace, p.name): p for p in torchtrt.plugins()}
    nms = plugins[("torch_tensorrt", "NonMaxSuppression")]
    assert nms.capabilities == ("shape inputs", "sized outputs")
    assert plugins[("", "CustomGeluPluginDynamic")].capabilities == ()
