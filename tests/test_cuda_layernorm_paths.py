"""Which path the CUDA layernorm (kernels/cuda/layernorm.py) gives a row, checked on the CPU.

The staged wide path was measured on an H200 (4096x50257 bf16 56.4 -> 72.8 % of copy, 8192x32000
68.0 -> 87.3 %); rows the stage does not fit must keep the plan the file had before it (the
wide path with no stage where weight and bias fit in shared memory, else rows_plan), so the
band of widths just past the stage (bf16 about 56,960 to 57,344 columns) keeps its 67 % and does
not fall to rows_plan's 49 %. launch_plan and its helpers are taken from the file's syntax tree
(importing it would build the CUDA source); torch.cuda is a stand-in with the H200's figures.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from autokernel.harness.guards import literal_assignment

PATH = Path(__file__).resolve().parents[1] / "kernels" / "cuda" / "layernorm.py"
H200 = SimpleNamespace(shared_memory_per_block_optin=227 * 1024, multi_processor_count=132)
KERNELS, FLAT = "narrow kernels", "flat wide kernels"
WIDE = {0: "wide0 kernels", 1: "wide1 kernels", 2: "wide2 kernels"}


def _load() -> tuple[dict, dict, dict]:
    text = PATH.read_text()
    names = ("launch_plan", "wide_path", "wide_shared", "rows_plan", "_pow2")
    keep = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert len(keep) == len(names)
    cuda = SimpleNamespace(get_device_properties=lambda device: H200)
    ns: dict = {"torch": SimpleNamespace(device=object, cuda=cuda), "_KERNELS": KERNELS,
                "_FLAT": FLAT, "_WIDE": WIDE}  # fmt: skip
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(PATH), "exec"), ns)
    return ns, literal_assignment(text, "CONFIG"), literal_assignment(text, "SEARCH_SPACE")


NS, CONFIG, SPACE = _load()


def _main_rule(cols: int, size: int, config: dict, optin: int) -> tuple[str, int]:
    """The path main's file (before the stage) took: written out here, apart from the file."""
    vec, g = 16 // size, config["WIDE_THREADS"]
    nw = -(-cols // vec)
    nvec = nw + (cols % vec != 0)
    shared = 2 * nw * 16
    if (nvec <= config["MAX_THREADS"] * config["ITEMS"] or nvec > g * config["WIDE_ITEMS"]
            or shared + 1024 > optin):  # fmt: skip
        return "rows", 0
    return "flat", shared


def _path(cols: int, size: int = 2, config: dict = CONFIG, optin: int = 227 * 1024) -> str:
    return NS["wide_path"](cols, size, config, optin)[0]


def test_the_measured_sizes_keep_their_measured_plans():
    """The five sizes timed on the H200 (bf16, CONFIG): the same kernels, grid, block and bytes."""
    plan = NS["launch_plan"]
    assert plan(4096, 50257, 2, CONFIG, None) == (WIDE[1], 132, 1024, 204224)
    assert plan(8192, 32000, 2, CONFIG, None) == (WIDE[2], 132, 1024, 192016)
    for rows, cols in ((16384, 8192), (262144, 128), (4096, 4096)):
        narrow = NS["rows_plan"](rows, cols, 2, CONFIG)
        assert plan(rows, cols, 2, CONFIG, None) == (KERNELS, *narrow)
    assert CONFIG["WIDE_STAGES"] == 1 and CONFIG["WIDE_PARAMS"] == 2  # as measured


@pytest.mark.parametrize(
    "size, last_staged, flat, rows_gap, last_flat",
    [(2, 56960, 56961, (57337, 57343), 57344), (4, 28480, 28481, (28669, 28671), 28672)],
)
def test_rows_past_the_stage_keep_the_wide_path_without_it(size, last_staged, flat, rows_gap,
                                                           last_flat):  # fmt: skip
    """The band's edges on sm_90 (227 KB a block): the last width whose stage fits beside the
    weight takes it; the next takes the flat wide path with main's plan (both parameters in
    shared memory, no stage), up to main's own limits: WIDE_ITEMS slots (a width off whole
    vectors spans one more: 57337-57343 bf16 went to rows_plan on main too), then rows_plan."""
    assert _path(last_staged, size) == "wide1"
    for cols in (flat, flat + 1, rows_gap[0] - 1, last_flat):
        assert _path(cols, size) == "flat", cols
        nw = -(-cols // (16 // size))
        assert NS["launch_plan"](5, cols, size, CONFIG, None) == (FLAT, 5, 1024, 2 * nw * 16)
    for cols in (*rows_gap, last_flat + 1):
        assert _path(cols, size) == "rows", cols
        assert NS["launch_plan"](5, cols, size, CONFIG, None)[0] == KERNELS


def _configs() -> list[dict]:
    corners = [{k: pick(v) for k, v in SPACE.items()} for pick in (min, max)]
    mixed = [{**CONFIG, "WIDE_STAGES": s, "WIDE_PARAMS": p} for s in (1, 2) for p in (0, 1, 2)]
    short = {**corners[0], "WIDE_PARAMS": 2}  # narrow rows end below a vector a thread
    return [CONFIG, *corners, *mixed, short]


@pytest.mark.parametrize("config", _configs(), ids=lambda c: "-".join(map(str, c.values())))
def test_every_width_takes_the_stage_or_mains_path(config):
    """Every width, every dtype size, a few devices' shared memory: the staged path where its
    shared memory fits (as many parameters kept as fit, up to WIDE_PARAMS), else exactly the
    path and bytes main's rule gives."""
    g, stages = config["WIDE_THREADS"], config["WIDE_STAGES"]
    least = 0 if stages > 1 else 1
    for optin, size in ((227 * 1024, 2), (227 * 1024, 4), (163 * 1024, 2), (99 * 1024, 4)):
        vec = 16 // size
        for cols in range(1, 3 * vec * g * 16 // 2, 3 if config is CONFIG else 7):
            path, shared = NS["wide_path"](cols, size, config, optin)
            nw = -(-cols // vec)
            nvec = nw + (cols % vec != 0)
            wide = nvec > config["MAX_THREADS"] * config["ITEMS"] and nvec <= g * config[
                "WIDE_ITEMS"] and nw >= g  # fmt: skip
            fits = [np for np in range(min(config["WIDE_PARAMS"], 2), least - 1, -1)
                    if NS["wide_shared"](cols, size, np, stages) + 1024 <= optin]  # fmt: skip
            if wide and fits:
                staged = NS["wide_shared"](cols, size, fits[0], stages)
                assert (path, shared) == (f"wide{fits[0]}", staged), (cols, size)
            else:
                assert (path, shared) == _main_rule(cols, size, config, optin), (cols, size)
