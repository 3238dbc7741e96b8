"""Interleaved rounds of `torchtrtc bench` contenders and onnxruntime on one model: every
round runs each contender and then onnxruntime, so a machine whose speed drifts from minute
to minute slows every contender alike. Shared by the scripts that compare in rounds."""

import statistics

from models_vs_onnxruntime import time_ort_feeds, time_ours


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
