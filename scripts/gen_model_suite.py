#!/usr/bin/env python3
"""Exports the real-model suite (issue 24) to ONNX with PyTorch's exporter (`dynamo=True`):
HF BERT (attention mask), GPT-2 (causal), T5 encoder, Whisper encoder and ViT; timm
ConvNeXt and EfficientNet; torchvision DeepLabV3 and a ResNet backbone with its FPN. Every
model gets seeded random weights (nothing is downloaded), a dynamic batch (and sequence for
text), and two cases of inputs with PyTorch's outputs as `.npy`:

    OUT/manifest.json
    OUT/<model>/model.onnx
    OUT/<model>/<case>/inputs/<input>.npy
    OUT/<model>/<case>/outputs/<output>.npy

The default configurations are small (a few layers, small images) so the suite runs in CI;
`--full` exports the real sizes (BERT-base, GPT-2, t5-small, whisper-tiny, ViT-S/16,
convnext_tiny, efficientnet_b0, deeplabv3_resnet50, resnet50 + FPN at 224×224). The
manifest gives each output's absolute tolerance: 1e-4 of the largest magnitude PyTorch
computed for it. With `--f16` (a CUDA GPU needed), each case is also run by PyTorch in f16
on the GPU and the manifest records PyTorch's own f16 error per output (largest absolute
difference from the f32 output over its largest magnitude), the bar of f16 engines.

Usage: scripts/gen_model_suite.py OUT [--full] [--f16] [NAME...]
"""

import copy
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
from torch.export import Dim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_torch_programs import images, randomize, tokens  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_grad_enabled(False)

RELATIVE = 1e-4


class Hidden(nn.Module):
    """A `transformers` model's `last_hidden_state` for tokens and their attention mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class Causal(nn.Module):
    """A causal `transformers` model's `last_hidden_state` for tokens alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


class Features(nn.Module):
    """A model's dict of outputs as a tuple, in key order."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return tuple(self.model(x).values())


def text_cases(seed, vocab, masked):
    out = []
    for k, (b, s) in enumerate([(2, 16), (3, 9)]):
        ids = tokens(seed + k, b, s, vocab)
        if masked:
            mask = torch.ones(b, s, dtype=torch.int64)
            mask[0, s - 3 :] = 0
            out.append((ids, mask))
        else:
            out.append((ids,))
    return out


def text_dims(masked):
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=128)
    dims = {0: batch, 1: seq}
    return (dims, dims) if masked else (dims,)


def image_model(model, seed, side, batches=(2, 3), names=("output",)):
    cases = [(images(seed + k, b, 3, side, side),) for k, b in enumerate(batches)]
    return model, cases, ({0: Dim("batch", min=1, max=8)},), ["pixels"], list(names)


def bert(full):
    from transformers import BertConfig, BertModel

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    config = BertConfig(**({} if full else small))
    m = randomize(Hidden(BertModel(config, add_pooling_layer=False)), 1)
    return m, text_cases(10, config.vocab_size, True), text_dims(True), ["input_ids", "attention_mask"], ["hidden"]


def gpt2(full):
    from transformers import GPT2Config, GPT2Model

    small = dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=128)
    config = GPT2Config(**({} if full else small))
    m = randomize(Causal(GPT2Model(config)), 2)
    return m, text_cases(20, config.vocab_size, False), text_dims(False), ["input_ids"], ["hidden"]


def t5_encoder(full):
    from transformers import T5Config, T5EncoderModel

    shape = (
        dict(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64, vocab_size=32128)
        if full
        else dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=1000)
    )
    config = T5Config(**shape)
    m = randomize(Hidden(T5EncoderModel(config)), 3)
    return m, text_cases(30, config.vocab_size, True), text_dims(True), ["input_ids", "attention_mask"], ["hidden"]


class WhisperEncoder(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, features):
        return self.model(features).last_hidden_state


def whisper_encoder(full):
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder as Encoder

    shape = (
        dict(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536, max_source_positions=1500)
        if full
        else dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, max_source_positions=32)
    )
    config = WhisperConfig(num_mel_bins=80, **shape)
    m = randomize(WhisperEncoder(Encoder(config)), 4)
    frames = 2 * config.max_source_positions
    cases = [(images(40 + k, b, 80, frames),) for k, b in enumerate([2, 1])]
    return m, cases, ({0: Dim("batch", min=1, max=8)},), ["features"], ["hidden"]


class VitHidden(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels):
        return self.model(pixel_values=pixels).last_hidden_state


def vit(full):
    from transformers import ViTConfig, ViTModel

    shape = (
        dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, image_size=224, patch_size=16)
        if full
        else dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)
    )
    config = ViTConfig(**shape)
    m = randomize(VitHidden(ViTModel(config, add_pooling_layer=False)), 5)
    return image_model(m, 50, config.image_size, names=["hidden"])


def convnext(full):
    import timm

    m = randomize(timm.create_model("convnext_tiny" if full else "convnext_atto", num_classes=10), 6)
    return image_model(m, 60, 224 if full else 64)


def efficientnet(full):
    import timm

    m = randomize(timm.create_model("efficientnet_b0", num_classes=10), 7)
    return image_model(m, 70, 224 if full else 64)


def deeplabv3(full):
    from torchvision.models import segmentation

    build = segmentation.deeplabv3_resnet50 if full else segmentation.deeplabv3_mobilenet_v3_large
    m = randomize(Features(build(weights=None, weights_backbone=None, num_classes=5, aux_loss=False)), 8)
    return image_model(m, 80, 224 if full else 64, names=["out"])


def resnet_fpn(full):
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    backbone = resnet_fpn_backbone(
        backbone_name="resnet50" if full else "resnet18", weights=None, trainable_layers=5
    )
    m = randomize(Features(backbone), 9)
    return image_model(m, 90, 224 if full else 64, names=["p2", "p3", "p4", "p5", "pool"])


MODELS = {
    "bert": bert,
    "gpt2": gpt2,
    "t5_encoder": t5_encoder,
    "whisper_encoder": whisper_encoder,
    "vit": vit,
    "convnext": convnext,
    "efficientnet": efficientnet,
    "deeplabv3": deeplabv3,
    "resnet_fpn": resnet_fpn,
}


def flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def save_npy(path, t):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, t.detach().contiguous().numpy())


def relative_error(got, want):
    scale = float(want.abs().max())
    return float((got.float() - want).abs().max()) / scale if scale > 0 else float("inf")


def half_on_gpu(model):
    """`model` in f16 on the GPU, and a function running it on a case's inputs."""
    m16 = copy.deepcopy(model).half().cuda()

    def run(args):
        moved = [a.cuda().half() if a.is_floating_point() else a.cuda() for a in args]
        return [r.float().cpu() for r in flat(m16(*moved))]

    return run


