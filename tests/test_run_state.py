"""The run's state file: typed in memory, plain JSON on disk, and a file written before the
parallel queue was typed (its entries plain objects with the same keys) still resumes."""

from __future__ import annotations

import json

from loop_helpers import single

from autokernel.run.state import InFlight, Queued, load, new_state, save


def test_queued_proposals_round_trip_as_typed_records(tmp_path):
    state = new_state("t", "tuner", 1.0, [single("softmax")])
    entry = Queued(3, "softmax", "tuner", 0, "four warps", "kernel", config={"num_warps": 4})
    state.queue.append(Queued(4, "softmax", "tuner", 0, "-", "invalid", why="no code"))
    state.in_flight = InFlight(3, "softmax", "four warps", "tuner", 0, queued=True, entry=entry)
    save(state, tmp_path)
    back = load(tmp_path)
    assert back.queue == state.queue and isinstance(back.queue[0], Queued)
    assert back.in_flight == state.in_flight and isinstance(back.in_flight.entry, Queued)


def test_a_state_file_with_plain_queue_entries_loads(tmp_path):
    save(new_state("t", "tuner", 1.0, [single("softmax")]), tmp_path)
    path = next(tmp_path.rglob("state.json"))
    data = json.loads(path.read_text())
    old = {"experiment": 2, "target": "softmax", "agent": "tuner", "tokens": 0,
           "hypothesis": "h", "kind": "kernel", "why": "", "base": None, "base_score": None,
           "config": None, "evaluated": True, "worker": "gpu0", "lost": ["killed"]}  # fmt: skip
    data["queue"] = [old]
    path.write_text(json.dumps(data))
    (entry,) = load(tmp_path).queue
    assert entry.evaluated and entry.worker == "gpu0" and entry.lost == ["killed"]
