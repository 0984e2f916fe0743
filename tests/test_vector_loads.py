"""Wide rows of odd width (a 50257 vocabulary) must still move 16-byte vectors.

Why: with an odd row stride no row but the first starts 16-byte aligned, and Triton then
compiles every masked load to 2-byte ld.global.b16. On the H200 that held softmax, cross-entropy,
rmsnorm, layernorm and reduce at 4096x50257 to 22-60 % of copy bandwidth (benchmarks/results/
h200-2026-12-03-starters.md). The starters walk such rows from aligned addresses; this compiles
them for sm_90 here, without a GPU, and checks the instructions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Compiling eleven kernels for sm_90 takes half a minute on two cores: not the fast subset.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
K = ROOT / "kernels"


def _case(
    file: str, kernel: str, signature: dict, constexprs: dict, aligned: list, num_warps: int = 8
) -> dict:
    return {
        "path": str(K / file),
        "kernel": kernel,
        "signature": signature,
        "constexprs": constexprs,
        "aligned": aligned,
        "num_warps": num_warps,  # reduce: 2, as its starter picks for a 1024-column step
    }


def _cases(vec: int) -> dict[str, dict]:
    i32, bf16 = "i32", "*bf16"
    norm = {
        "X_ptr": bf16,
        "W_ptr": bf16,
        "Y_ptr": bf16,
        "X_row_stride": i32,
        "Y_row_stride": i32,
        "n_rows": i32,
        "n_cols": i32,
        "eps": "fp32",
    }
    norm_c = {"BLOCK_N": 4096, "ROWS": 1, "SINGLE": False, "VEC": vec}
    layer = {
        "X_ptr": bf16,
        "W_ptr": bf16,
        "B_ptr": bf16,
        "Y_ptr": bf16,
        **{k: v for k, v in norm.items() if k not in ("X_ptr", "W_ptr", "Y_ptr")},
    }
    reduce_sig = {
        "X_ptr": bf16,
        "Y_ptr": bf16,
        **{k: i32 for k in ("X_row_stride", "Y_row_stride", "n_rows", "n_cols", "cols_per_split")},
        **{k: "constexpr" for k in ("BLOCK_COLS", "ROWS", "VEC", "SPLIT")},
    }
    return {
        "softmax": _case(
            "softmax.py",
            "_softmax_kernel",
            {
                "X_ptr": "*fp16",
                "Y_ptr": "*fp16",
                "X_row_stride": i32,
                "Y_row_stride": i32,
                "n_rows": i32,
                "n_cols": i32,
                **{k: "constexpr" for k in ("BLOCK_COLS", "ROWS", "SINGLE", "VEC")},
            },
            {"BLOCK_COLS": 4096, "ROWS": 1, "SINGLE": False, "VEC": vec},
            ["X_ptr", "Y_ptr"],
        ),
        "cross_entropy": _case(
            "cross_entropy.py",
            "_cross_entropy_kernel",
            {
                "X_ptr": bf16,
                "T_ptr": "*i64",
                "P_ptr": "*fp32",
                "C_ptr": "*i32",
                "Ticket_ptr": "*i32",
                "Out_ptr": "*fp32",
                "X_row_stride": i32,
                "n_rows": i32,
                "n_cols": i32,
                **{
                    k: "constexpr"
                    for k in ("IGNORE", "BLOCK_COLS", "ROWS", "SINGLE", "VEC", "MEAN_BLOCK")
                },
            },
            {
                "IGNORE": -100,
                "BLOCK_COLS": 4096,
                "ROWS": 1,
                "SINGLE": False,
                "VEC": vec,
                "MEAN_BLOCK": 1024,
            },
            ["X_ptr", "T_ptr", "P_ptr", "C_ptr", "Ticket_ptr", "Out_ptr"],
        ),
        "rmsnorm": _case(
            "rmsnorm.py",
            "_rmsnorm_kernel",
            {**norm, **{k: "constexpr" for k in norm_c}},
            norm_c,
            ["X_ptr", "W_ptr", "Y_ptr"],
        ),
        "layernorm": _case(
            "layernorm.py",
            "_layernorm_kernel",
            {**layer, **{k: "constexpr" for k in norm_c}},
            norm_c,
            ["X_ptr", "W_ptr", "B_ptr", "Y_ptr"],
        ),
        "reduce": _case(
            "reduce.py",
            "_reduce_kernel",
            reduce_sig,
            {"BLOCK_COLS": 1024, "ROWS": 1, "VEC": vec, "SPLIT": False},
            ["X_ptr", "Y_ptr"],
            num_warps=2,
        ),
        # 16 rows of 128 columns per program: the row-group path (no aligned walk, VEC 1);
        # Triton specializes a 128-wide row's integers as divisible by 16.
        "reduce_rows": _case(
            "reduce.py",
            "_reduce_kernel",
            reduce_sig,
            {"BLOCK_COLS": 128, "ROWS": 16, "VEC": 1, "SPLIT": False},
            ["X_ptr", "Y_ptr", "X_row_stride", "n_rows", "n_cols", "cols_per_split"],
        ),
    }


def _compile(vec: int, tmp_path: Path) -> dict:
    cases = tmp_path / f"cases-{vec}.json"
    cases.write_text(json.dumps(_cases(vec)))
    # compiled, not interpreted: "0" also keeps autokernel.launch from switching it on
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "ptx_loads.py"), str(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if proc.returncode != 0 and "ptxas" in proc.stderr and "not found" in proc.stderr:
        pytest.skip("this triton wheel has no ptxas")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[int, dict]:
    tmp = tmp_path_factory.mktemp("ptx")
    return {vec: _compile(vec, tmp) for vec in (8, 1)}


def _vector(widths: dict, op: str) -> int:
    return sum(n for w, n in widths.items() if w.startswith(op) and ".v4." in w)


@pytest.mark.parametrize("kernel", ["softmax", "cross_entropy", "rmsnorm", "layernorm", "reduce"])
def test_odd_rows_load_16_byte_vectors(compiled, kernel):
    widths = compiled[8][kernel]["widths"]
    assert _vector(widths, "ld.global") > 0, widths
    if kernel in ("softmax", "rmsnorm", "layernorm"):  # the ones that write a row back
        assert _vector(widths, "st.global") > 0, widths


@pytest.mark.parametrize("kernel", ["softmax", "cross_entropy", "rmsnorm", "layernorm", "reduce"])
def test_without_the_aligned_walk_they_would_not(compiled, kernel):
    # The control: told nothing is aligned (VEC=1), the same kernels move the row in 2-byte
    # pieces, so the check above sees the aligned walk. (rmsnorm's and layernorm's weight loads
    # are vectors either way; their row shows in the stores.)
    unaligned = compiled[1][kernel]["widths"]
    if kernel in ("softmax", "rmsnorm", "layernorm"):
        assert _vector(unaligned, "st.global") == 0, unaligned
    else:
        assert _vector(unaligned, "ld.global") == 0, unaligned


def test_narrow_row_groups_load_16_byte_vectors(compiled):
    # The H200 benchmark's note on reduce 262144x128 said "0 of 8 global load sites 16-byte":
    # the column bound went through a minimum that hid n_cols's divisibility from the compiler.
    widths = compiled[8]["reduce_rows"]["widths"]
    assert _vector(widths, "ld.global") > 0, widths
    assert not any(w.startswith("ld.global.b16") for w in widths), widths
