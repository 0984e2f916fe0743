"""Host-side cost of the row kernels' kernel_fn: launches of tens of microseconds on the H200
spent 35-75 us per call on the host, and triton.cdiv / triton.next_power_of_2 (constexpr
functions, microseconds per call from Python) were part of it. The starters use plain-Python
equivalents, which must give the launch exactly the same numbers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import triton

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
ROW_KERNELS = ["softmax", "rmsnorm", "layernorm", "reduce", "cross_entropy", "rotary_embedding"]
VALUES = [*range(0, 4200), 8191, 8192, 8193, 32000, 50257, 128256, 2**20 + 1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"host_{name}", KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", ROW_KERNELS)
def test_host_helpers_give_the_launch_what_triton_would(name):
    module = _load(name)
    for n in VALUES:
        assert module._pow2(n) == triton.next_power_of_2(n), n
        for d in (1, 3, 16, 128, 1000, 4096):
            assert module._cdiv(n, d) == triton.cdiv(n, d), (n, d)


@pytest.mark.parametrize("name", ROW_KERNELS)
def test_kernel_fn_calls_no_constexpr_function_on_the_host(name):
    source = (KERNELS / f"{name}.py").read_text()
    assert "triton.cdiv(" not in source and "triton.next_power_of_2(" not in source


@pytest.mark.slow
def test_host_overhead_script_reports_three_variants_labelled_cpu(tmp_path):
    """benchmarks/host_overhead.py on the CPU (interpreter), as the GPU run uses it."""
    import json
    import os
    import subprocess
    import sys

    root = KERNELS.parent
    rows, table = tmp_path / "rows.json", tmp_path / "table.md"
    cmd = [sys.executable, "-m", "benchmarks.host_overhead", "--types", "softmax"]
    cmd += ["--calls", "2", "--rounds", "1", "--json", str(rows), "--out", str(table)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(rows.read_text())
    assert data["gpu"] == "CPU" and {"torch", "triton", "commit", "date"} <= set(data)
    got = {(r["type"], r["size"], r["variant"]) for r in data["rows"]}
    assert got == {
        ("softmax", "64x1024", v) for v in ("autokernel host", "autokernel op host", "torch host")
    }
    assert all(r["host_us"] > 0 for r in data["rows"])
    text = table.read_text()
    assert "CPU, Triton interpreter" in text and "| softmax | 64x1024 |" in text


@pytest.mark.slow
def test_a_stubbed_run_does_not_replace_the_real_figure(tmp_path):
    """A --stub-launches run (our Python only) is its own question in the history: latest.md
    keeps showing the newest real per-call figure beside it."""
    import json
    import os
    import subprocess
    import sys

    root = KERNELS.parent
    hist = tmp_path / "hist"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for extra in ([], ["--stub-launches"]):
        cmd = [sys.executable, "-m", "benchmarks.host_overhead", "--types", "softmax", "--calls",
               "2", "--rounds", "1", "--results", str(hist), *extra]  # fmt: skip
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [json.loads(line) for line in (hist / "cpu.jsonl").read_text().splitlines()]
    assert [r["question"] for r in runs] == ["host_overhead", "host_overhead (launches stubbed)"]
    latest = (hist / "latest.md").read_text()
    assert latest.count("# Host time per call") == 2
