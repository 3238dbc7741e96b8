"""Checks what examples/runtime_app_c printed (stdin) against OUT_DIR/app_ref.npy."""

import sys
from pathlib import Path

import numpy as np


def main(out: Path, atol: float, rtol: float) -> None:
    lines = sys.stdin.read().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("output y ["))
    shape = [int(d) for d in lines[at][len("output y [") : -1].split(",")]
    values = np.array([float(v) for line in lines[at + 1 :] for v in line.split()], np.float32)
    want = np.load(out / "app_ref.npy")
    if list(want.shape) != shape or values.size != want.size:
        sys.exit(f"runtime_app printed y of shape {shape} ({values.size} values), want {list(want.shape)}")
    got = values.reshape(want.shape)
    if not np.allclose(got, want, atol=atol, rtol=rtol):
        worst = np.max(np.abs(got - want))
        sys.exit(f"runtime_app's y differs from numpy by up to {worst}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))
