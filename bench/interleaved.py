"""Interleaved rounds of `torchtrtc bench` contenders and onnxruntime on one model: every
round runs each contender and then onnxruntime, so a machine whose speed drifts from minute
to minute slows every contender alike. Shared by the scripts that compare in rounds."""

import argparse
import statistics

import onnxruntime as ort

from models_vs_onnxruntime import time_ort_feeds, time_ours


def parser(doc, rounds, runs):
    """A command line with `--torchtrtc` (repeatable), `--rounds`, `--runs` and `--threads`."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torchtrtc", action="append", default=[], metavar="LABEL=PATH[,VAR=VALUE...]")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--runs", type=int, default=runs)
    p.add_argument("--threads", type=int, default=2)
    return p


def start(args, what, setting=""):
    """The contenders of `args`, after printing the table's preamble and header (rows of
    `what`; `setting` adds to the preamble)."""
    contenders = [contender(c) for c in args.torchtrtc or ["torchtrt=target/release/torchtrtc"]]
    print(f"onnxruntime {ort.__version__}{setting}, {args.threads} threads, {args.rounds} rounds of "
          f"{args.runs} runs: min / p25 / median of the rounds' medians, ms\n")
    print(f"| {what} | " + " | ".join(label for label, _, _ in contenders) + " | onnxruntime |")
    print("|---|" + "---:|" * (len(contenders) + 1))
    return contenders


def row(name, medians):
    """Prints one table row of `rounds`' result."""
    print(f"| {name} | " + " | ".join(cell(v) for v in medians.values()) + " |", flush=True)


def contender(spec):
    """`LABEL=PATH[,VAR=VALUE...]`: a label, a `torchtrtc` and the environment it runs with."""
    label, rest = spec.split("=", 1)
    path, *pairs = rest.split(",")
    return label, path, dict(p.split("=", 1) for p in pairs)


def rounds(model, flags, feeds, contenders, rounds, runs, threads, warmup=2):
    """Each contender's (and onnxruntime's) medians of `runs`, one per round."""
    medians = {label: [] for label, _, _ in contenders}
    medians["onnxruntime"] = []
    for _ in range(rounds):
        for label, binary, env in contenders:
            ms, err = time_ours(binary, model, runs, warmup, threads, flags, env)
            if ms is None:
                raise SystemExit(f"{label} on {model}: {err}")
            medians[label].append(ms)
        medians["onnxruntime"].append(time_ort_feeds(model, feeds, runs, warmup, threads)[0])
    return medians


def cell(values):
    """`min / p25 / median` of a contender's round medians."""
    values = sorted(values)
    return f"{values[0]:.2f} / {values[len(values) // 4]:.2f} / {statistics.median(values):.2f}"
