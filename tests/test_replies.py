"""Parsing LLM replies: whole files, SEARCH/REPLACE edits, hypotheses, and every error the LLM
gets back."""

from __future__ import annotations

import pytest

from autokernel.agents.replies import NO_HYPOTHESIS, ReplyError, extract_hypothesis, parse_reply

CURRENT = '''"""Row softmax."""

import torch

KERNEL_TYPE = "softmax"
CONFIG = {"BLOCK_SIZE": 1024, "num_warps": 4}


def _launch(x, block):
    y = torch.empty_like(x)
    return y


def kernel_fn(x):
    y = _launch(x, CONFIG["BLOCK_SIZE"])
    return y
'''

NEW_FILE = CURRENT.replace("1024", "2048")


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_whole_file_in_python_block():
    reply = f"HYPOTHESIS: wider blocks halve the launches\n\n```python\n{NEW_FILE}```\nDone."
    source, hypothesis = parse_reply(reply, CURRENT)
    assert source == NEW_FILE
    assert hypothesis == "wider blocks halve the launches"


def test_whole_file_picks_the_block_with_kernel_fn_among_snippets():
    reply = f"Change this:\n```python\nCONFIG['BLOCK_SIZE'] = 2048\n```\n```python\n{NEW_FILE}```"
    assert parse_reply(reply, CURRENT)[0] == NEW_FILE


def test_single_search_replace():
    reply = "HYPOTHESIS: bigger tile\n" + edit(
        'CONFIG = {"BLOCK_SIZE": 1024, "num_warps": 4}',
        'CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 8}',
    )
    source, _ = parse_reply(reply, CURRENT)
    assert 'CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 8}' in source
    assert source.replace("4096", "1024").replace('"num_warps": 8', '"num_warps": 4') == CURRENT


def test_multiple_blocks_apply_in_order_and_may_be_fenced():
    first = edit("    y = torch.empty_like(x)", "    y = torch.empty_like(x)\n    n = x.shape[-1]")
    # The second block's SEARCH only exists after the first applied.
    second = edit("    n = x.shape[-1]", "    n = x.shape[-1]  # columns")
    third = edit("def kernel_fn(x):", "def kernel_fn(x: torch.Tensor):")
    reply = f"HYPOTHESIS: h\n```\n{first}\n```\n\n```python\n{second}\n{third}\n```"
    source, _ = parse_reply(reply, CURRENT)
    assert "    n = x.shape[-1]  # columns\n    return y" in source
    assert "def kernel_fn(x: torch.Tensor):" in source


def test_search_falls_back_to_ignoring_trailing_whitespace_and_blank_ends():
    search = 'def kernel_fn(x):   \n    y = _launch(x, CONFIG["BLOCK_SIZE"])\t\n'
    reply = edit(search, "def kernel_fn(x):\n    y = _launch(x, 2048)")
    source, _ = parse_reply(reply, CURRENT)
    assert "    y = _launch(x, 2048)\n    return y\n" in source


def test_crlf_reply_is_accepted():
    reply = "HYPOTHESIS: h\n" + edit("def kernel_fn(x):", "def kernel_fn(x, /):")
    source, hypothesis = parse_reply(reply.replace("\n", "\r\n"), CURRENT.replace("\n", "\r\n"))
    assert source == CURRENT.replace("def kernel_fn(x):", "def kernel_fn(x, /):")
    assert hypothesis == "h"


def test_no_code_is_an_error_that_explains_the_format():
    with pytest.raises(ReplyError, match="no code") as e:
        parse_reply("HYPOTHESIS: I would make it faster.", CURRENT)
    assert "<<<<<<< SEARCH" in str(e.value)


def test_search_not_found_names_its_first_line():
    reply = edit("def kernel_fn(x, y):\n    pass", "def kernel_fn(x):\n    pass")
    with pytest.raises(ReplyError, match=r"`def kernel_fn\(x, y\):` matches nothing"):
        parse_reply(reply, CURRENT)


def test_search_ambiguous_is_an_error():
    reply = edit("    return y", "    return y * 1")
    with pytest.raises(ReplyError, match=r"`return y` matches 2 places"):
        parse_reply(reply, CURRENT)


def test_incomplete_edit_block():
    reply = "<<<<<<< SEARCH\n    return y\n=======\n    return y * 1\n"
    with pytest.raises(ReplyError, match="incomplete"):
        parse_reply(reply, CURRENT)


def test_unclosed_fence_says_the_reply_may_be_cut_off():
    with pytest.raises(ReplyError, match="never closed"):
        parse_reply(f"```python\n{NEW_FILE[:200]}", CURRENT)


def test_syntax_error_gives_line_and_message():
    broken = NEW_FILE.replace("def kernel_fn(x):", "def kernel_fn(x)")
    line = broken.split("\n").index("def kernel_fn(x)") + 1
    with pytest.raises(
        ReplyError, match=f"not valid Python: line {line} " + r"\(`def kernel_fn\(x\)`\)"
    ):
        parse_reply(f"```python\n{broken}```", CURRENT)


def test_no_change_is_an_error():
    with pytest.raises(ReplyError, match="No change"):
        parse_reply(f"HYPOTHESIS: same\n```python\n{CURRENT}  \n```", CURRENT)
    with pytest.raises(ReplyError, match="No change"):
        parse_reply(edit("def kernel_fn(x):", "def kernel_fn(x):  "), CURRENT)


def test_missing_kernel_fn_is_an_error():
    renamed = NEW_FILE.replace("def kernel_fn(", "def run(")
    with pytest.raises(ReplyError, match="no longer defines kernel_fn"):
        parse_reply(f"```python\n{renamed}```", CURRENT)


