"""A/B of two `torchtrtc` binaries on the same ONNX exports, in one call on one GPU.

Each model is exported once (`gpu_networks.py` / `gpu_transformers.py` builders, seeded
random weights), compiled `--device cuda --precision f16` by both binaries, then benched in
alternating rounds (`torchtrtc bench --json`); per-layer profiles (`--export-profile`) land
in `--out`, and the largest difference between the two engines' outputs is printed.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_networks as nets  # noqa: E402
import gpu_transformers as text  # noqa: E402


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print("FAILED", " ".join(cmd), r.stdout[-2000:], r.stderr[-3000:], flush=True)
        return None
    return r.stdout


def export(name, batch, work):
    """The ONNX file of `name` at `batch` and the `--input` flags feeding it."""
    path = os.path.join(work, f"{name}_b{batch}.onnx")
    flags = []
    if name in ("bert_base", "gpt2"):
        model = text.build(name, "eager")
        inputs = text.feeds(name, batch, 128, model.config.vocab_size)
        with torch.no_grad():
            text.export(text.Hidden(model, name == "bert_base").eval(), tuple(inputs.values()),
                        path, list(inputs))
        feeds = {k: v.numpy() for k, v in inputs.items()}
    else:
        x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            nets.export(nets.build(name), x, path)
        feeds = {"x": x.numpy()}
    for key, value in feeds.items():
        npy = os.path.join(work, f"{name}_b{batch}_{key}.npy")
        np.save(npy, value)
        flags += ["--input", f"{key}={npy}"]
    return path, flags


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the torchtrtc to compare against")
    ap.add_argument("--new", required=True, help="the torchtrtc under test")
    ap.add_argument("--models", nargs="+", default=["convnext_tiny", "bert_base"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--work", default="/tmp/torchtrt_ab")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    bins = {"base": args.base, "new": args.new}
    for name in args.models:
        t = time.time()
        path, flags = export(name, args.batch, args.work)
        print(f"{name}: exported in {time.time() - t:.0f} s", flush=True)
        engine = {tag: os.path.join(args.work, f"{name}.{tag}.engine") for tag in bins}
        for tag, exe in bins.items():
            sh([exe, "compile", path, "-o", engine[tag], "--device", "cuda", "--precision", "f16",
                "-q"])
        times = {tag: [] for tag in bins}
        for _ in range(args.rounds):
            for tag, exe in bins.items():
                out = sh([exe, "bench", engine[tag], "--device", "cuda", "--iterations",
                          str(args.iters), "--warmup", str(args.warmup), "--json", "-q", *flags])
                if out:
                    times[tag].append(json.loads(out.strip().splitlines()[-1])["median_ms"])
        print(name, {tag: [round(v, 3) for v in vs] for tag, vs in times.items()}, flush=True)
        outputs = {}
        for tag, exe in bins.items():
            profile = os.path.join(args.out, f"{name}.{tag}.profile.json")
            sh([exe, "bench", engine[tag], "--device", "cuda", "--iterations", "20", "--warmup",
                "5", "-q", "--export-profile", profile, *flags])
            out_dir = os.path.join(args.work, f"out_{name}_{tag}")
            sh([exe, "run", engine[tag], "--device", "cuda", "--output-dir", out_dir, "-q", *flags])
            files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
            if files:
                outputs[tag] = np.load(os.path.join(out_dir, files[0])).astype(np.float64)
        if len(outputs) == 2:
            a, b = outputs["base"], outputs["new"]
            rel = float(np.abs(a - b).max() / (np.abs(a).max() + 1e-12))
            print(f"{name}: largest output difference {rel:.2e} of the largest output", flush=True)


if __name__ == "__main__":
    main()
