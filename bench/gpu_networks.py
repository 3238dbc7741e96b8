"""End-to-end networks on the GPU: torchtrt engines against PyTorch eager and torch.compile.

Used by `gpu_plugins_vs_pytorch.py --part networks` and `gpu_depthwise.py`. For each network
(torchvision `resnet50`, `mobilenet_v3_large`, a small ViT, timm `convnext_tiny`,
`efficientnet_b0` and `vit_small_patch16_224`; seeded random weights) and batch size:
export to ONNX on the device, compile with `torchtrtc compile --device cuda --precision f16`,
time `torchtrtc bench --device cuda`, time PyTorch eager and `torch.compile` in f16 on the
same weights and inputs with CUDA events (and `mode="max-autotune"` with `autotune`: minutes
of compilation a network), and compare our outputs and eager f16's with the
f32 model's (relative L2 error) and our top-1 classes with eager f16's.
"""

import json
import os
import subprocess
import time

import numpy as np
import torch


def calibrated(model):
    """`model` in eval mode with batch-norm statistics measured on random inputs, so that
    activations keep a unit scale through the network (with torchvision's initial
    statistics mobilenet_v3's logits shrink to ~1e-15, below f16's range)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(8, 3, 224, 224, generator=gen))
    return model.eval()


def build(name):
    """The network `name` with seeded random weights and calibrated batch norms, in eval mode."""
    return calibrated(_build(name))


def _build(name):
    import torchvision

    torch.manual_seed(0)
    if name == "resnet50":
        return torchvision.models.resnet50(weights=None).eval()
    if name == "mobilenet_v3_large":
        return torchvision.models.mobilenet_v3_large(weights=None).eval()
    if name == "vit_small":
        vit = torchvision.models.VisionTransformer(
            image_size=224, patch_size=16, num_layers=6, num_heads=6,
            hidden_dim=384, mlp_dim=1536, num_classes=1000).eval()
        torch.nn.init.normal_(vit.heads.head.weight, std=0.02)  # torchvision zeroes the head
        return vit
    if name in TIMM:
        import timm

        return timm.create_model(name, pretrained=False).eval()
    raise ValueError(name)


TIMM = ["convnext_tiny", "efficientnet_b0", "vit_small_patch16_224"]


NETWORKS = ["resnet50", "mobilenet_v3_large", "vit_small", *TIMM]


def export(model, x, path):
    """ONNX export of `model` at the shape of `x` (TorchScript exporter, dynamo as a fallback)."""
    try:
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                          opset_version=17, dynamo=False)
    except Exception:  # noqa: BLE001 - the legacy exporter may be gone; the dynamo one remains
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                          opset_version=18, dynamo=True)


def cuda_median_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def run_tool(args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        lines = (out.stderr.strip() or out.stdout.strip() or "failed").splitlines()
        raise RuntimeError(f"{' '.join(args[:2])}: {lines[-1]}")
    return out.stdout


def relative_error(ours, ref):
    ours = ours.astype(np.float64)
    ref = ref.astype(np.float64)
    return float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-30))


def one(exe, name, batch, iters, warmup, work, autotune=False):
    model = build(name).cuda()
    gen = torch.Generator().manual_seed(1)
    x32 = torch.rand(batch, 3, 224, 224, generator=gen).cuda()
    onnx_path = os.path.join(work, f"{name}_b{batch}.onnx")
    engine = os.path.join(work, f"{name}_b{batch}.engine")
    with torch.no_grad():
        export(model, x32, onnx_path)
        ref32 = model(x32).cpu().numpy()
        half = model.half()
        x16 = x32.half()
        ref = half(x16).float().cpu().numpy()
        eager = cuda_median_ms(lambda: half(x16), iters, warmup)
        t = time.time()
        compiled = torch.compile(half)
        compiled(x16)
        compile_s = time.time() - t
        comp = cuda_median_ms(lambda: compiled(x16), iters, warmup)
        tuned = None
        if autotune:
            torch._dynamo.reset()
            best = torch.compile(half, mode="max-autotune")
            best(x16)
            tuned = cuda_median_ms(lambda: best(x16), iters, warmup)
    t = time.time()
    run_tool([exe, "compile", onnx_path, "-o", engine, "--device", "cuda", "--precision", "f16", "-q"])
    build_s = time.time() - t
    stats = json.loads(run_tool([exe, "bench", engine, "--device", "cuda", "--iterations", str(iters),
                                 "--warmup", str(warmup), "--json", "-q"]).strip().splitlines()[-1])
    x_path = os.path.join(work, f"x_b{batch}.npy")
    np.save(x_path, x32.cpu().numpy())
    out_dir = os.path.join(work, f"out_{name}_b{batch}")
    run_tool([exe, "run", engine, "--device", "cuda", "--input", f"x={x_path}", "--output-dir", out_dir, "-q"])
    ours = np.load(os.path.join(out_dir, "logits.npy"))
    top1 = float(np.mean(ours.argmax(-1) == ref.argmax(-1)))
    return {
        "network": name, "batch": batch, "ours_ms": stats["median_ms"], "eager_ms": eager,
        "compile_ms": comp, "autotune_ms": tuned, "rel_err": relative_error(ours, ref32),
        "eager_rel_err": relative_error(ref, ref32), "top1_agree": top1,
        "our_build_s": build_s, "torch_compile_s": compile_s,
    }


def run(exe, iters, warmup, networks=None, batches=(1, 32), work="/tmp/torchtrt_networks",
        autotune=False):
    """Every network × batch; returns the rows (errors are rows too, so one failure shows)."""
    os.makedirs(work, exist_ok=True)
    rows = []
    for name in networks or NETWORKS:
        for batch in batches:
            try:
                rows.append(one(exe, name, batch, iters, warmup, work, autotune))
            except Exception as e:  # noqa: BLE001 - report and go on with the next network
                rows.append({"network": name, "batch": batch, "error": str(e)[-300:]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(rows):
    tuned = any(r.get("autotune_ms") for r in rows)
    extra = " max-autotune f16 ms | autotune/ours |" if tuned else ""
    lines = ["| network | batch | ours f16 ms | eager f16 ms | torch.compile f16 ms | eager/ours "
             "| compile/ours |" + extra + " ours rel. error | eager f16 rel. error | top-1 agree |",
             "|---|---|---|---|---|---|---|" + ("---|---|" if tuned else "") + "---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['network']} | {r['batch']} | error: {r['error']} |")
            continue
        cols = ""
        if tuned:
            t = r.get("autotune_ms")
            cols = f" {t:.3f} | {t / r['ours_ms']:.2f} |" if t else " | |"
        lines.append(
            f"| {r['network']} | {r['batch']} | {r['ours_ms']:.3f} | {r['eager_ms']:.3f} | "
            f"{r['compile_ms']:.3f} | {r['eager_ms'] / r['ours_ms']:.2f} | "
            f"{r['compile_ms'] / r['ours_ms']:.2f} |{cols} {r['rel_err']:.1e} | "
            f"{r['eager_rel_err']:.1e} | {r['top1_agree']:.2f} |")
    return "\n".join(lines)
