"""The launch plans of the row-wise CUDA starters (kernels/cuda/*.py), checked on the CPU against
what their kernels assume, at every size the specs generate and at the corners of each search
space, for every offset from a 16-byte boundary a row can start at.

The kernels cannot run here, so this is where their index arithmetic meets the host's: a group of
g threads (a power of two) per row, block // g rows per block, grid * (block // g) >= rows,
a narrow row (g <= 32) held whole in registers (g * ITEMS vectors, the kernel keeps no shared
memory for it), shared memory only for wide rows and within SMEM_KB, blocks no larger than the
__launch_bounds__ the source declares (BOUND). rows_plan and _pow2 are plain Python, taken from
each file's syntax tree (importing the file would build its CUDA source). reduce's narrow
path (one vector a lane, ROWS rows a thread, warps over runs of rows) is planned by
narrow_plan, checked the same way, and its kernel's lanes and transposing shuffle tree are
emulated one by one.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from types import SimpleNamespace

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


def _reduce_narrow_functions() -> tuple[dict, dict, dict]:
    """narrow_plan and its helpers from kernels/cuda/reduce.py's syntax tree (no build)."""
    path = ROOT / "kernels" / "cuda" / "reduce.py"
    text = path.read_text()
    names = ("launch_plan", "narrow_fits", "narrow_plan", "row_vectors", "blocks_per_sm",
             "rows_plan", "_pow2", "_cdiv")  # fmt: skip
    keep = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert len(keep) == len(names)
    # launch_plan's world: torch.cuda with an H200's 132 SMs, kernels by dtype size as names
    cuda = SimpleNamespace(get_device_properties=lambda d: SimpleNamespace(
        multi_processor_count=132))  # fmt: skip
    namespace: dict = {"torch": SimpleNamespace(cuda=cuda), "NARROW_VECS": 32,
                       "_KERNELS": {BF16: "rows kernel", FP32: "rows kernel"},
                       "_NARROW": {BF16: NarrowKernel(), FP32: NarrowKernel()}}  # fmt: skip
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), namespace)
    config = literal_assignment(text, "CONFIG")
    space = literal_assignment(text, "SEARCH_SPACE")
    return namespace, config, space


class NarrowKernel:
    """The narrow kernel as launch_plan sees it: its registers (64, as ptxas gives at CONFIG),
    counted when read (PERSIST 0 must not need them)."""

    reads = 0

    @property
    def num_regs(self) -> int:
        NarrowKernel.reads += 1
        return 64


class Dtype:
    """A torch dtype as launch_plan reads it: a dict key with an itemsize."""

    def __init__(self, itemsize: int) -> None:
        self.itemsize = itemsize


BF16, FP32 = Dtype(itemsize=2), Dtype(itemsize=4)


def _narrow_configs(config: dict, space: dict) -> list[dict]:
    keys = ("ROWS", "PERSIST", "NARROW_BLOCK")
    return [config] + [{**config, **dict(zip(keys, pick, strict=True))}
                       for pick in itertools.product(*(space[k] for k in keys))]  # fmt: skip


