"""Seeing a run: a rich live panel on a terminal, one plain line per experiment with --quiet,
and always a timestamped log under .autokernel/ to read in the morning."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from autokernel.run import layout
from autokernel.run.results import ResultRow
from autokernel.run.state import State
from autokernel.secrets import redact

STYLE = {"keep": "green", "revert": "yellow", "fail": "red", "crash": "red", "timeout": "red",
         "rejected": "magenta"}  # fmt: skip


def _fmt(v: object, spec: str = ".3g") -> str:
    if v is None or v == "":
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


class RunView:
    """Implements the loop's Reporter. Start with `with RunView(...) as view:`."""

    def __init__(self, workspace: Path, quiet: bool, console: Console | None = None) -> None:
        self.console = console or Console(markup=False)  # names and reasons print as given
        self.quiet = quiet
        self.log_path = workspace / layout.RUN_LOG
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("a", encoding="utf-8")
        self.events: deque[str] = deque(maxlen=8)
        self.activity = ""
        self.state: State | None = None
        self.live: Live | None = None
        self.t0 = time.monotonic()
        self.written = 0  # experiments recorded since this view opened: the rate per hour
        self.workers: dict[str, tuple[str, float]] = {}  # parallel slot -> (activity, since)

    def __enter__(self) -> RunView:
        if not self.quiet:
            self.live = Live(self._render(), console=self.console, refresh_per_second=2,
                             transient=False)  # fmt: skip
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(None, None, None)
        self._log.close()

    # ---- Reporter ----

    def event(self, message: str) -> None:
        message = redact(message)  # a provider error may quote a key
        self._write(message)
        self.events.append(f"{time.strftime('%H:%M:%S')} {message}")
        if self.quiet:
            self.console.print(message, highlight=False, soft_wrap=True, markup=False)
        self._refresh()

    def phase(self, text: str) -> None:
        self.activity = text
        self._refresh()

    def experiment(self, row: ResultRow, note: str) -> None:
        line = (
            f"exp {row.experiment} [{row.target}] {row.status} "
            f"{_fmt(row.latency_us, '.1f')} µs "
            f"×eager {_fmt(row.speedup_vs_eager, '.3g')}"
            f" ×compile {_fmt(row.speedup_vs_compile, '.3g')} "
            f"harness {_fmt(row.harness_s, '.1f')} s — {row.description} ({note})"
        )
        line = redact(line)  # the description may quote a candidate's exception
        self.written += 1
        self._write(line)
        if self.quiet:
            self.console.print(line, highlight=False, soft_wrap=True, markup=False)
        else:
            self.events.append(f"{time.strftime('%H:%M:%S')} {line}")
        self._refresh()

    def update(self, state: State) -> None:
        self.state = state
        self._refresh()

    def worker(self, slot: str, text: str) -> None:
        """A parallel slot's activity; a new job restarts its clock, a phase does not."""
        now = time.monotonic()
        before, since = self.workers.get(slot, ("", now))
        same_job = before.split(":")[0] == text.split(":")[0] and text != "idle"
        self.workers[slot] = (text, since if same_job else now)
        self._refresh()

    def per_hour(self) -> float | None:
        """Experiments per hour since the view opened (this session), once there is one."""
        elapsed = time.monotonic() - self.t0
        return 3600.0 * self.written / elapsed if self.written and elapsed > 0 else None

    def log_exception(self, exc: BaseException) -> None:
        import traceback

        self._write("".join(traceback.format_exception(exc)))

    # ---- internals ----

    def _write(self, line: str) -> None:
        try:
            if self._log.closed:  # after the view closed: an error being reported
                self._log = self.log_path.open("a", encoding="utf-8")
            self._log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {redact(line)}\n")
            self._log.flush()
        except OSError:
            pass  # a full disk must not stop the run over a log line; results.tsv will complain

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._render())

    def _render(self) -> Group:
        parts: list = []
        s = self.state
        if s is not None:
            left = max(0.0, s.budget_s - s.seconds) / 60
            head = (f" {s.tag} · agent {s.agent} · experiment {s.next_experiment} · "
                    f"{left:.0f} min of budget left")  # fmt: skip
            if s.tokens:
                head += f" · {s.tokens} tokens"
            rate = self.per_hour()
            if rate is not None:
                head += f" · {rate:.0f} experiments/h"
            parts.append(Text.assemble(("autokernel run", "bold"), head))
            table = Table(box=None, pad_edge=False)
            for col in ("target", "status", "exps", "kept", "best µs", "×start", "×eager",
                        "×compile", "%peak"):  # fmt: skip
                table.add_column(col, justify="left" if col in ("target", "status") else "right")
            for ts in s.targets:
                b = ts.best
                table.add_row(
                    ts.name, ts.status if not ts.reason else f"done: {ts.reason}"[:48],
                    str(ts.experiments), str(ts.kept), _fmt(b.us if b else None, ".1f"),
                    _fmt(ts.speedup(), ".2f"), _fmt(b.speedup_vs_eager if b else None, ".2f"),
                    _fmt(b.speedup_vs_compile if b else None, ".2f"),
                    _fmt(b.pct_peak if b else None, ".0f"),
                )  # fmt: skip
            parts.append(table)
        if self.activity:
            parts.append(Text(f"▶ {self.activity}", style="cyan"))
        now = time.monotonic()
        for slot, (text, since) in sorted(self.workers.items()):
            busy = "" if text == "idle" else f" ({now - since:.0f} s)"
            parts.append(Text(f"  {slot}: {text}{busy}", style="cyan" if busy else "dim"))
        parts.extend(Text(e, style=_style(e)) for e in self.events)
        return Group(*parts)


def _style(line: str) -> str:
    for status, style in STYLE.items():
        if f"] {status} " in line:
            return style
    return "dim"
