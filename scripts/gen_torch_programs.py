#!/usr/bin/env python3
"""Exports the PyTorch test programs of `crates/torchtrt-torch` with `torch.export`: every
model gets seeded random weights (nothing is downloaded), is saved as exported
(`exported.pt2`) and after `run_decompositions()` (`decomposed.pt2`), with inputs and
PyTorch's outputs as `.npy` for each case (dynamic programs at two sizes):

    OUT/manifest.json
    OUT/<program>/exported.pt2, decomposed.pt2
    OUT/<program>/<case>/inputs/<user input>.npy
    OUT/<program>/<case>/outputs/<output>.npy

Outputs are named as the importer names them: by the keys of a returned dict (or model
output) when the output is one flat mapping, else by the program's output-spec tensor names
(which differ between the two forms; the manifest lists both, the files use the exported
form's names).

Usage: scripts/gen_torch_programs.py OUT [NAME...]
"""

import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim
from torch.utils import _pytree as pytree

warnings.filterwarnings("ignore")
torch.set_grad_enabled(False)


def randomize(module, seed):
    """Seeded random parameters and buffers: normalisation statistics that are not the
    identity, weights scaled so activations stay O(1) through deep stacks."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        if p.dim() >= 2:
            fan_in = p[0].numel()
            p.copy_(torch.randn(p.shape, generator=g) / fan_in**0.5)
        elif name.endswith("weight"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
        else:
            p.copy_(0.1 * torch.randn(p.shape, generator=g))
    for name, b in module.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(0.1 * torch.randn(b.shape, generator=g))
        elif name.endswith("running_var"):
            b.copy_(0.5 + torch.rand(b.shape, generator=g))
    return module.eval()


def images(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tokens(seed, batch, seq, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g)


# -- the programs ------------------------------------------------------------------------


def resnet18():
    import torchvision

    m = randomize(torchvision.models.resnet18(num_classes=10), 1)
    batch = Dim("batch", min=1, max=8)
    cases = [(images(10, 2, 3, 64, 64),), (images(11, 3, 3, 64, 64),)]
    return m, cases, ({0: batch},), []


def mobilenet_v3_small():
    import torchvision

    m = randomize(torchvision.models.mobilenet_v3_small(num_classes=10), 2)
    batch = Dim("batch", min=1, max=8)
    cases = [(images(20, 2, 3, 64, 64),), (images(21, 1, 3, 64, 64),)]
    return m, cases, ({0: batch},), []


def efficientnet_b0():
    """SiLU activations (`aten::silu`) and squeeze-and-excitation sigmoids."""
    import torchvision

    m = randomize(torchvision.models.efficientnet_b0(num_classes=10), 4)
    batch = Dim("batch", min=1, max=8)
    cases = [(images(40, 2, 3, 64, 64),), (images(41, 1, 3, 64, 64),)]
    return m, cases, ({0: batch},), []


def lraspp_mobilenet_v3():
    """Segmentation at a dynamic batch and image size (multiples of 32, so that every
    upsampling to a run-time size is an exact scale)."""
    import torchvision

    m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=3
    )
    m = randomize(m, 3)
    batch = Dim("batch", min=1, max=4)
    h = 32 * Dim("h32", min=2, max=8)
    w = 32 * Dim("w32", min=2, max=8)
    cases = [(images(30, 2, 3, 64, 96),), (images(31, 1, 3, 96, 64),)]
    return m, cases, ({0: batch, 2: h, 3: w},), []


def vit_tiny():
    from torchvision.models.vision_transformer import VisionTransformer

    m = VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
    )
    m = randomize(m, 4)
    batch = Dim("batch", min=1, max=8)
    cases = [(images(40, 2, 3, 32, 32),), (images(41, 5, 3, 32, 32),)]
    return m, cases, ({0: batch},), []


class HfWrapper(nn.Module):
    """Calls a Hugging Face model with keyword inputs and returns its output as a dict."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


def bert_tiny():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    m = randomize(HfWrapper(BertModel(config, add_pooling_layer=True)), 5)
    return m, hf_cases(50, 99), hf_dims(), []


def gpt2_tiny():
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64, attn_implementation="eager"
    )
    m = randomize(HfWrapper(GPT2Model(config)), 6)
    return m, hf_cases(60, 99), hf_dims(), []


def hf_dims():
    batch = Dim("batch", min=1, max=8)
    seq = Dim("seq", min=2, max=32)
    return ({0: batch, 1: seq}, {0: batch, 1: seq})


def hf_cases(seed, vocab):
    out = []
    for k, (b, s) in enumerate([(2, 7), (3, 12)]):
        ids = tokens(seed + k, b, s, vocab)
        mask = torch.ones(b, s, dtype=torch.int64)
        mask[0, s - 2 :] = 0
        out.append((ids, mask))
    return out


class Interpolations(nn.Module):
    """Every way `Interpolate` is reached: nearest and bilinear upsampling by scale and by
    size, align_corners, and adaptive pooling."""

    def forward(self, x):
        a = F.interpolate(x, scale_factor=2.0, mode="nearest")
        b = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        c = F.interpolate(x, size=(10, 14), mode="bilinear", align_corners=True)
        d = F.adaptive_max_pool2d(x, (3, 2))
        e = F.adaptive_avg_pool2d(x, (3, 5))
        return a, b, c, d, e


