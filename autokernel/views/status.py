"""`autokernel status` (and `python orchestrate.py status`): plain text, readable over ssh and
in a log, one line per target."""

from __future__ import annotations

from autokernel.run.state import State


def status_lines(state: State) -> list[str]:
    """Plain text for `status`: readable over ssh and in a log."""
    left = max(0.0, state.budget_s - state.seconds)
    lines = [
        f"run {state.tag} · agent {state.agent} · experiments {state.next_experiment} · "
        f"{state.seconds / 3600:.2f} h of {state.hours:g} h used ({left / 60:.0f} min left)"
        + (f" · tokens {state.tokens}" if state.tokens else "")
        + (f" · {len(state.queue)} proposed, not yet written" if state.queue else ""),
    ]
    if state.ended:
        lines.append(f"last stop: {state.ended}")
    header = f"{'target':<20} {'status':<8} {'exps':>5} {'kept':>5} {'best µs':>10} "
    lines.append(header + f"{'×start':>7} {'×eager':>7} {'×compile':>8} {'%peak':>6}  note")
    for ts in sorted(state.targets, key=lambda t: -t.target.share):
        b = ts.best

        def fmt(v: float | None, spec: str) -> str:
            return format(v, spec) if v is not None else "-"

        lines.append(
            f"{ts.name:<20} {ts.status:<8} {ts.experiments:>5} {ts.kept:>5} "
            f"{fmt(b.us if b else None, '.1f'):>10} {fmt(ts.speedup(), '.2f'):>7} "
            f"{fmt(b.speedup_vs_eager if b else None, '.3g'):>7} "
            f"{fmt(b.speedup_vs_compile if b else None, '.3g'):>8} "
            f"{fmt(b.pct_peak if b else None, '.0f'):>6}  {ts.reason}"
        )
    return lines
