"""The built-in tuner: real edits of CONFIG, gains-first order, no config twice, an end."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autokernel.agents.base import AgentError, Context
from autokernel.agents.tuner import Tuner, read_config, write_config
from autokernel.specs import SPECS

KERNELS = Path(__file__).resolve().parents[1] / "kernels"

TINY = """KERNEL_TYPE = "softmax"
# a comment that must survive
CONFIG = {"A": 1,
          "B": "x"}
SEARCH_SPACE = {"A": [1, 2], "B": ["x", "y"]}


def kernel_fn(x):
    return CONFIG["A"]
"""


def ctx(source: str, tried: list[dict] | None = None) -> Context:
    return Context(
        experiment=1, target="t", kernel_type="softmax", program="", spec_text="",
        reference_source="", kernel_source=source, tried_configs=tried or [],
    )  # fmt: skip


def test_write_config_changes_only_the_config_literal():
    new = write_config(TINY, {"A": 2, "B": "x"})
    assert read_config(new)[0] == {"A": 2, "B": "x"}
    before, after = TINY.split("CONFIG")[0], new.split("CONFIG")[0]
    assert before == after and new.endswith(TINY[TINY.index("SEARCH_SPACE") :])
    ast.parse(new)


def test_proposals_follow_search_space_order_and_exhaust():
    tuner, tried, seen = Tuner(), [], []
    source = TINY
    while (p := tuner.propose(ctx(source, tried))) is not None:
        config = read_config(p.source)[0]
        assert config not in tried
        tried.append(config)
        seen.append(config)
        assert "→" in p.hypothesis
    # one key at a time in SEARCH_SPACE order, then the pair; never the current config
    assert seen == [{"A": 2, "B": "x"}, {"A": 1, "B": "y"}, {"A": 2, "B": "y"}]


def test_nearest_values_first():
    source = TINY.replace('"A": [1, 2]', '"A": [1, 2, 4, 8, 16]').replace('"A": 1,', '"A": 4,')
    first = [read_config(Tuner().propose(ctx(source, [])).source)[0]["A"]]
    tried = [{"A": first[0], "B": "x"}]
    first.append(read_config(Tuner().propose(ctx(source, tried)).source)[0]["A"])
    assert first == [2, 8]


def test_non_literal_config_is_an_agent_error():
    with pytest.raises(AgentError, match="literal"):
        Tuner().propose(ctx(TINY.replace('"A": 1,', '"A": 1 + len("ab"),')))


def test_kernel_without_search_space_has_nothing_to_try():
    assert Tuner().propose(ctx('KERNEL_TYPE = "softmax"\nCONFIG = {}\n')) is None


@pytest.mark.parametrize("kind", list(SPECS))
def test_every_starter_is_tunable(kind):
    source = (KERNELS / f"{kind}.py").read_text()
    config, space = read_config(source)
    assert space and set(space) <= set(config), "SEARCH_SPACE keys must be CONFIG keys"
    for key, values in space.items():
        assert config[key] in values, f"{kind}: CONFIG[{key!r}] is not in its SEARCH_SPACE"
    proposal = Tuner().propose(ctx(source))
    assert proposal is not None and proposal.source != source
    ast.parse(proposal.source)


TILES = """CONFIG = {"BLOCK_M": 64, "num_stages": 3, "num_warps": 4, "VARIANT": "a"}
SEARCH_SPACE = {"BLOCK_M": [32, 64, 128, 256], "num_stages": [2, 3, 4, 5],
                "num_warps": [4, 8], "VARIANT": ["a", "b"]}
"""


def test_configs_as_large_as_one_out_of_resources_are_never_proposed():
    oversized = [{"BLOCK_M": 128, "num_stages": 4, "num_warps": 8, "VARIANT": "a"}]
    tuner, tried, seen = Tuner(), [], []
    while True:
        c = Context(
            experiment=1, target="t", kernel_type="matmul", program="", spec_text="",
            reference_source="", kernel_source=TILES, tried_configs=tried,
            oversized_configs=oversized,
        )  # fmt: skip
        p = tuner.propose(c)
        if p is None:
            break
        tried.append(read_config(p.source)[0])
        seen.append(tried[-1])
    big = [s for s in seen if s["BLOCK_M"] >= 128 and s["num_stages"] >= 4 and s["VARIANT"] == "a"]
    assert big == []  # whatever the warps: they do not change shared memory
    # smaller in one dimension, or another algorithm, is still tried
    assert {"BLOCK_M": 128, "num_stages": 3, "num_warps": 4, "VARIANT": "a"} in seen
    assert {"BLOCK_M": 64, "num_stages": 4, "num_warps": 4, "VARIANT": "a"} in seen
    assert {"BLOCK_M": 64, "num_stages": 3, "num_warps": 4, "VARIANT": "b"} in seen


def test_out_of_resources_is_recognized_in_triton_s_message():
    from autokernel.agents.tuner import out_of_resources

    msg = ("crash in compile 64x64 bfloat16: kernel_fn raised OutOfResources: out of resource: "
           "shared memory, Required: 262144, Hardware limit: 232448.")  # fmt: skip
    assert out_of_resources(msg)
    assert not out_of_resources("fail in correctness: max error 0.5") and not out_of_resources(None)


def test_values_beyond_one_that_lost_wait_until_the_rest_is_tried():
    source = TINY.replace('"A": [1, 2]', '"A": [1, 2, 4, 8, 16]').replace('"A": 1,', '"A": 4,')
    tried = [{"A": 8, "B": "x"}]  # tried from this best and lost: 16 lies beyond it
    seen = []
    while (p := Tuner().propose(ctx(source, tried))) is not None:
        tried.append(read_config(p.source)[0])
        seen.append(tried[-1])
    order = [(c["A"], c["B"]) for c in seen]
    # 2 (nearest), then B; 1 lies beyond 2 once 2 has lost, 16 beyond 8: both wait, in pairs too
    assert order == [(2, "x"), (4, "y"), (2, "y"), (8, "y"), (1, "x"), (16, "x"), (1, "y"),
                     (16, "y")]  # fmt: skip
    assert len(order) == len(set(order)) == 5 * 2 - 2  # nothing dropped, nothing twice


def test_a_config_with_an_unhashable_key_is_an_agent_error():
    """literal_eval raises TypeError on `{[]: 1}`: the loop reads an LLM kernel's CONFIG after
    its verdict, and the TypeError ended the night and every resume after it."""
    with pytest.raises(AgentError, match="not a literal dict"):
        read_config(TINY.replace('CONFIG = {"A": 1,', 'CONFIG = {[]: 1, "A": 1,'))
