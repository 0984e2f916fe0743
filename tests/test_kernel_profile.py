"""benchmarks/kernel_profile.py and its ncu parser: what a missed goal's limit is read from.

The parser is checked on ncu's raw CSV page as ncu prints it (header row, units row, one row
per kernel, mixed with the profiled program's own lines); the script end to end runs in its CPU
mode, where the targets run bare on the interpreter and carry no counters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks.ncu_counters as ncu

ROOT = Path(__file__).resolve().parents[1]


HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC",'
)
METRIC_COLS = [
    ncu.DURATION,
    ncu.DRAM_READ,
    ncu.DRAM_WRITE,
    ncu.DRAM_PCT,
    ncu.OCC_ACHIEVED,
    ncu.REGISTERS,
    ncu.GRID,
    ncu.LOCAL_LD,
    ncu.LOCAL_ST,
]


def raw_page(*kernels: tuple[str, list[str]]) -> str:
    header = HEAD + ",".join(f'"{m}"' for m in METRIC_COLS)
    units = '"","","","","","","","","","","",' + ",".join(
        f'"{u}"' for u in ("ns", "byte", "byte", "%", "%", "register/thread", "", "byte", "byte")
    )
    rows = [
        f'"{i}","4242","python3","127.0.0.1","{name}","1","7","(256, 1, 1)","(4096, 1, 1)",'
        f'"0","9.0",' + ",".join(f'"{v}"' for v in values)
        for i, (name, values) in enumerate(kernels)
    ]
    return "\n".join(
        [
            "==PROF== Connected to process 4242 (/usr/bin/python3)",
            "some line the program printed",
            header,
            units,
            *rows,
            "==PROF== Disconnected from process 4242",
        ]
    )


def test_raw_page_parses_into_one_call_with_sums_and_weighted_shares():
    text = raw_page(
        ("kernel_a", ["30,000", "100000000", "50000000", "90.5", "80", "40", "4096", "0", "0"]),
        ("kernel_b", ["10000", "20000000", "10000000", "50.5", "40", "96", "132", "128", "64"]),
    )
    kernels = ncu.parse_raw_csv(text)
    assert [k["Kernel Name"] for k in kernels] == ["kernel_a", "kernel_b"]
    call = ncu.summarize(kernels)
    assert call is not None
    assert call.us == pytest.approx(40.0)  # ns summed, thousands separator read
    assert call.moved() == pytest.approx(180e6)
    assert call.dram_pct == pytest.approx((90.5 * 3 + 50.5) / 4)  # weighted by duration
    assert call.occ_achieved == pytest.approx((80 * 3 + 40) / 4)
    assert call.registers == 40 and call.grid == 4096  # the longest kernel's launch
    assert call.local_bytes == pytest.approx(192)
    assert call.sm_pct is None  # a metric ncu did not report is unknown, never zero


def test_a_real_h200_page_parses():
    """ncu 2025.3 on the lent H200, the probe run of 2026-12-03: eager softmax then torch.sum
    on a 4096x8192 bf16 tensor (67.1 MB)."""
    kernels = ncu.parse_raw_csv((ROOT / "tests" / "data" / "ncu_raw_h200.txt").read_text())
    assert len(kernels) == 2
    assert "SoftMax" in kernels[0]["Kernel Name"] and "reduce_kernel" in kernels[1]["Kernel Name"]
    reduce = ncu.summarize(kernels[1:])
    assert reduce is not None
    assert reduce.dram_read == pytest.approx(4096 * 8192 * 2, rel=0.01)  # read once, no more
    assert reduce.registers == 32 and reduce.grid == 4096 and reduce.block == 512
    assert reduce.local_bytes == 0


def test_output_without_a_table_has_no_kernels():
    assert ncu.parse_raw_csv("==PROF== No kernels were profiled.\n") == []
    assert ncu.summarize([]) is None


def test_unknown_metrics_named_by_ncu_are_dropped_and_core_is_the_fallback():
    out = f"==ERROR== Failed to find metric {ncu.LOCAL_LD}\n"
    kept = ncu.drop_unknown(ncu.METRICS, out)
    assert ncu.LOCAL_LD not in kept and ncu.LOCAL_ST in kept and ncu.DURATION in kept
    assert ncu.drop_unknown(ncu.METRICS, "==ERROR== something else broke\n") == ncu.CORE


def test_command_profiles_only_the_marked_range_at_native_clocks():
    cmd = ncu.command("/x/ncu", (ncu.DURATION, ncu.DRAM_READ), ["python", "t.py"])
    joined = " ".join(cmd)
    assert "--profile-from-start off" in joined and "--clock-control none" in joined
    assert f"--metrics {ncu.DURATION},{ncu.DRAM_READ}" in joined
    assert cmd[-2:] == ["python", "t.py"]


@pytest.mark.slow
def test_cpu_mode_runs_every_target_bare_and_writes_both_files(tmp_path):
    out, js = tmp_path / "p.md", tmp_path / "p.json"
    cmd = [sys.executable, "-m", "benchmarks.kernel_profile", "--smoke"]
    cmd += ["--out", str(out), "--json", str(js), "--commit", "abc1234"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = json.loads(js.read_text())["records"]
    assert {(r["op"], r["variant"]) for r in records} == {
        ("softmax", "autokernel"),
        ("softmax", "eager"),
        ("reduce", "autokernel"),
        ("reduce", "eager"),
    }
    for r in records:
        assert "error" not in r, r
        assert r["us"] > 0 and r["profile"] is None and r["counted_bytes"] > r["out_bytes"] > 0
    text = out.read_text()
    assert "abc1234" in text and "no counters" in text
    assert text.count("| softmax |") == 2


def test_narrow_plan_sets_ours_beside_eager_at_both_narrow_sizes():
    from benchmarks import kernel_profile

    plan = kernel_profile._plan(smoke=False, only=set(), narrow=True)
    assert len(plan) == 16
    assert {(op, s["rows"], v) for op, s, _, v in plan} == {
        (op, rows, v)
        for op in ("softmax", "rmsnorm", "layernorm", "reduce")
        for rows in (32768, 262144)
        for v in ("autokernel", "eager")
    }
    assert all(s["cols"] == 128 for _, s, _, _ in plan)
    assert kernel_profile._plan(smoke=False, only={"reduce"}, narrow=True) == [
        t for t in plan if t[0] == "reduce"
    ]


@pytest.mark.slow
def test_unknown_type_is_refused():
    cmd = [sys.executable, "-m", "benchmarks.kernel_profile", "--types", "nope"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown type" in proc.stderr