def test_missing_or_changed_kernel_type_is_an_error():
    without = NEW_FILE.replace('KERNEL_TYPE = "softmax"\n', "")
    with pytest.raises(ReplyError, match="KERNEL_TYPE"):
        parse_reply(f"```python\n{without}```", CURRENT)
    changed = NEW_FILE.replace('"softmax"', '"rmsnorm"')
    with pytest.raises(ReplyError, match="must stay 'softmax'"):
        parse_reply(f"```python\n{changed}```", CURRENT)


def test_think_section_is_ignored():
    reply = (
        "<think>maybe\n```python\nprint('draft')\n```\nHYPOTHESIS: wrong one</think>\n"
        f"HYPOTHESIS: the real one\n```python\n{NEW_FILE}```"
    )
    assert parse_reply(reply, CURRENT) == (NEW_FILE, "the real one")


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("**HYPOTHESIS:** fewer\tloads,\n\nmore reuse", "fewer loads,"),
        ("Some intro.\nhypothesis - fuse the two passes\n", "fuse the two passes"),
        ("## Plan: use a   single pass\n```python\nx = 1\n```", "Plan: use a single pass"),
        ("```python\nHYPOTHESIS: in code\n```\nAfter the code.", "After the code."),
        ("HYPOTHESIS:\n\n  split the row  loop\n", "split the row loop"),
        ("```python\nx = 1\n```", NO_HYPOTHESIS),
    ],
)
def test_hypothesis_and_fallbacks(reply, expected):
    assert extract_hypothesis(reply) == expected


def test_fallback_hypothesis_is_truncated_and_skips_edit_blocks():
    reply = edit("a", "b") + "\n" + "word " * 100
    hypothesis = extract_hypothesis(reply)
    assert len(hypothesis) <= 120 and hypothesis.startswith("word word")


def test_a_hypothesis_carries_no_control_sequence_to_the_terminal():
    from autokernel.agents.replies import extract_hypothesis

    got = extract_hypothesis("HYPOTHESIS: wider tiles\x1b[2J\x1b]52;c;aGk=\x07 \u202edone")
    assert got.startswith("wider tiles") and "done" in got
    assert not any(c in got for c in ("\x1b", "\x07", "\u202e"))


def test_a_kernel_type_that_literal_eval_cannot_hash_is_an_error_not_a_crash():
    """ast.literal_eval raises TypeError on `{[]: 1}`; it ended the night, past the loop."""
    for value in ("{[]: 1}", "{{}}"):
        source = NEW_FILE.replace('"softmax"', value)
        reply = f"```python\n{source}```"
        with pytest.raises(ReplyError, match="KERNEL_TYPE must stay"):
            parse_reply(reply, CURRENT)
    # an unhashable BACKEND is no literal: the default backend, the harness judges the rest
    assert parse_reply(f"```python\n{NEW_FILE}BACKEND = {{[]: 1}}\n```", CURRENT)


def test_a_lone_surrogate_becomes_a_replacement_character():
    reply = f"HYPOTHESIS: wider\ud800 tiles\n```python\n{NEW_FILE}# \udc80\n```"
    source, hypothesis = parse_reply(reply, CURRENT)
    assert source.endswith("# \ufffd\n") and hypothesis == "wider\ufffd tiles"
    source.encode("utf-8")


@pytest.mark.parametrize(
    "reply",
    [
        "<think>\n" * 40_000,  # many openers never closed: the regex rescanned from each
        "```" + "a" * 40_000 + "`\n",  # one long fence line: overlapping repeats backtracked
        "```" + " " * 40_000 + "`x\n",
    ],
    ids=["unclosed-think", "long-fence-word", "long-fence-space"],
)
def test_hostile_replies_are_rejected_in_linear_time(reply):
    import time

    start = time.monotonic()
    with pytest.raises(ReplyError):
        parse_reply(reply, CURRENT)
    assert time.monotonic() - start < 2.0  # minutes before


def test_think_sections_of_either_tag_and_case_are_stripped_and_unclosed_ones_kept():
    reply = (
        "<think> a </think>keep1 <THINKING>b</thinking>keep2 <think>unclosed "
        "<thinking>c</Thinking>keep3"
    )
    from autokernel.agents.replies import _strip_thinking

    assert _strip_thinking(reply) == "keep1 keep2 <think>unclosed keep3"


def test_a_fence_info_string_gives_its_language():
    reply = f"```Python title=../reference.py\n{NEW_FILE}```\n```diff\n-x\n+y\n```"
    assert parse_reply(reply, CURRENT)[0] == NEW_FILE


def test_a_kernel_padded_past_the_limit_is_refused_every_prompt_would_carry_it():
    """A kept kernel padded with a 3 MB comment made every later request 0.8M tokens."""
    from autokernel.agents.replies import MAX_KERNEL_CHARS, MAX_REPLY_CHARS

    padded = NEW_FILE + "# " + "x" * MAX_KERNEL_CHARS + "\n"
    with pytest.raises(ReplyError, match="over the limit"):
        parse_reply(f"```python\n{padded}```", CURRENT)
    grown = CURRENT + "# " + "y" * MAX_KERNEL_CHARS + "\n"  # a long kernel may still grow a bit
    source, _ = parse_reply(f"```python\n{grown.replace('1024', '2048')}```", grown)
    assert "2048" in source
    with pytest.raises(ReplyError, match="characters, over the"):
        parse_reply("x" * (MAX_REPLY_CHARS + 1), CURRENT)
    thinking = f"<think>{'t' * MAX_REPLY_CHARS}</think>\n```python\n{NEW_FILE}```"
    assert parse_reply(thinking, CURRENT)[0] == NEW_FILE  # a long reasoning is no fault
