#!/usr/bin/env python3
"""Seed plugins on the GPU: torchtrt's CUDA kernels against PyTorch eager, same shapes.

Runs on the GPU machine. Our side is the carried Rust binary `plugin_bench` (built from
crates/torchtrt-cuda/examples/plugin_bench.rs), which times each plugin through
`Plugin::enqueue` on a CUDA stream with CUDA events and dumps small-shape inputs/outputs;
this script times the PyTorch eager equivalent with CUDA events (median of many launches
after warm-up), measures the device-to-device copy bandwidth as the ceiling, checks our
outputs against PyTorch on the dumped inputs, and prints a markdown table.

    python3 bench/gpu_plugins_vs_pytorch.py --bin gpu-bin/plugin_bench [--iters 50] [--json OUT]

`--part networks` (or `all`) runs the end-to-end table instead (or too): torchvision
resnet50, mobilenet_v3_large and a small ViT in f16 at batch 1 and 32 through
`--torchtrtc gpu-bin/torchtrtc` against PyTorch eager and torch.compile (gpu_networks.py).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
TOL = {"f32": 1e-4, "f16": 2e-2, "bf16": 8e-2}


def xorshift_values(n, seed, lo, hi):
    """The bench binary's `values`: xorshift64, top 24 bits, mapped to [lo, hi)."""
    m = (1 << 64) - 1
    s = ((seed * 0x9E3779B97F4A7C15) & m) | 1
    out = []
    for _ in range(n):
        s ^= (s << 13) & m
        s ^= s >> 7
        s ^= (s << 17) & m
        out.append(lo + (hi - lo) * ((s >> 40) / float(1 << 24)))
    return np.array(out, dtype=np.float32)


SCALES = torch.from_numpy(xorshift_values(64, 7, 0.5, 1.5))
BIAS = torch.from_numpy(xorshift_values(64, 8, -0.5, 0.5))


def torch_op(case):
    """The PyTorch eager equivalent of each benchmark case."""
    if case == "bilinear_x2":
        return lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    if case == "nearest_x2":
        return lambda x: F.interpolate(x, scale_factor=2, mode="nearest")
    if case == "trilinear_x2_align":
        return lambda x: F.interpolate(x, scale_factor=2, mode="trilinear", align_corners=True)
    if case == "normalize_p2_dim1":
        return lambda x: F.normalize(x, p=2.0, dim=1, eps=1e-12)
    if case == "adaptive_max_pool_7x7":
        return lambda x: F.adaptive_max_pool2d(x, 7)
    if case == "gelu":
        return lambda x: F.gelu(x)
    if case == "instance_norm":
        def f(x):
            w = SCALES.to(x.device, x.dtype)
            b = BIAS.to(x.device, x.dtype)
            return F.instance_norm(x, weight=w, bias=b, eps=1e-5)
        return f
    raise ValueError(case)


def median_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def copy_bandwidth(iters, warmup):
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iters, warmup)
    return 2 * src.numel() / ms / 1e6  # GB/s (read + write)


def same_bytes_copy_ms(nbytes, iters, warmup):
    """A device-to-device copy moving the row's bytes (half read, half written): the
    ceiling at that size, where ramp-up and tail weigh more than in the 1 GiB copy."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return median_ms(lambda: dst.copy_(src), iters, warmup)


def check(dump, case, dt):
    stem = os.path.join(dump, f"{case}_{dt}")
    meta = json.load(open(stem + ".json"))
    np_dt = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dt]
    raw_in = np.fromfile(stem + ".in", dtype=np_dt)
    raw_out = np.fromfile(stem + ".out", dtype=np_dt)
    if dt == "bf16":
        x = torch.from_numpy(raw_in.astype(np.int16)).view(torch.bfloat16)
        ours = torch.from_numpy(raw_out.astype(np.int16)).view(torch.bfloat16)
    else:
        x, ours = torch.from_numpy(raw_in), torch.from_numpy(raw_out)
    x = x.reshape(meta["in"]).cuda()
    ours = ours.reshape(meta["out"]).float()
    ref = torch_op(case)(x).float().cpu()
    err = (ours - ref).abs().max().item()
    scale = max(ref.abs().max().item(), 1e-3)
    return err, err <= TOL[dt] * scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="gpu-bin/plugin_bench")
    ap.add_argument("--torchtrtc", default="gpu-bin/torchtrtc")
    ap.add_argument("--part", choices=["plugins", "networks", "all"], default="plugins")
    ap.add_argument("--networks", nargs="*", help="subset of gpu_networks.NETWORKS")
    ap.add_argument("--autotune", action="store_true",
                    help="also time torch.compile(mode='max-autotune') (minutes per network)")
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 32])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    ok = True
    if a.part in ("plugins", "all"):
        ok = plugins(a)
    if a.part in ("networks", "all"):
        import gpu_networks

        print(f"\nGPU: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
        rows = gpu_networks.run(a.torchtrtc, a.iters, a.warmup, a.networks, a.batches,
                                autotune=a.autotune)
        print(gpu_networks.markdown(rows))
        if a.json:
            json.dump(rows, open(a.json + ".networks.json", "w"), indent=1)
        ok = ok and all("error" not in r for r in rows)
    if not ok:
        sys.exit(1)


def plugins(a):
    dump = tempfile.mkdtemp()
    env = dict(os.environ)
    proc = subprocess.run(
        [a.bin, "--iters", str(a.iters), "--warmup", str(a.warmup), "--dump", dump],
        capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        sys.exit(1)
    ours = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")]
    torch.backends.cudnn.benchmark = True
    bw = copy_bandwidth(a.iters, a.warmup)
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"copy bandwidth {bw:.0f} GB/s (1 GiB device-to-device, read + write)\n")
    print("| case | dtype | shape | ours ms | ours of copy | torch ms | torch of copy | speed-up | "
          "same-bytes copy ms | max abs err vs torch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for r in ours:
        case, dt, shape = r["case"], r["dtype"], r["shape"]
        x = (torch.rand(shape, device="cuda", dtype=torch.float32) * 6 - 3).to(DTYPES[dt])
        op = torch_op(case)
        y = op(x)
        torch_ms = median_ms(lambda: op(x), a.iters, a.warmup)
        nbytes = x.numel() * x.element_size() + y.numel() * y.element_size()
        assert nbytes == r["bytes"], (case, nbytes, r["bytes"])
        err, ok = check(dump, case, dt)
        copy_ms = same_bytes_copy_ms(nbytes, a.iters, a.warmup)
        row = dict(case=case, dtype=dt, shape=shape, ours_ms=r["median_ms"],
                   ours_frac=nbytes / r["median_ms"] / 1e6 / bw, torch_ms=torch_ms,
                   torch_frac=nbytes / torch_ms / 1e6 / bw, copy_ms=copy_ms, err=err, ok=ok)
        rows.append(row)
        print(f"| {case} | {dt} | {shape} | {row['ours_ms']:.4f} | {row['ours_frac']:.2f} | "
              f"{torch_ms:.4f} | {row['torch_frac']:.2f} | {torch_ms / row['ours_ms']:.2f}x | "
              f"{copy_ms:.4f} | {err:.2e} {'ok' if ok else 'MISMATCH'} |")
        del x, y
    if a.json:
        json.dump(dict(copy_gbps=bw, rows=rows), open(a.json, "w"), indent=1)
    return all(r["ok"] for r in rows)


if __name__ == "__main__":
    main()
