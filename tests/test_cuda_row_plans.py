"""The launch plans of the row-wise CUDA starters (kernels/cuda/*.py), checked on the CPU against
what their kernels assume, at every size the specs generate and at the corners of each search
space, for every offset from a 16-byte boundary a row can start at.

The kernels cannot run here, so this is where their index arithmetic meets the host's: a group of
g threads (a power of two) per row, block // g rows per block, grid * (block // g) >= rows,
a narrow row (g <= 32) held whole in registers (g * ITEMS vectors, the kernel keeps no shared
memory for it), shared memory only for wide rows and within SMEM_KB, blocks no larger than the
__launch_bounds__ the source declares (BOUND). rows_plan and _pow2 are plain Python, taken from
each file's syntax tree (importing the file would build its CUDA source).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from autokernel.harness.guards import literal_assignment
from autokernel.specs import get_spec

ROOT = Path(__file__).resolve().parents[1]
HELD = ("rmsnorm", "layernorm", "softmax")  # the row kept on chip across passes
STREAMED = ("reduce", "cross_entropy")  # one pass, ITEMS loads in flight per step
MAX_SHARED = 227 * 1024  # per block on sm_90


def _plan_functions(kind: str) -> tuple[dict, dict, dict]:
    path = ROOT / "kernels" / "cuda" / f"{kind}.py"
    text = path.read_text()
    tree = ast.parse(text)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in
            ("rows_plan", "_pow2")]  # fmt: skip
    assert len(keep) == 2, f"{kind}: rows_plan and _pow2 at module level"
    namespace: dict = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), namespace)
    config = literal_assignment(text, "CONFIG")
    space = literal_assignment(text, "SEARCH_SPACE")
    return namespace, config, space


def _configs(config: dict, space: dict) -> list[dict]:
    """The starter's CONFIG, and the smallest and the largest value of every key together."""
    corners = [{k: pick(v) for k, v in space.items()} for pick in (min, max)]
    return [config, *corners]


def _sizes(kind: str) -> list[tuple[int, int]]:
    """(rows, cols) of every size of the spec, GPU and CPU sets alike."""
    spec = get_spec(kind)
    out = []
    for sizes in (spec.gpu, spec.cpu):
        for size in (sizes.smoke, *sizes.sweep, *sizes.odd, *sizes.bench):
            cols = size.get("cols", size.get("vocab"))
            out.append((size.get("batch", 1) * size["rows"], cols))
    for adv in spec.adversarial:
        for size in (adv.gpu_size, adv.cpu_size):
            out.append((size.get("batch", 1) * size["rows"], size.get("cols", size.get("vocab"))))
    return out


def _offsets(cols: int, vec: int, aligned_base: bool) -> range:
    """Row starts, in elements past a 16-byte boundary, that the kernel can meet."""
    if aligned_base and cols % vec == 0:
        return range(1)
    return range(vec)


def _check_grid(rows: int, grid: int, block: int, g: int, bound: int) -> None:
    assert g & (g - 1) == 0, "threads per row: a power of two (the shuffle butterfly)"
    assert block % 32 == 0 and block % g == 0 and 32 <= block <= bound
    if g > 32:
        assert block == g, "a wide row takes the whole block (its sum crosses warps)"
    per_block = block // g
    assert grid * per_block >= rows, "every row has a group"
    assert (grid - 1) * per_block < rows, "no block without a row"


@pytest.mark.parametrize("kind", HELD)
def test_held_row_plans_match_their_kernels(kind):
    ns, config, space = _plan_functions(kind)
    for cfg, (rows, cols), size in itertools.product(_configs(config, space), _sizes(kind), (2, 4)):
        vec = 16 // size
        grid, block, g, smem_items, shared = ns["rows_plan"](rows, cols, size, cfg)
        _check_grid(rows, grid, block, g, max(cfg["MAX_THREADS"], cfg["NARROW_BLOCK"]))
        assert shared == smem_items * g * 16 <= min(cfg["SMEM_KB"] * 1024, MAX_SHARED)
        for mis in _offsets(cols, vec, aligned_base=True):
            nvec = (cols + mis + vec - 1) // vec  # as the kernel counts a row's vectors
            slots = -(-nvec // g)
            if g <= 32:
                assert smem_items == 0 and g * cfg["ITEMS"] >= nvec, (
                    f"{kind} {rows}x{cols} {cfg}: a narrow row must fit in registers"
                )
            else:
                assert smem_items <= max(slots - cfg["ITEMS"], 0)


@pytest.mark.parametrize("kind", STREAMED)
def test_streamed_row_plans_match_their_kernels(kind):
    ns, config, space = _plan_functions(kind)
    for cfg, (rows, cols), size in itertools.product(_configs(config, space), _sizes(kind), (2, 4)):
        grid, block, g = ns["rows_plan"](rows, cols, size, cfg)
        _check_grid(rows, grid, block, g, max(cfg["MAX_THREADS"], cfg["NARROW_BLOCK"]))


@pytest.mark.parametrize("kind", HELD)
def test_a_narrow_row_at_any_offset_fits_its_group(kind):
    """The plan counts one vector more for rows off whole vectors: 7 bf16 columns starting at
    element 3 of a vector span two vectors, so a group planned for one would drop a column.
    (A width of whole vectors keeps every row on a boundary: kernel_fn aligns the base.)"""
    ns, config, _ = _plan_functions(kind)
    for cols in range(1, 400):
        _, _, g, _, _ = ns["rows_plan"](64, cols, 2, config)
        worst = cols // 8 if cols % 8 == 0 else (cols + 7 + 7) // 8
        assert g * config["ITEMS"] >= worst or g > 32, cols


def test_the_wide_llm_rows_stay_on_chip_at_the_starters_config():
    """4096 x 50257 bf16, the benchmark's widest row: all its vectors in registers and shared
    memory (read once), and two blocks' worth of shared memory per SM."""
    for kind in HELD:
        ns, config, _ = _plan_functions(kind)
        _, _, g, smem_items, shared = ns["rows_plan"](4096, 50257, 2, config)
        nvec = (50257 + 7 + 7) // 8
        assert g * (config["ITEMS"] + smem_items) >= nvec, kind
        assert 2 * shared <= MAX_SHARED, kind