def test_reduce_narrow_plans_cover_every_row_once():
    """Warp w takes rows [w * chunk, (w + 1) * chunk): together the warps of the grid hold every
    row, no block is without one, the block is within NARROW_BLOCK (the __launch_bounds__), and
    a row fits its G lanes at any offset from a 16-byte boundary the kernel can meet."""
    ns, config, space = _reduce_narrow_functions()
    rows_set = [1, 2, 31, 33, 255, 4097, 100_003, 262_144, 2**24 + 5]
    for cfg, rows, cols, size in itertools.product(
        _narrow_configs(config, space), rows_set, range(1, 260, 7), (2, 4)
    ):
        vec = 16 // size
        for aligned, stride in ((True, cols), (False, cols), (True, cols + 3)):
            nvec = ns["row_vectors"](cols, stride, aligned, size)
            offsets = range(1) if aligned and stride % vec == 0 else range(vec)
            worst = max((cols + mis + vec - 1) // vec for mis in offsets)
            assert nvec >= worst
            if nvec > 32:
                continue
            grid, block, chunk, lg = ns["narrow_plan"](rows, nvec, 132 * 4, cfg)
            g = 1 << lg
            assert g >= nvec and 8 <= g <= 32 and (g == 8 or g < 2 * nvec)
            assert block % 32 == 0 and 32 <= block <= cfg["NARROW_BLOCK"]
            warps = grid * block // 32
            assert warps * chunk >= rows and (grid - 1) * (block // 32) * chunk < rows
            assert chunk % (32 // g) == 0
            if not cfg["PERSIST"]:
                assert chunk == (32 // g) * cfg["ROWS"]
            else:
                assert grid <= 132 * 4


def test_reduce_persistent_plan_at_262144x128_bf16_fills_an_h100_once():
    """132 SMs, 4 blocks of 256 an SM at 64 registers: 4096 warps of 64 rows, 4 steps each."""
    ns, config, _ = _reduce_narrow_functions()
    assert ns["blocks_per_sm"](64, 256) == 4 and ns["blocks_per_sm"](32, 256) == 8
    assert ns["blocks_per_sm"](40, 128) == 12 and ns["blocks_per_sm"](255, 1024) == 1
    nvec = ns["row_vectors"](128, 128, True, 2)
    assert nvec == 16
    grid, block, chunk, lg = ns["narrow_plan"](262144, nvec, 132 * 4, {**config, "PERSIST": 1})
    assert (grid, block, chunk, lg) == (512, 256, 64, 4)


def _emulate_narrow(x, xs: int, offset: int, rows: int, cols: int, vec: int, plan, steps: int):
    """The narrow kernel (narrow_rows in reduce.py's CUDA_SOURCE) lane by lane in Python: which
    vector each lane loads, which columns it keeps, the transposing exchanges and which lane
    stores which row. x: the flat storage (floats), row r at offset + r * xs."""
    grid, block, chunk, lg = plan
    g = 1 << lg
    per = 32 // g
    halve = min(steps, g)
    keep_n = steps // halve
    out: dict[int, float] = {}
    for warp in range(grid * block // 32):
        start = warp * chunk
        end = min(start + chunk, rows)
        base = start
        while base < end:
            v = []  # v[lane][r]
            for lane in range(32):
                t, sub = lane % g, lane // g
                vals = []
                for r in range(steps):
                    row = base + r * per + sub
                    s = 0.0
                    if row < end:
                        addr = offset + row * xs
                        mis = addr % vec
                        nvec = (cols + mis + vec - 1) // vec
                        if t < nvec:
                            for j in range(vec):
                                e = t * vec - mis + j
                                if 0 <= e < cols:
                                    s += x[addr + e]
                    vals.append(s)
                v.append(vals)
            first = [0] * 32
            h, off = steps // 2, g // 2
            while h >= keep_n and off > 0:
                new = []
                for lane in range(32):
                    up = bool(lane & off)
                    other = lane ^ off
                    row_vals = []
                    for i in range(h):
                        keep = v[lane][i + h] if up else v[lane][i]
                        give = v[other][i] if (other & off) else v[other][i + h]
                        row_vals.append(keep + give)
                    new.append(row_vals)
                    if up:
                        first[lane] += h
                v = new
                h, off = h // 2, off // 2
            off = g // halve // 2
            while off > 0:
                v = [[v[lane][0] + v[lane ^ off][0], *v[lane][1:]] for lane in range(32)]
                off //= 2
            for lane in range(32):
                t, sub = lane % g, lane // g
                if t % (g // halve) == 0:
                    for i in range(keep_n):
                        row = base + (first[lane] + i) * per + sub
                        if row < end:
                            assert row not in out, f"row {row} stored twice"
                            out[row] = v[lane][i]
            base += steps * per
    return out


@pytest.mark.parametrize("steps", [2, 4, 8])
def test_reduce_narrow_kernel_logic_sums_every_row(steps):
    """Lane-level emulation of the narrow kernel on small integer rows (sums exact in floats):
    every row stored once, by the right lane, with its sum, for every G, row offset and stride."""
    ns, config, _ = _reduce_narrow_functions()
    for cols, vec, offset, pad, rows, persist in [
        (1, 8, 0, 0, 70, 1), (1, 8, 3, 0, 300, 0), (7, 8, 1, 2, 41, 1), (8, 8, 0, 0, 67, 1),
        (16, 8, 0, 0, 33, 0), (17, 8, 5, 1, 19, 1), (64, 8, 0, 0, 9, 1), (127, 8, 1, 0, 5, 0),
        (128, 8, 0, 0, 37, 1), (249, 8, 7, 0, 3, 1), (4, 4, 2, 1, 50, 0), (31, 4, 1, 0, 6, 1),
        (128, 4, 0, 0, 5, 0), (125, 4, 3, 2, 4, 1),
    ]:  # fmt: skip
        xs = cols + pad
        aligned = offset % vec == 0
        nvec = ns["row_vectors"](cols, xs, aligned, 16 // vec)
        assert nvec <= 32
        cfg = {**config, "ROWS": steps, "PERSIST": persist, "NARROW_BLOCK": 64}
        plan = ns["narrow_plan"](rows, nvec, 3, cfg)
        x = [float((i * 7919) % 13 - 6) for i in range(offset + rows * xs + 16)]
        got = _emulate_narrow(x, xs, offset, rows, cols, vec, plan, steps)
        want = {r: sum(x[offset + r * xs + c] for c in range(cols)) for r in range(rows)}
        assert got == want, (cols, vec, offset, rows, persist)


def _fills_its_group(cols: int, stride: int, aligned: bool, size: int) -> bool:
    """The narrow path's rule, written out apart from reduce.py: whole vectors everywhere, and
    as many as a group of 8, 16 or 32 lanes."""
    vec = 16 // size
    whole = aligned and stride % vec == 0 and cols % vec == 0
    return whole and cols // vec in (8, 16, 32)


def test_reduce_takes_the_narrow_path_only_where_every_lane_holds_a_whole_vector():
    """Every width up to 600 columns, bf16 and fp32, aligned or not, strides of whole vectors and
    not: the narrow path exactly where the group fills (64, 128, 256 bf16; 32, 64, 128 fp32)."""
    ns, _, _ = _reduce_narrow_functions()
    narrow = set()
    for cols, size, aligned, pad in itertools.product(range(1, 600), (2, 4), (True, False),
                                                      (0, 1, 3, 8, 16)):  # fmt: skip
        got = ns["narrow_fits"](cols, cols + pad, aligned, size)
        assert got == _fills_its_group(cols, cols + pad, aligned, size), (cols, size, aligned, pad)
        if got:
            narrow.add((size, cols))
    assert narrow == {(2, 64), (2, 128), (2, 256), (4, 32), (4, 64), (4, 128)}


def test_reduce_launch_plans_at_the_measured_sizes():
    """The H200's sizes: 262144x128 bf16 on the narrow path with the plan timed at 90.6 % of copy
    (PERSIST 0, ROWS 8: 2048 blocks of 256, 16 rows a warp, G = 16), and no register count read;
    the shapes that lost on it (262144x127, 1048576x32) and the wide rows on rows_plan, as the
    old file planned them (the plans in the H200 table)."""
    ns, config, _ = _reduce_narrow_functions()
    assert config["PERSIST"] == 0 and config["ROWS"] == 8
    plan = ns["launch_plan"]
    before = NarrowKernel.reads
    narrow = plan(262144, 128, 128, True, BF16, config, None)
    assert narrow == (ns["_NARROW"][BF16], 2048, 256, 16, 4)
    assert NarrowKernel.reads == before
    for rows, cols, want in [(262144, 127, (4096, 256, 4)), (1048576, 32, (4096, 256, 1)),
                             (4096, 50257, (4096, 512, 512)), (16384, 8192, (16384, 256, 256)),
                             (4096, 4096, (4096, 128, 128))]:  # fmt: skip
        assert plan(rows, cols, cols, True, BF16, config, None) == ("rows kernel", *want)
        assert want == ns["rows_plan"](rows, cols, 2, config)
    # PERSIST 1 stays a choice: the plan timed at 88.5 % (an H200 SM holding 4 blocks of 256)
    persist = plan(262144, 128, 128, True, BF16, {**config, "PERSIST": 1}, None)
    assert persist == (ns["_NARROW"][BF16], 512, 256, 64, 4) and NarrowKernel.reads == before + 1


def test_reduce_rows_off_the_narrow_rule_keep_the_old_plan():
    """An unaligned base, a stride off whole vectors, a width off whole vectors or short of its
    group: rows_plan and the rows kernel, whatever the config."""
    ns, config, space = _reduce_narrow_functions()
    for cfg in _narrow_configs(config, space):
        for cols, stride, aligned, dtype in [
            (128, 128, False, BF16), (128, 130, True, BF16), (127, 127, True, BF16),
            (129, 129, True, BF16), (32, 32, True, BF16), (56, 56, True, BF16),
            (200, 200, True, BF16), (30, 32, True, FP32), (96, 96, True, FP32),
            (16, 16, True, FP32),
        ]:  # fmt: skip
            got = ns["launch_plan"](1000, cols, stride, aligned, dtype, cfg, None)
            assert got == ("rows kernel", *ns["rows_plan"](1000, cols, dtype.itemsize, cfg))
        got = ns["launch_plan"](1000, 64, 64, True, FP32, cfg, None)
        assert got[0] is ns["_NARROW"][FP32] and got[-1] == 4  # 16 fp32 vectors: G = 16
