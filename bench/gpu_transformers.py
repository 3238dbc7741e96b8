"""Transformers on the GPU (issue 24): torchtrt engines against PyTorch eager and torch.compile.

HF `transformers` BERT-base (with a padding mask) and GPT-2 (causal), seeded random weights,
at one sequence length and each batch size: exported to ONNX (TorchScript exporter, eager
attention, static shapes), compiled with `torchtrtc compile --device cuda --precision f16`,
timed with `torchtrtc bench --device cuda` on the same token ids (median); PyTorch runs the
same weights in f16 with its default attention (SDPA), eager and `torch.compile` (default
mode, compiled afresh for each batch: without `torch._dynamo.reset()` the second batch size
recompiles with a dynamic batch dimension), timed with CUDA events (median). Errors are relative L2 of the last hidden state
against the f32 PyTorch model in eval mode, ours and eager f16's. `--attention` adds the attention kernel
alone: a one-node ONNX `Attention` (opset 23) at [B, H, S, D] f16 against
`F.scaled_dot_product_attention` with the flash backend; where the `torchtrt` Python package
is installed, the engine is also timed through it as SDPA is (CUDA events around back-to-back
calls on CUDA tensors), with and without CUDA graphs.

    python3 bench/gpu_transformers.py --torchtrtc torchtrtc [--batches 1 32] [--seq 128]
        [--iters 100] [--warmup 20] [--attention 32 12 512 64] [--profile]
"""

import argparse
import json
import os
import time

import numpy as np
import torch

from gpu_networks import cuda_median_ms, relative_error, run_tool


def build(name, attention):
    import transformers

    torch.manual_seed(0)
    if name == "bert_base":
        config = transformers.BertConfig(attn_implementation=attention)
        return transformers.BertModel(config).eval()
    if name == "gpt2":
        config = transformers.GPT2Config(attn_implementation=attention)
        return transformers.GPT2Model(config).eval()
    raise ValueError(name)


class Hidden(torch.nn.Module):
    """The model's last hidden state from positional tensors (ids, and the mask for BERT)."""

    def __init__(self, model, masked):
        super().__init__()
        self.model, self.masked = model, masked

    def forward(self, input_ids, attention_mask=None):
        if self.masked:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        else:
            out = self.model(input_ids=input_ids, use_cache=False)
        return out.last_hidden_state


def feeds(name, batch, seq, vocab):
    """Token ids, and for BERT a mask whose rows pad their last 0 to seq/4 tokens."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    if name != "bert_base":
        return {"input_ids": ids}
    mask = torch.ones(batch, seq, dtype=torch.int64)
    for b in range(batch):
        mask[b, seq - (b * 7) % (seq // 4 + 1):] = 0
    return {"input_ids": ids, "attention_mask": mask}


def export(model, args, path, names):
    """ONNX export: the TorchScript exporter, the dynamo one where it refuses an op (GPT-2's
    mask in transformers 5 uses `aten::diff`)."""
    try:
        torch.onnx.export(model, args, path, input_names=names, output_names=["hidden"],
                          opset_version=17, dynamo=False)
    except Exception:  # noqa: BLE001 - fall back to the other exporter
        torch.onnx.export(model, args, path, input_names=names, output_names=["hidden"],
                          opset_version=18, dynamo=True)


def one(exe, name, batch, seq, iters, warmup, work, profile=False):
    eager_attn = build(name, "eager")
    masked = name == "bert_base"
    inputs = feeds(name, batch, seq, eager_attn.config.vocab_size)
    args = tuple(inputs.values())
    path = os.path.join(work, f"{name}_b{batch}_s{seq}.onnx")
    engine = os.path.join(work, f"{name}_b{batch}_s{seq}.engine")
    with torch.no_grad():
        wrapped = Hidden(eager_attn, masked).eval()
        export(wrapped, args, path, list(inputs))
        wrapped.eval()
        ref32 = wrapped.cuda()(*[a.cuda() for a in args]).float().cpu().numpy()
        sdpa = build(name, "sdpa")
        sdpa.load_state_dict(eager_attn.state_dict())
        half = Hidden(sdpa, masked).eval().cuda().half()
        cuda_args = [a.cuda() for a in args]
        ref16 = half(*cuda_args).float().cpu().numpy()
        eager = cuda_median_ms(lambda: half(*cuda_args), iters, warmup)
        torch._dynamo.reset()
        t = time.time()
        compiled = torch.compile(half)
        compiled(*cuda_args)
        compile_s = time.time() - t
        comp = cuda_median_ms(lambda: compiled(*cuda_args), iters, warmup)
    t = time.time()
    run_tool([exe, "compile", path, "-o", engine, "--device", "cuda", "--precision", "f16", "-q"])
    build_s = time.time() - t
    flags = []
    for key, value in inputs.items():
        npy = os.path.join(work, f"{name}_b{batch}_{key}.npy")
        np.save(npy, value.numpy())
        flags += ["--input", f"{key}={npy}"]
    stats = json.loads(run_tool([exe, "bench", engine, "--device", "cuda", "--iterations", str(iters),
                                 "--warmup", str(warmup), "--json", "-q", *flags]).strip().splitlines()[-1])
    if profile:
        print(run_tool([exe, "bench", engine, "--device", "cuda", "--iterations", "20", "--profile",
                        *flags]), flush=True)
    out_dir = os.path.join(work, f"out_{name}_b{batch}")
    run_tool([exe, "run", engine, "--device", "cuda", "--output-dir", out_dir, "-q", *flags])
    ours = np.load(os.path.join(out_dir, "hidden.npy")).astype(np.float32)
    return {
        "model": name, "batch": batch, "seq": seq, "ours_ms": stats["median_ms"],
        "eager_ms": eager, "compile_ms": comp, "rel_err": relative_error(ours, ref32),
        "eager_rel_err": relative_error(ref16, ref32), "our_build_s": build_s,
        "torch_compile_s": compile_s,
    }


def attention(exe, shape, iters, warmup, work):
    """One `Attention` node at `shape` [B, H, S, D] f16 against SDPA's flash backend."""
    import onnx
    from onnx import TensorProto, helper

    b, h, s, d = shape
    dims = [b, h, s, d]
    graph = helper.make_graph(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"])], "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT16, dims) for n in "qkv"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    path = os.path.join(work, "attention.onnx")
    engine = os.path.join(work, "attention.engine")
    onnx.save(model, path)
    gen = torch.Generator().manual_seed(3)
    qkv = [torch.randn(*dims, generator=gen).half() for _ in range(3)]
    flags = []
    for n, t in zip("qkv", qkv):
        npy = os.path.join(work, f"attention_{n}.npy")
        np.save(npy, t.numpy())
        flags += ["--input", f"{n}={npy}"]
    run_tool([exe, "compile", path, "-o", engine, "--device", "cuda", "--precision", "f16", "-q"])
    stats = json.loads(run_tool([exe, "bench", engine, "--device", "cuda", "--iterations", str(iters),
                                 "--warmup", str(warmup), "--json", "-q", *flags]).strip().splitlines()[-1])
    out_dir = os.path.join(work, "out_attention")
    run_tool([exe, "run", engine, "--device", "cuda", "--output-dir", out_dir, "-q", *flags])
    ours = np.load(os.path.join(out_dir, "y.npy")).astype(np.float32)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    q, k, v = (t.cuda() for t in qkv)
    with torch.no_grad():
        ref32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).cpu().numpy()
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            flash = F.scaled_dot_product_attention(q, k, v).float().cpu().numpy()
            flash_ms = cuda_median_ms(lambda: F.scaled_dot_product_attention(q, k, v), iters, warmup)
    row = {"attention": dims, "ours_ms": stats["median_ms"], "flash_ms": flash_ms,
           "rel_err": relative_error(ours, ref32), "flash_rel_err": relative_error(flash, ref32)}
    row.update(python_timings(engine, [q, k, v], iters, warmup))
    return row


