"""How a command ends when something is wrong: one map from our exception types to the exit
code, and one message style (`error: message`, redacted, on stderr) for all of them.

    0  done (bench: PASS; verify: every output matched)
    1  the check ran and said no (a FAIL verdict, a mismatch), or there is no run to show
    2  the input cannot be used (an option, a file, a model, a workspace): nothing was done
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from autokernel.secrets import redact
from autokernel.views.console import error_text, output_console

EXIT_NO = 1
EXIT_USAGE = 2

# "module:Class" -> exit code. Named, not imported: a command that never loaded a module (and
# its torch) cannot have raised its exception, so `handled` only looks at loaded modules.
ERRORS: dict[str, int] = {
    "autokernel.harness.sandbox:KernelFileError": EXIT_USAGE,  # bench: the kernel file
    "autokernel.session:SessionError": EXIT_USAGE,  # run: options, plan, workspace, agent
    "autokernel.model.loading:ModelInputError": EXIT_USAGE,  # profile, verify: the model
    "autokernel.mode:ModeError": EXIT_USAGE,  # verify: --mode
    "autokernel.model.verify.verifier:VerifyError": EXIT_USAGE,  # verify: kernels, options
    "autokernel.report:ReportError": EXIT_USAGE,  # report: the workspace, the outputs
    "autokernel.run.state:StateError": EXIT_NO,  # status: the state file is damaged
}


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print the error line; the caller raises what this returns (`raise fail(...)`)."""
    output_console(stderr=True).print(error_text(redact(message)), soft_wrap=True)
    return typer.Exit(code)


def exit_code(exc: BaseException) -> int | None:
    """The exit code ERRORS gives the exception's type, None for one that is not ours."""
    for name, code in ERRORS.items():
        module, _, cls = name.partition(":")
        loaded = sys.modules.get(module)
        kind = getattr(loaded, cls, None) if loaded is not None else None
        if isinstance(kind, type) and isinstance(exc, kind):
            return code
    return None


@contextmanager
def handled() -> Iterator[None]:
    """Run a command's body: our exceptions become their message and exit code; anything else
    is a bug and keeps its traceback."""
    try:
        yield
    except Exception as exc:
        code = exit_code(exc)
        if code is None:
            raise
        raise fail(str(exc), code) from None
