"""A generic starter's kernels as this package reads them, and how each is launched: the
description of one of Inductor's @triton.jit kernels (its kind, its block constexprs and the
program_id axes they tile), the CONFIG and SEARCH_SPACE entries for its blocks and warps, and
the launcher that reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

POINTWISE_BLOCKS = [64, 128, 256, 512, 1024, 2048, 4096]
ROW_BLOCKS = [1, 2, 4, 8, 16, 32, 64]  # reduction rows per program
REDUCTION_BLOCKS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
WARPS = [1, 2, 4, 8, 16]


@dataclass
class Kernel:
    name: str
    kind: str  # pointwise, reduction, persistent_reduction
    source: str  # the rewritten @triton.jit function
    params: list[str]  # run() arguments, in order
    constexprs: set[str] = field(default_factory=set)
    blocks: dict[str, int] = field(default_factory=dict)  # block -> the program_id axis it tiles
    fixed: dict[str, int] = field(default_factory=dict)  # blocks the body sets itself
    r_blocks: list[str] = field(default_factory=list)  # reduction block constexprs
    hint: str = ""  # Inductor's reduction hint (INNER, OUTER, DEFAULT)
    size_hints: dict[str, int] = field(default_factory=dict)
    # @triton.jit functions Inductor wrote beside the kernel and the kernel calls (a scan's
    # combine function), name -> rewritten source
    local: dict[str, str] = field(default_factory=dict)
    signature: dict[str, str] = field(default_factory=dict)  # Inductor's: param -> "fp32", ...
    # scalar params the wrapper unwrapped from a 0-dim input with .item(), -> that input's
    # index: the starter passes the tensor and the kernel loads it (autokernel.model.starter)
    scalars: dict[str, int] = field(default_factory=dict)


def _p2(n: int) -> int:
    return 1 << max(0, (max(1, n) - 1).bit_length())


def tunables(kernels: dict[str, Kernel], chosen: dict[str, dict[str, int]]) -> tuple[dict, dict]:
    """Where Inductor's autotuner chose a kernel's launch (`chosen`, by kernel name), that
    choice; else Inductor's default choices for such kernels: 1-D pointwise 1024-element
    blocks (fewer for small tensors) on 4 warps; an inner reduction one row per program over
    up to 2048 columns; an outer one 64 rows by 8; warps from the tile, 2 to 8."""
    config: dict[str, int] = {}
    space: dict[str, list[int]] = {}
    for i, k in enumerate(kernels.values()):
        if k.name in chosen:
            _take(config, space, i, k, chosen[k.name])
            continue
        x_hint = int(k.size_hints.get("x", 1024))
        r_hint = int(k.size_hints.get("r0_", k.size_hints.get("r", 1024)))
        tile = 1
        for block in sorted(b for b in k.blocks if b in k.constexprs):
            if k.kind == "pointwise":
                choices = POINTWISE_BLOCKS if block == "XBLOCK" else ROW_BLOCKS
                value = min(1024, _p2(x_hint)) if block == "XBLOCK" else 32
            else:
                choices, value = ROW_BLOCKS, 64 if k.hint == "OUTER" else 1
            value = min(choices, key=lambda c: abs(c - value))
            config[f"{block}_{i}"], space[f"{block}_{i}"] = value, choices
            tile *= value
        for block in k.r_blocks:
            if k.kind == "reduction":
                value = 8 if k.hint == "OUTER" else min(2048, _p2(r_hint))
                value = min(REDUCTION_BLOCKS, key=lambda c: abs(c - value))
                config[f"{block}_{i}"], space[f"{block}_{i}"] = value, REDUCTION_BLOCKS
                tile *= value
            else:
                tile *= _p2(r_hint)
        warps = 4 if k.kind == "pointwise" else max(2, min(8, tile // 128))
        config[f"num_warps_{i}"] = min(WARPS, key=lambda c: abs(c - warps))
        space[f"num_warps_{i}"] = WARPS
    return config, space


def _take(config: dict, space: dict, i: int, k: Kernel, choice: dict[str, int]) -> None:
    """Kernel i's CONFIG entries from Inductor's choice, each value added to its SEARCH_SPACE
    list where the powers of two there miss it; a block the choice does not name gets the
    smallest value of its list."""
    for block in sorted(b for b in k.blocks if b in k.constexprs) + (
        k.r_blocks if k.kind == "reduction" else []
    ):
        if block in k.r_blocks:
            choices = REDUCTION_BLOCKS
        elif k.kind == "pointwise" and block == "XBLOCK":
            choices = POINTWISE_BLOCKS
        else:
            choices = ROW_BLOCKS
        value = int(choice.get(block, choices[0]))
        config[f"{block}_{i}"], space[f"{block}_{i}"] = value, sorted({*choices, value})
    warps = int(choice.get("num_warps", 4))
    config[f"num_warps_{i}"], space[f"num_warps_{i}"] = warps, sorted({*WARPS, warps})


def launcher(i: int, k: Kernel) -> str:
    """_launch_<kernel>(run arguments): the grid from the numels and CONFIG's blocks."""
    args = ", ".join(k.params)
    lines = [f"def _launch_{k.name}({args}):"]
    meta = []
    for block in sorted(k.blocks):
        if block in k.constexprs:
            lines.append(f'    {block} = CONFIG["{block}_{i}"]')
            meta.append(f"{block}={block}")
    for block in k.r_blocks:
        if k.kind == "reduction":
            lines.append(f'    {block} = CONFIG["{block}_{i}"]')
        else:  # persistent: one block holds the whole reduced row
            lines.append(f"    {block} = triton.next_power_of_2({block[:-5].lower()}_numel)")
        meta.append(f"{block}={block}")
    grid = ["1"] * (max(k.blocks.values(), default=0) + 1)
    for block, axis in k.blocks.items():
        numel = f"{block[0].lower()}numel"
        per = block if block in k.constexprs else str(k.fixed.get(block, 1))
        if numel in k.params:
            grid[axis] = f"triton.cdiv({numel}, {per})"
    lines.append(f"    grid = ({', '.join(grid)},)")
    lines.append("    if min(grid) > 0:")
    meta.append(f'num_warps=CONFIG["num_warps_{i}"]')
    lines.append(f"        {k.name}[grid]({args}, {', '.join(meta)})")
    return "\n".join(lines)
