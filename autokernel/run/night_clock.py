"""The night's time spent, durable between state saves.

State.seconds is charged when an experiment's row is written, so an evaluation (or an agent's
reply) cut short by `kill -9` or a power loss would never count against --hours, and each kill
would let a resumed night run one evaluation longer. While a loop runs, a heartbeat thread
writes the total spent so far to .autokernel/heartbeat.json every HEARTBEAT_S seconds; a resume
charges what the heartbeat records beyond what the state holds. Both are totals of the same
clock, so taking the larger of the two never counts a second twice, however often the night is
killed and resumed. The file names the run it belongs to, so that a new run never inherits an
older one's time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autokernel.cache import read_json, write_json_atomic
from autokernel.run import layout
from autokernel.run.state import State, TargetState, new_run_id

# Lost to a kill at most, and one small atomic write per period: cheap beside an evaluation.
HEARTBEAT_S = 5.0


def recorded_seconds(state: State, root: Path) -> float:
    """The night's time spent as the files record it: the state's, or the heartbeat's where
    the heartbeat is of this run and got further (the state is behind after a kill)."""
    beat = read_json(Path(root) / layout.HEARTBEAT)
    seconds = beat.get("seconds")
    if state.run_id and beat.get("run") == state.run_id and isinstance(seconds, int | float):
        return max(state.seconds, float(seconds))
    return state.seconds


class NightClock:
    """The loop's clock of the night: what is spent (charged and not yet), charged to a target
    when an experiment's row is written, and kept on disk by the heartbeat while it runs."""

    def __init__(self, state: State, root: Path, clock: Callable[[], float]) -> None:
        if not state.run_id:  # a state written before runs had one: no heartbeat is its
            state.run_id = new_run_id()
        self.state, self.root, self._clock = state, Path(root), clock
        # (state.seconds, the clock at that instant): one tuple, replaced whole, so that the
        # heartbeat thread never reads a total from one charge and a mark from the next.
        self._charged = (state.seconds, clock())
        self._stop = threading.Event()

    def spent(self) -> float:
        """Seconds of the night's budget spent, including what no row has been charged yet."""
        seconds, mark = self._charged
        return seconds + self._clock() - mark

    def charge(self, ts: TargetState) -> None:
        """Charge the time since the last charge to `ts` (its visit's clock too) and the night."""
        now = self._clock()
        elapsed = now - self._charged[1]
        ts.seconds += elapsed
        ts.round_seconds += elapsed
        self.state.seconds += elapsed
        self._charged = (self.state.seconds, now)

    def recover(self, event: Callable[[str], None]) -> None:
        """Charge what an interrupted session spent after its last state save (the heartbeat
        holds it): to the target it was working on, and to the night."""
        extra = recorded_seconds(self.state, self.root) - self.spent()
        if extra <= 0:
            return
        s = self.state
        name = s.in_flight.target if s.in_flight else s.current
        for ts in s.targets:
            if ts.name == name:
                ts.seconds += extra
                ts.round_seconds += extra
        s.seconds += extra
        self._charged = (s.seconds, self._charged[1])
        event(f"counted {extra / 60:.1f} min that the interrupted session spent after its last "
              "saved step against --hours")  # fmt: skip

    def beat(self) -> None:
        """Write the time spent now; a full disk is said by the next state save, not here."""
        try:
            write_json_atomic(
                self.root / layout.HEARTBEAT, {"run": self.state.run_id, "seconds": self.spent()}
            )
        except OSError:
            pass

    @contextmanager
    def beating(self) -> Iterator[None]:
        """The heartbeat, from a first beat now to a last one when the block ends however it
        ends (a signal, an error); only a kill leaves the last period unwritten."""
        self._stop.clear()
        thread = threading.Thread(target=self._beat_until_stopped, daemon=True,
                                  name="autokernel-heartbeat")  # fmt: skip
        self.beat()
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()
            self.beat()

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.beat()
