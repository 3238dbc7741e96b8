"""TORCHTRT_LOG sets the log level of a process."""

import os
import subprocess
import sys
import textwrap


def run_with(level, onnx_path):
    script = textwrap.dedent(f"""
        import torchtrt
        torchtrt.compile({str(onnx_path)!r}, [torchtrt.Input(shape=(2, 16))])
    """)
    env = dict(os.environ, TORCHTRT_LOG=level)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, check=True).stderr


def test_info_logs_compile_stages_and_error_is_quiet(onnx_path):
    info = run_with("info", onnx_path)
    assert "compile stage done" in info and "building" in info, info
    assert "compile stage done" not in run_with("error", onnx_path)