def plugin_interpolate():
    batch = Dim("batch", min=1, max=4)
    cases = [(images(70, 2, 3, 8, 12),), (images(71, 3, 3, 8, 12),)]
    return Interpolations().eval(), cases, ({0: batch},), ["torch_tensorrt::Interpolate"]


class Normalize(nn.Module):
    def forward(self, x):
        return F.normalize(x, p=2.0, dim=1), F.normalize(x, p=1.0, dim=-1)


def plugin_normalize():
    batch = Dim("batch", min=1, max=8)
    cases = [(images(80, 2, 16, 5),), (images(81, 4, 16, 5),)]
    return Normalize().eval(), cases, ({0: batch},), ["torch_tensorrt::NormalizePlugin"]


def plugin_instance_norm():
    m = randomize(nn.Sequential(nn.Conv2d(3, 6, 3), nn.InstanceNorm2d(6, affine=True), nn.ReLU()), 9)
    batch = Dim("batch", min=1, max=4)
    cases = [(images(90, 2, 3, 10, 10),), (images(91, 3, 3, 10, 10),)]
    return m, cases, ({0: batch},), ["InstanceNormalization_TRT"]


class Gelus(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 24)

    def forward(self, x):
        h = self.lin(x)
        return F.gelu(h), F.gelu(h, approximate="tanh")


def plugin_gelu():
    m = randomize(Gelus(), 10)
    batch = Dim("batch", min=1, max=8)
    cases = [(images(100, 2, 7, 16),), (images(101, 5, 7, 16),)]
    return m, cases, ({0: batch},), ["CustomGeluPluginDynamic"]


class Nms(nn.Module):
    """torchvision's `nms`, and the kept boxes gathered by its data-dependent result."""

    def forward(self, boxes, scores):
        import torchvision

        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return keep, boxes[keep]


def crowded_boxes(seed, n, ties=False):
    """`n` boxes (x1, y1, x2, y2) crowded into a small square, so that many overlap, and
    their scores: distinct, or in steps of 0.1 so that many tie."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(n, 2, generator=g) * 4.0
    size = 0.5 + torch.rand(n, 2, generator=g) * 2.0
    boxes = torch.cat([centre - size / 2, centre + size / 2], dim=1)
    scores = torch.randperm(n, generator=g).float() / n
    if ties:
        scores = torch.floor(scores * 10.0) / 10.0
    return boxes, scores


def plugin_nms():
    n = Dim("n", min=2, max=1024)
    cases = [crowded_boxes(120, 64), crowded_boxes(121, 300), crowded_boxes(122, 200, ties=True)]
    return Nms().eval(), cases, ({0: n}, {0: n}), ["torch_tensorrt::NonMaxSuppression"]


PROGRAMS = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "lraspp_mobilenet_v3": lraspp_mobilenet_v3,
    "vit_tiny": vit_tiny,
    "bert_tiny": bert_tiny,
    "gpt2_tiny": gpt2_tiny,
    "plugin_interpolate": plugin_interpolate,
    "plugin_normalize": plugin_normalize,
    "plugin_instance_norm": plugin_instance_norm,
    "plugin_gelu": plugin_gelu,
    "plugin_nms": plugin_nms,
}


# -- writing -----------------------------------------------------------------------------


def output_names(ep, eager_out):
    """The importer's names: flat mapping keys, else the output specs' tensor names."""
    leaves, _ = pytree.tree_flatten_with_path(eager_out)
    keys = []
    for path, _ in leaves:
        if len(path) == 1 and isinstance(path[0], (pytree.MappingKey, pytree.GetAttrKey)):
            key = path[0].key if isinstance(path[0], pytree.MappingKey) else path[0].name
            keys.append(key if isinstance(key, str) else None)
        else:
            keys.append(None)
    if keys and all(k is not None for k in keys):
        return keys
    return [str(s.arg.name) for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]


def save_npy(path, t):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, t.detach().contiguous().numpy())


def export_program(root, name, build):
    model, cases, dynamic_shapes, plugins = build()
    ep = torch.export.export(model, cases[0], dynamic_shapes=dynamic_shapes)
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep, os.path.join(out, "exported.pt2"))
    decomposed = ep.run_decompositions()
    torch.export.save(decomposed, os.path.join(out, "decomposed.pt2"))
    inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    entry = {"name": name, "inputs": inputs, "plugins": plugins, "cases": []}
    for k, args in enumerate(cases):
        eager = model(*args)
        names = output_names(ep, eager)
        flat = pytree.tree_leaves(eager)
        exported = pytree.tree_leaves(ep.module()(*args))
        for a, b in zip(flat, exported):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        case = f"case{k}"
        for n, t in zip(inputs, args):
            save_npy(os.path.join(out, case, "inputs", f"{n}.npy"), t)
        for n, t in zip(names, flat):
            save_npy(os.path.join(out, case, "outputs", f"{n}.npy"), t)
        entry["outputs"] = names
        entry["decomposed_outputs"] = output_names(decomposed, eager)
        entry["cases"].append({"name": case, "shapes": {n: list(t.shape) for n, t in zip(inputs, args)}})
    return entry


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    wanted = sys.argv[2:] or list(PROGRAMS)
    os.makedirs(root, exist_ok=True)
    entries = []
    for name in wanted:
        print(f"exporting {name}", file=sys.stderr)
        entries.append(export_program(root, name, PROGRAMS[name]))
    manifest = {"torch": torch.__version__, "programs": entries}
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
