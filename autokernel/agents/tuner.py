"""The built-in agent: searches a kernel's SEARCH_SPACE by rewriting its CONFIG literal.

No network and no model: each proposal is the current best kernel.py with one or two CONFIG
values changed, committed and judged like any LLM edit. Keys are tried in the order the kernel
lists them in SEARCH_SPACE, which starters order by expected gain (algorithm VARIANT first, then
tile sizes, then warps and stages: the playbook's tiers). The search is a coordinate descent
around the current best: single-key moves first, nearest values first, then pairs of keys; a
config already evaluated on the target is never proposed again, nor one at least as large in
every tile size and pipeline depth as a config that ran out of shared memory or registers. A
numeric value beyond one that already lost (in the same direction from the current best) waits
until everything else near the best has been tried.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Iterator

from autokernel import syntax
from autokernel.agents.base import AgentError, Context, Proposal


class Tuner:
    name = "tuner"
    instant = True  # proposes in microseconds: the parallel loop asks it only for a free slot

    def propose(self, ctx: Context) -> Proposal | None:
        config, space = read_config(ctx.kernel_source)
        if not space:
            return None  # nothing declared to search: the orchestrator moves on
        tried = {_key(c) for c in ctx.tried_configs} | {_key(config)}
        # Being evaluated beside this proposal: not repeated, but not losses either.
        busy = {_key(f["config"]) for f in ctx.in_flight if isinstance(f.get("config"), dict)}
        fresh = [
            (candidate, changes)
            for candidate, changes in neighbours(config, space)
            if _key(candidate) not in tried | busy
            and not any(_at_least(candidate, big) for big in ctx.oversized_configs)
        ]
        # Past a value that already lost, the same direction is left for last (not dropped):
        # the rmsnorm run on the H200 spent 35 % of its time on 32768/65536 tiles after 16384
        # had lost.
        ordered = [f for f in fresh if not _beyond_a_loss(config, f[1], space, tried)]
        ordered += [f for f in fresh if f not in ordered]
        if not ordered:
            return None
        candidate, changes = ordered[0]
        return Proposal(
            source=write_config(ctx.kernel_source, candidate),
            hypothesis="CONFIG " + ", ".join(f"{k} {config.get(k)!r}→{v!r}" for k, v in changes),
        )


def _beyond_a_loss(config: dict, changes: list, space: dict, tried: set[str]) -> bool:
    """A numeric move that jumps over a nearer value of the same key already tried from this
    config: that value did not beat the current best (else it would be the best), so going
    further the same way is the least promising move."""
    for key, value in changes:
        values = list(space[key])
        current = config.get(key)
        if current not in values or not all(isinstance(v, int | float) for v in values):
            continue
        i, j = values.index(current), values.index(value)
        step = 1 if j > i else -1
        if any(_key({**config, key: values[m]}) in tried for m in range(i + step, j, step)):
            return True
    return False


# Triton's OutOfResources, and the CUDA driver's refusal of a launch (BACKEND = "cuda")
RESOURCE_FAILURE = re.compile(r"out of resource|too many resources requested", re.IGNORECASE)


def out_of_resources(message: str | None) -> bool:
    """A compile that needed more shared memory or registers than the GPU has."""
    return bool(message and RESOURCE_FAILURE.search(message))


def _grows_resources(key: str) -> bool:
    """Tile sizes and pipeline depth: larger values never need less shared memory."""
    return key.startswith("BLOCK") or key == "num_stages"


def _at_least(candidate: dict, oversized: dict) -> bool:
    """`candidate` would run out the same way: the same algorithm and settings as `oversized`,
    and no smaller in any tile size or stage count (warps do not change shared memory)."""
    for key, big in oversized.items():
        if key == "num_warps":
            continue
        value = candidate.get(key)
        numbers = isinstance(value, int | float) and isinstance(big, int | float)
        if _grows_resources(key) and numbers:
            if value < big:
                return False
        elif value != big:
            return False
    return True


def neighbours(config: dict, space: dict) -> Iterator[tuple[dict, list[tuple[str, object]]]]:
    """Configs one key away from `config` (values nearest the current one first), then two."""
    moves = {key: _by_distance(config.get(key), list(values)) for key, values in space.items()}
    for key, values in moves.items():
        for value in values:
            yield {**config, key: value}, [(key, value)]
    for (k1, v1s), (k2, v2s) in itertools.combinations(moves.items(), 2):
        for v1, v2 in itertools.product(v1s, v2s):
            yield {**config, k1: v1, k2: v2}, [(k1, v1), (k2, v2)]


def _by_distance(current: object, values: list) -> list:
    others = [v for v in values if v != current]
    if current not in values:
        return others
    i = values.index(current)
    return sorted(others, key=lambda v: abs(values.index(v) - i))


def _key(config: dict) -> str:
    return repr(sorted(config.items(), key=lambda kv: kv[0]))


def _assignment(tree: ast.Module, name: str) -> ast.Assign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node
    return None


def read_config(source: str) -> tuple[dict, dict]:
    """CONFIG and SEARCH_SPACE as literals ({} where absent); a non-literal is an AgentError
    because the tuner could not edit it safely."""
    tree = syntax.parse(source)
    out = []
    for name in ("CONFIG", "SEARCH_SPACE"):
        node = _assignment(tree, name)
        if node is None:
            out.append({})
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, TypeError):  # TypeError: an unhashable key, `{[]: 1}`
            raise AgentError(
                f"{name} in kernel.py is not a literal dict; the tuner needs one"
            ) from None
        if not isinstance(value, dict):
            raise AgentError(f"{name} in kernel.py must be a dict, not {type(value).__name__}")
        out.append(value)
    config, space = out
    bad = [k for k, v in space.items() if not isinstance(v, list | tuple) or not v]
    if bad:
        raise AgentError(f"SEARCH_SPACE entries must be non-empty lists; fix {', '.join(bad)}")
    return config, space


def write_config(source: str, config: dict) -> str:
    """`source` with its CONFIG literal replaced, everything else byte for byte unchanged."""
    node = _assignment(syntax.parse(source), "CONFIG")
    if node is None:
        raise AgentError("kernel.py has no CONFIG dict for the tuner to edit")
    lines = source.splitlines(keepends=True)
    body = "".join(f"    {_literal(k)}: {_literal(v)},\n" for k, v in config.items())
    new = f"CONFIG = {{\n{body}}}\n"
    assert node.end_lineno is not None
    return "".join(lines[: node.lineno - 1]) + new + "".join(lines[node.end_lineno :])


def _literal(value: object) -> str:
    """Python literal text in the starters' style (double-quoted strings)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)