def python_timings(engine, args, iters, warmup):
    """The engine through the Python package on CUDA tensors, timed as SDPA is (CUDA events
    around each call, calls back to back): with CUDA graphs (each replay copies its inputs
    and outputs) and without (the kernels alone on the caller's buffers). Empty when the
    package is not installed."""
    try:
        import torchtrt
    except ImportError:
        return {}
    out = {}
    for key, graphs in (("python_graphs_ms", "1"), ("python_no_graphs_ms", "0")):
        os.environ["TORCHTRT_CUDA_GRAPHS"] = graphs
        try:
            native = torchtrt.load(engine)._native
        finally:
            del os.environ["TORCHTRT_CUDA_GRAPHS"]
        outs = native.run_list(args)
        with torch.no_grad():
            out[key] = cuda_median_ms(lambda: native.run_list(args, outs), iters, warmup)
    return out


def markdown(rows):
    lines = ["| model | batch | seq | ours f16 ms | eager f16 ms | torch.compile f16 ms | "
             "compile/ours | ours rel. error | eager f16 rel. error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "attention" in r:
            continue
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | | error: {r['error']} |")
            continue
        lines.append(f"| {r['model']} | {r['batch']} | {r['seq']} | {r['ours_ms']:.3f} | "
                     f"{r['eager_ms']:.3f} | {r['compile_ms']:.3f} | "
                     f"{r['compile_ms'] / r['ours_ms']:.2f} | {r['rel_err']:.1e} | "
                     f"{r['eager_rel_err']:.1e} |")
    for r in rows:
        if "attention" in r and "ours_ms" in r:
            lines.append(f"\nAttention {r['attention']} f16: ours {r['ours_ms']:.4f} ms, SDPA flash "
                         f"{r['flash_ms']:.4f} ms, ours/flash {r['ours_ms'] / r['flash_ms']:.2f}; "
                         f"rel. error {r['rel_err']:.1e} (flash {r['flash_rel_err']:.1e})")
            for key in ("python_graphs_ms", "python_no_graphs_ms"):
                if key in r:
                    lines.append(f"{key}: {r[key]:.4f} ms, /flash {r[key] / r['flash_ms']:.2f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torchtrtc", required=True)
    ap.add_argument("--models", nargs="*", default=["bert_base", "gpt2"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 32])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--attention", nargs=4, type=int, metavar=("B", "H", "S", "D"))
    ap.add_argument("--profile", action="store_true", help="print `torchtrtc bench --profile` too")
    ap.add_argument("--work", default="/tmp/torchtrt_transformers")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    if args.attention:
        try:
            rows.append(attention(args.torchtrtc, args.attention, args.iters, args.warmup, args.work))
        except Exception as e:  # noqa: BLE001 - report and go on
            rows.append({"attention": args.attention, "error": str(e)[-300:]})
        print(json.dumps(rows[-1]), flush=True)
    for name in args.models:
        for batch in args.batches:
            try:
                rows.append(one(args.torchtrtc, name, batch, args.seq, args.iters, args.warmup,
                                args.work, args.profile))
            except Exception as e:  # noqa: BLE001 - report and go on with the next row
                rows.append({"model": name, "batch": batch, "error": str(e)[-300:]})
            print(json.dumps(rows[-1]), flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
