"""The flash_attention starter's mask read, compiled to sm_90 PTX on the CPU (Triton's wheel
carries the NVIDIA backend): a mask constant along keys, as Hugging Face 5.17 hands one to SDPA
under torch.compile, must cost no more shared-memory traffic or barriers than a padding mask.
Read as a tile, it is contiguous along queries, and every key block's tile went through shared
memory into the MMA layout (57 shared loads and 16 barriers against 16 and 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
def test_a_mask_constant_along_keys_costs_no_more_than_a_padding_mask(tmp_path):
    out = tmp_path / "counts.json"
    # A child process: compiling loads the starter's helpers as compiled kernels, which the
    # interpreter in this worker could no longer call. TRITON_INTERPRET=0: this suite sets it
    # to 1 (conftest.py), and Triton reads it once at import, before the script's load() can
    # turn it off; inherited, the compile fails wherever Triton's cache is cold (as on CI).
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    subprocess.run([sys.executable, "-m", "benchmarks.fa_mask_ptx", "--json", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300, env=env)  # fmt: skip
    (layouts,) = json.loads(out.read_text()).values()
    constant_keys, padding = layouts["constant along keys (0, 0, 1, 0)"], layouts[
        "padding, expanded (S, 0, 0, 1)"]  # fmt: skip
    for what in ("ld.shared", "st.shared", "barriers"):
        assert constant_keys[what] <= padding[what], (what, constant_keys, padding)
