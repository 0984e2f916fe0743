"""The driver's view of its slots: which are busy with what since when, and how each one timed
the current best kernel of a target visit (parallel_keep.judge_slots decides ok, slow, broken).

A visit is (target, round): a revisit starts from a re-measured best, so slots are checked
again; so is a slot whose worker was lost (its replacement may be another GPU or node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from autokernel.run.parallel_keep import Calibration, SlotVerdict, judge_slots

Visit = tuple[str, int]  # (target name, round)


@dataclass
class SlotBoard:
    slots: list[str]
    busy: dict[str, tuple[str, float]] = field(default_factory=dict)  # slot -> (job key, since)
    readings: dict[Visit, dict[str, Calibration]] = field(default_factory=dict)
    status: dict[Visit, dict[str, SlotVerdict]] = field(default_factory=dict)

    def usable(self, visit: Visit | None) -> list[str]:
        """Slots not quarantined for this visit (a broken one never gets its jobs)."""
        marks = self.status.get(visit, {}) if visit else {}
        return [s for s in self.slots if getattr(marks.get(s), "status", "ok") != "broken"]

    def free(self, visit: Visit | None) -> list[str]:
        return [s for s in self.usable(visit) if s not in self.busy]

    def take(self, slot: str, key: str) -> None:
        assert slot not in self.busy, f"{slot} is busy with {self.busy[slot][0]}"
        self.busy[slot] = (key, time.monotonic())

    def release(self, slot: str) -> tuple[str | None, float]:
        """The job key the slot was running and its seconds, freeing it."""
        key, since = self.busy.pop(slot, (None, time.monotonic()))
        return key, time.monotonic() - since

    def needs_calibration(self, slot: str, visit: Visit) -> bool:
        """Only where there are others to compare it with."""
        return len(self.slots) > 1 and slot not in self.readings.get(visit, {})

    def calibrating(self, visit: Visit) -> bool:
        """A calibration of this visit is still running somewhere."""
        return any(key == calibration_key(visit) for key, _ in self.busy.values())

    def record(self, visit: Visit, reading: Calibration) -> list[SlotVerdict]:
        """Add a reading; the slots whose verdict changed with it (for the log)."""
        self.readings.setdefault(visit, {})[reading.slot] = reading
        verdicts = judge_slots(list(self.readings[visit].values()))
        if all(v.status == "broken" for v in verdicts):  # the kernel, not the GPUs: keep them
            verdicts = [SlotVerdict(v.slot, "ok", None, v.note) for v in verdicts]
        before = self.status.get(visit, {})
        self.status[visit] = {v.slot: v for v in verdicts}
        return [v for v in verdicts if getattr(before.get(v.slot), "status", None) != v.status]

    def slot_status(self, visit: Visit, slot: str | None) -> str:
        mark = self.status.get(visit, {}).get(slot or "")
        return mark.status if mark else "ok"

    def forget(self, slot: str) -> None:
        """A lost worker's replacement is checked again before its next candidate."""
        for readings in self.readings.values():
            readings.pop(slot, None)


def calibration_key(visit: Visit) -> str:
    return f"cal:{visit[0]}:{visit[1]}"


def parse_calibration_key(key: str) -> Visit | None:
    if not key.startswith("cal:"):
        return None
    _, name, rounds = key.rsplit(":", 2)
    return name, int(rounds)