def export(root, name, full, f16=False):
    model, cases, dynamic_shapes, inputs, outputs = MODELS[name](full)
    model.eval()
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    program = torch.onnx.export(
        model,
        cases[0],
        dynamic_shapes=dynamic_shapes,
        input_names=inputs,
        output_names=outputs,
        dynamo=True,
        external_data=False,
    )
    program.save(path)
    entry = {"name": name, "inputs": inputs, "outputs": [], "cases": []}
    scale = {o: 0.0 for o in outputs}
    half = half_on_gpu(model) if f16 else None
    if f16:
        entry["f16_error"] = {}
    for k, args in enumerate(cases):
        case = f"case{k}"
        results = flat(model(*args))
        assert len(results) == len(outputs), f"{name}: {len(results)} outputs, named {outputs}"
        for i, a in zip(inputs, args):
            save_npy(os.path.join(out, case, "inputs", f"{i}.npy"), a)
        for o, r in zip(outputs, results):
            save_npy(os.path.join(out, case, "outputs", f"{o}.npy"), r)
            scale[o] = max(scale[o], float(r.abs().max()))
        if half:
            entry["f16_error"][case] = {o: relative_error(h, r) for o, h, r in zip(outputs, half(args), results)}
        entry["cases"].append(case)
    entry["outputs"] = [{"name": o, "atol": RELATIVE * scale[o]} for o in outputs]
    return entry


def main():
    args = [a for a in sys.argv[1:] if a not in ("--full", "--f16")]
    if not args:
        sys.exit(__doc__)
    root, names = args[0], args[1:] or list(MODELS)
    full, f16 = "--full" in sys.argv, "--f16" in sys.argv
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {list(MODELS)}")
    os.makedirs(root, exist_ok=True)
    manifest = {"full": full, "relative": RELATIVE, "f16": f16, "models": []}
    for name in names:
        print(f"exporting {name}", flush=True)
        manifest["models"].append(export(root, name, full, f16))
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
