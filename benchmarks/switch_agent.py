"""An LLM-free agent for `autokernel run --backend any --agent command`: every reply switches
the target to the other backend's shipped starter, as the briefing shows it. It proves the
switch path end to end (briefing, reply parsing, commit, both backends judged) on a GPU without
any model:

    autokernel run --kernel rmsnorm --backend any --max-experiments 3 --agent command \\
        --agent-command "python benchmarks/switch_agent.py" --workspace WS

Reads the prompt on stdin, writes the reply on stdout; exits 1 when the prompt shows no other
starter (a run that does not allow switching, or a machine without a GPU).
"""

from __future__ import annotations

import re
import sys

HEADING = "## The shipped starter of the other backend"
FENCE = re.compile(r"^(`{3,})python\n(.*?)^\1$", re.S | re.M)


def reply(prompt: str) -> str | None:
    """The reply that switches to the starter shown under HEADING, or None when none is."""
    at = prompt.rfind(HEADING)
    if at < 0:
        return None
    block = FENCE.search(prompt, at)
    if block is None:
        return None
    backend = re.search(r'^BACKEND = "(\w+)"', block.group(2), re.M)
    name = backend.group(1) if backend else "the other backend"
    ticks = block.group(1)
    return (f"HYPOTHESIS: the shipped {name} starter, to compare the backends on this target\n"
            f"{ticks}python\n{block.group(2)}{ticks}\n")  # fmt: skip


def main() -> int:
    text = reply(sys.stdin.read())
    if text is None:
        print("switch_agent: the prompt shows no other backend's starter", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
