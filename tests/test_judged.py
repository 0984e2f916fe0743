"""verify and the API import kernels into the user's own process: only files a PASS verdict of
the workspace recorded (by the sha256 of their bytes), and only if they pass the guard now."""

from __future__ import annotations

from pathlib import Path

import pytest

from autokernel import api
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status, Verdict
from autokernel.judged import (
    TRUST_ENV,
    UnjudgedKernel,
    passed_hashes,
    require_judged,
    sha256_of,
)
from autokernel.model.verify.verifier import VerifyError, collect_kernels
from autokernel.run.results import ResultsLog

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.fixture(autouse=True)
def _no_trust(monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)


def tuned_softmax() -> str:
    """A starter changed the way a run changes it: not byte-identical to any shipped file."""
    return (KERNELS / "softmax.py").read_text() + "\n# tuned overnight\n"


def workspace(
    tmp_path: Path, source: str, status: Status | None, agent: str = "tuner"
) -> tuple[Path, Path]:
    """optimized/softmax.py holding `source`, and (unless status is None) a verdict of that
    status recording the file's hash and its results row naming `agent`, as the run writes
    them."""
    ws = tmp_path / "ws"
    (ws / "optimized").mkdir(parents=True)
    path = ws / "optimized" / "softmax.py"
    path.write_text(source)
    verdicts = ws / ".autokernel" / "verdicts"
    verdicts.mkdir(parents=True)
    if status is not None:
        Verdict(status, "softmax", str(path), sha256=sha256_of(path)).write(verdicts / "3.json")
        ResultsLog(ws / "results.tsv").append(
            {"experiment": 3, "status": "keep", "target": "softmax", "agent": agent}
        )
    return ws, path


def test_a_file_a_pass_verdict_recorded_loads(tmp_path):
    ws, _ = workspace(tmp_path, tuned_softmax(), Status.PASS)
    kernels, _, _ = collect_kernels(ws)
    assert [k.kernel_type for k in kernels] == ["softmax"]


def test_a_file_changed_after_its_verdict_is_refused(tmp_path):
    ws, path = workspace(tmp_path, tuned_softmax(), Status.PASS)
    path.write_text(path.read_text().replace("# tuned overnight", "# tuned overnight!"))
    with pytest.raises(VerifyError, match="no PASS verdict recorded this exact file") as err:
        collect_kernels(ws)
    assert TRUST_ENV in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("status", [Status.FAIL, Status.REJECTED, None])
def test_a_file_without_a_pass_verdict_is_refused(tmp_path, status):
    ws, _ = workspace(tmp_path, tuned_softmax(), status)
    with pytest.raises(VerifyError, match="no PASS verdict"):
        collect_kernels(ws)


def test_the_api_refuses_it_too(tmp_path):
    ws, _ = workspace(tmp_path, tuned_softmax(), None)
    with pytest.raises(VerifyError, match="no PASS verdict"):
        api.load_kernels(ws)


def test_a_forged_verdict_does_not_let_a_guarded_construct_through(tmp_path):
    # A PASS verdict for this hash could only have been written by something other than the
    # harness: the static check runs again and refuses the rebinding.
    source = tuned_softmax() + "torch.Tensor.allclose = lambda *a, **k: True\n"
    ws, _ = workspace(tmp_path, source, Status.PASS)
    with pytest.raises(VerifyError, match="fails the static guard now"):
        collect_kernels(ws)


def test_shipped_starters_need_no_verdict(tmp_path):
    ws, _ = workspace(tmp_path, (KERNELS / "softmax.py").read_text(), None)
    assert len(collect_kernels(ws)[0]) == 1


def test_a_judged_file_that_builds_native_code_needs_the_users_word(tmp_path, monkeypatch):
    """A PASS says the C++ it builds behaved in the sandbox, not what it does in the user's
    process: a static constructor there read the user's key and wrote it to disk. The guard
    refuses torch's extension builder itself now (CUDA kernels build device code only, through
    autokernel.cuda_build); judged.builds_native_code stays behind it."""
    source = tuned_softmax() + "from torch.utils.cpp_extension import load_inline  # noqa\n"
    ws, _ = workspace(tmp_path, source, Status.PASS)
    with pytest.raises(VerifyError, match="load_inline") as err:
        collect_kernels(ws)
    assert TRUST_ENV in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv(TRUST_ENV, "1")
    kernels, _, _ = collect_kernels(ws)
    assert [k.kernel_type for k in kernels] == ["softmax"]


def test_the_escape_hatch_loads_an_unjudged_file(tmp_path, monkeypatch):
    ws, path = workspace(tmp_path, tuned_softmax(), None)
    with pytest.raises(UnjudgedKernel):
        require_judged(path)
    monkeypatch.setenv(TRUST_ENV, "1")
    assert len(collect_kernels(ws)[0]) == 1


def test_every_verdict_records_the_hash_of_the_bytes_it_judged(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("import os\nKERNEL_TYPE = 'softmax'\ndef kernel_fn(x):\n    return x\n")
    v = evaluate(path, Options(prestart=False))
    assert v.status is Status.REJECTED
    assert v.sha256 == sha256_of(path) and len(v.sha256) == 64
    assert Verdict.from_json(v.to_json()).sha256 == v.sha256


def test_the_verify_command_refuses_in_one_line_with_exit_2(tmp_path):
    import typer
    from typer.testing import CliRunner

    from autokernel.cli.verify import verify_command

    app = typer.Typer()
    app.command("verify")(verify_command)
    app.callback()(lambda: None)
    ws, _ = workspace(tmp_path, tuned_softmax(), None)
    model = Path(__file__).parents[1] / "examples" / "single_op.py"
    res = CliRunner().invoke(app, ["verify", str(model), "-w", str(ws), "--device", "cpu"])
    assert res.exit_code == 2, res.output
    assert "no PASS verdict" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_a_real_run_leaves_kernels_that_verify_accepts(tmp_path):
    import os
    import subprocess
    import sys

    ws = tmp_path / "ws"
    run = subprocess.run(
        [sys.executable, "-m", "autokernel.cli", "run", "--kernel", "reduce",
         "--max-experiments", "2", "--quick", "--quiet", "--workspace", str(ws)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    hashes = {Verdict.read(p).sha256 for p in (ws / ".autokernel" / "verdicts").glob("*.json")}
    assert len(hashes) >= 1 and all(len(h) == 64 for h in hashes)
    kernels, origin, _ = collect_kernels(ws)  # the run's own kept kernel: judged, so it loads
    assert [k.kernel_type for k in kernels] == ["reduce"], origin
    assert sha256_of(kernels[0].path) in passed_hashes(ws)  # by its verdict, not as a starter


def test_without_a_gpu_an_llms_judged_kernel_needs_the_users_word(tmp_path, monkeypatch):
    """Under Triton's interpreter a kernel's loads and stores take raw host addresses: an LLM's
    kernel, judged or not, would read and write the user's process (the red team read a bytes
    object's contents that way). The tuner's kernels are our own code and still load."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ws, _ = workspace(tmp_path, tuned_softmax(), Status.PASS, agent="openai")
    with pytest.raises(VerifyError, match="interpreter") as err:
        collect_kernels(ws)
    assert TRUST_ENV in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a GPU machine: the PASS verdict is enough
    assert len(collect_kernels(ws)[0]) == 1
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ws2, _ = workspace(tmp_path / "tuned", tuned_softmax(), Status.PASS, agent="tuner")
    assert len(collect_kernels(ws2)[0]) == 1
