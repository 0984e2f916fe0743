"""The `autokernel` command line: every command, thin over the library.

One module per command group (bench.py: bench, gpu; run.py: run, status; profile.py;
verify.py; report.py), registered below in the order a user meets them; errors.py turns our
exceptions into one message style and exit code; the drawing is autokernel.views'.
"""

from __future__ import annotations

from autokernel.cli import bench, profile, report, run, verify
from autokernel.cli.app import app

app.command("bench")(bench.bench)
app.command("gpu")(bench.gpu)
app.command("run")(run.run)
app.command("status")(run.status)
app.command("profile")(profile.profile_command)
app.command("verify")(verify.verify_command)
app.command("report")(report.report_command)

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
