"""The judge decides in a process that never imported the candidate: outputs reach it only as
plain tensors parsed from raw bytes, a claimed time is refused when the judge's own clock
disagrees, and replies it did not ask for are not believed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from autokernel.harness import benchmark, judge
from autokernel.harness.benchmark import check_timed, cross_check, wall_limit_us
from autokernel.harness.channel import (
    ChannelError,
    Reader,
    decode_tensor,
    encode_tensor,
    output_bound,
)
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.stages import MAIN, Evaluation, StageFailure
from autokernel.harness.verdict import Check, Status
from autokernel.specs import SPECS

CPU = torch.device("cpu")
SIZE = {"rows": 4, "cols": 64}


def test_an_output_travels_as_a_plain_tensor(tmp_path):
    for t in (torch.randn(3, 5).to(torch.bfloat16), torch.arange(6).reshape(2, 3),
              torch.tensor(2.5), torch.empty(0, 4)):  # fmt: skip
        header = encode_tensor(t, tmp_path, "out.bin")
        got = decode_tensor(header, tmp_path, CPU, 1 << 20)
        assert type(got) is torch.Tensor and got.dtype == t.dtype and got.shape == t.shape
        assert torch.equal(got, t)
        assert not (tmp_path / "out.bin").exists()  # read once, then gone


def test_a_subclass_is_refused_before_any_of_its_methods_runs(tmp_path):
    ran = []

    class Sneaky(torch.Tensor):
        def detach(self):
            ran.append("detach")
            return super().detach()

        def contiguous(self, *a, **k):
            ran.append("contiguous")
            return super().contiguous(*a, **k)

    with pytest.raises(TypeError, match="Sneaky"):
        encode_tensor(torch.zeros(3).as_subclass(Sneaky), tmp_path, "out.bin")
    assert not ran and not (tmp_path / "out.bin").exists()


@pytest.mark.parametrize(
    "change, match",
    [
        ({"nbytes": 8}, "needs 16 bytes"),
        ({"dtype": "object"}, "dtype"),
        ({"file": "../out.bin"}, "plain name"),
        ({"shape": [2, "2"]}, "shape"),
        ({"shape": [8]}, "needs 32 bytes"),
    ],
)
def test_a_header_that_does_not_match_its_bytes_is_refused(tmp_path, change, match):
    header = encode_tensor(torch.zeros(4), tmp_path, "out.bin")
    with pytest.raises(ChannelError, match=match):
        decode_tensor({**header, **change}, tmp_path, CPU, 1 << 20)


def test_a_sparse_output_far_past_the_expected_size_is_not_read(tmp_path):
    # 1 TiB claimed and backed by a sparse file of exactly that length: refused by its header,
    # before a byte is mapped, and the file is removed
    n = 1 << 38
    with (tmp_path / "out.bin").open("wb") as f:
        f.truncate(n * 4)
    header = {"file": "out.bin", "dtype": "float32", "shape": [n], "nbytes": n * 4}
    bound = output_bound((1024,), torch.float32)
    with pytest.raises(ChannelError, match="at most"):
        decode_tensor(header, tmp_path, CPU, bound)
    assert not (tmp_path / "out.bin").exists()
    assert 4096 < bound < 8 << 20


def test_a_file_of_the_wrong_length_is_refused(tmp_path):
    header = encode_tensor(torch.zeros(4), tmp_path, "out.bin")
    (tmp_path / "out.bin").write_bytes(b"\0" * 12)
    with pytest.raises(ChannelError, match="12 bytes"):
        decode_tensor(header, tmp_path, CPU, 1 << 20)


class FakeProcess:
    """A candidate's process as the judge sees it: each call costs `real_us` of wall time and
    the output is right unless `stale`."""

    def __init__(self, ev: Evaluation, size, dtype, real_us: float, stale: bool = False):
        self.ev, self.size, self.dtype, self.real_us, self.stale = ev, size, dtype, real_us, stale
        self.key: tuple = ()
        self.calls = 0

    def refill(self, key):
        self.key = key

    def batch(self, role, calls, check_at):
        t0 = time.monotonic()
        self.calls = calls
        time.sleep(calls * self.real_us * 1e-6)
        return time.monotonic() - t0

    def output(self):
        key = ("benchmark",) if self.stale else self.key
        args = self.ev.inputs(MAIN, self.size, self.dtype, *key, self.ev.spec.label(self.size))
        return self.ev.spec.reference(*args)


def reduce_eval() -> Evaluation:
    return Evaluation(SPECS["reduce"], CPU, seed=7)


def test_an_honest_claim_passes_the_judges_clock():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=20_000.0)
    cross_check(ev, proc, SIZE, torch.float32, claimed_us=20_000.0)
    assert proc.calls >= benchmark.BATCH_CALLS[False][0]


def test_a_claim_far_below_the_judges_clock_is_rejected():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=20_000.0)
    with pytest.raises(StageFailure) as info:
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=0.5)
    failure = info.value
    assert failure.status is Status.REJECTED and failure.check.stage == "benchmark"
    assert "claimed 0.5 us per call" in failure.check.message
    assert "not believed" in failure.check.message


class LoadedOnceProcess(FakeProcess):
    """Honest, but its first batch lands on a loaded host: `slow_us` per call there."""

    def __init__(self, *args, slow_us: float, slow_batches: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.slow_us, self.slow_left, self.batches = slow_us, slow_batches, 0

    def batch(self, role, calls, check_at):
        self.batches += 1
        real, self.slow_left = (
            (self.slow_us if self.slow_left > 0 else self.real_us),
            self.slow_left - 1,
        )
        self.calls = calls
        time.sleep(calls * real * 1e-6)
        return calls * real * 1e-6 + benchmark.IPC_ALLOWANCE_S[False]


def test_a_batch_slowed_by_load_is_timed_again_before_a_claim_is_refused():
    ev = reduce_eval()
    proc = LoadedOnceProcess(ev, SIZE, torch.float32, real_us=300.0, slow_us=5_000.0)
    per_call = cross_check(ev, proc, SIZE, torch.float32, claimed_us=300.0)
    assert proc.batches == 2 and per_call == pytest.approx(300.0, rel=0.01)


def test_a_claim_every_batch_contradicts_is_refused():
    ev = reduce_eval()
    proc = LoadedOnceProcess(ev, SIZE, torch.float32, real_us=300.0, slow_us=5_000.0,
                             slow_batches=benchmark.CROSS_CHECK_BATCHES)  # fmt: skip
    with pytest.raises(StageFailure, match="not believed"):
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=300.0)
    assert proc.batches == benchmark.CROSS_CHECK_BATCHES


def test_a_stale_output_in_the_batch_is_rejected_as_a_cache():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=100.0, stale=True)
    with pytest.raises(StageFailure, match="cached output") as info:
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=100.0)
    assert info.value.status is Status.REJECTED


@pytest.mark.parametrize("claimed", [float("nan"), 0.0, -3.0])
def test_a_claim_that_is_not_a_time_is_rejected(claimed):
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=100.0)
    with pytest.raises(StageFailure, match="not a time"):
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=claimed)


def test_the_wall_limit_leaves_room_for_a_host_bound_kernel(monkeypatch):
    # do_bench's flush hides up to its own duration of launch cost: a kernel whose do_bench
    # median is 8 us may take the flush's 70 us plus that per call back to back.
    monkeypatch.setattr(benchmark, "flush_us", lambda: 70.0)
    assert wall_limit_us(8.0, on_gpu=True) >= 8.0 + 70.0
    assert wall_limit_us(0.5, on_gpu=True) < 110.0  # a 0.5 us claim for a 120 us kernel fails


FAKE_REPLIES = """
import os
KERNEL_TYPE = 'reduce'

# Guards off: find the channel to the judge and write replies ahead of its requests.
for fd in map(int, os.listdir('/proc/self/fd')):
    if fd > 2 and os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):
        try:
            os.write(fd, b'{"ok": true}\\n' * 50)
        except OSError:
            pass

def kernel_fn(x):
    return x.float().sum(-1).to(x.dtype)
"""


@pytest.mark.slow
def test_replies_written_ahead_of_the_judges_requests_are_not_believed(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(FAKE_REPLIES)
    v = evaluate(path, Options(guards=False, timing=False, compile_baseline=False, seed=1))
    assert v.status is Status.REJECTED, v.message
    assert "reply the judge cannot read" in v.message


@pytest.mark.slow
def test_the_judge_never_imports_the_candidate(tmp_path):
    path = Path(tmp_path) / "kernel.py"
    path.write_text("KERNEL_TYPE = 'reduce'\nraise RuntimeError('imported')\n")
    import sys

    before = set(sys.modules)
    v = evaluate(path, Options(guards=False, timing=False, compile_baseline=False))
    assert v.status is Status.CRASH and "imported" in v.message
    assert not [m for m in set(sys.modules) - before if "candidate" in m]


INFLATE_BASELINE = """
import sys
import torch
import triton
import triton.language as tl

KERNEL_TYPE = 'reduce'

# Guards off: make the eager baseline read a million times slower in this process.
for _name, _module in list(sys.modules.items()):
    if _name.startswith('autokernel.harness') and hasattr(_module, 'lookup'):
        _real = _module.lookup
        _module.lookup = lambda *a, _real=_real: (_real(*a) or 1.0) * 1e6
"""


@pytest.mark.slow
def test_speedups_use_baselines_read_before_the_candidate_ran(tmp_path):
    body = (Path(__file__).parent / "faults" / "forge_sys_modules_timing.py").read_text()
    kernel = INFLATE_BASELINE + body[body.index("@triton.jit") - 2 :]
    path = tmp_path / "kernel.py"
    path.write_text(kernel)
    opts = Options(guards=False, quick=True, compile_baseline=False, seed=1, prestart=False)
    v = evaluate(path, opts)
    assert v.status is Status.PASS, v.message
    [t] = v.timings
    assert t.eager_us is not None and t.speedup_vs_eager is not None
    assert t.speedup_vs_eager < 1e3, f"a forged baseline was believed: {t}"


class PipeWorker:
    """Just enough of prestart.Worker for a Link: a process whose replies we write ourselves."""

    def __init__(self, tmp_path: Path):
        import os
        import subprocess
        import sys

        self.work = tmp_path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self.read_fd, self.write_fd = os.pipe()

    def ready(self) -> bool:
        return True

    def inside(self, msg: dict) -> dict:
        return msg


def test_a_reply_must_echo_the_request_it_answers(tmp_path):
    import os

    from autokernel.harness.judge import Link

    worker = PipeWorker(tmp_path)
    try:
        link = Link(worker, (5.0, 5.0), lambda p: None, lambda: None)  # type: ignore[arg-type]
        link.reader.fd = worker.read_fd
        link.seq = "1234abcd"
        os.write(worker.write_fd, b'{"ok": true}\n')  # written ahead: no request number
        with pytest.raises(ChannelError, match="no request"):
            link.reply()
        os.write(worker.write_fd, b'{"ok": true, "seq": "1234abcd"}\n')
        assert link.reply() == {"ok": True}
    finally:
        worker.proc.kill()
        worker.proc.wait()


@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000, b'{"a": ' + b"[" * 50 + b"]" * 50 + b"}", b"[1, 2]", b"not json"],
    ids=["past the parser's stack", "deeper than any reply", "not an object", "not json"],
)
def test_a_reply_line_of_any_shape_is_a_channel_error_never_a_crash(tmp_path, line):
    """A worker that writes its own lines (its process is the candidate's) must not be able to
    raise anything but ChannelError in the judge: RecursionError or TypeError there ended the
    whole run."""
    path = tmp_path / "channel"
    path.write_bytes(line + b"\n")  # a file, not a pipe: a long line would fill a pipe's buffer
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ChannelError):
            Reader(fd).line(time.monotonic() + 5)
    finally:
        os.close(fd)


def test_a_reply_status_that_is_no_status_is_a_channel_error():
    with pytest.raises(ChannelError, match="status"):
        judge._fault({"status": ["CRASH"]}, Check("smoke", "", "", False))


class SampledProcess(FakeProcess):
    """Timed outputs kept by the worker: from the checked call's inputs and from a refill;
    the refilled one stale (computed on the checked call's values) unless honest."""

    def __init__(self, ev: Evaluation, size, dtype, honest: bool):
        super().__init__(ev, size, dtype, real_us=10.0)
        self.honest = honest

    def timed_outputs(self, role=0):
        label = self.ev.spec.label(self.size)
        own = self.ev.spec.reference(
            *self.ev.inputs(MAIN, self.size, self.dtype, "benchmark", label)
        )
        refill = ("fresh", 0, 2, label)
        shown = refill if self.honest else ("benchmark", label)
        other = self.ev.spec.reference(*self.ev.inputs(MAIN, self.size, self.dtype, *shown))
        return [(None, own), (refill, other)]


@pytest.mark.parametrize("honest", [True, False])
def test_timed_outputs_are_judged_against_the_inputs_they_came_from(honest):
    ev = reduce_eval()
    size = ev.spec.sizes(False).bench[0]
    proc = SampledProcess(ev, size, torch.float32, honest)
    label = ev.spec.label(size)
    if honest:
        check_timed(ev, proc, size, torch.float32, ("benchmark", label))
        return
    with pytest.raises(StageFailure) as caught:
        check_timed(ev, proc, size, torch.float32, ("benchmark", label))
    assert caught.value.status is Status.REJECTED
    assert "timed call" in caught.value.check.message


def _smoke_with(seconds: float) -> Evaluation:
    ev = reduce_eval()

    def call(c):
        args = ev.inputs(c.make, c.size, c.dtype, *c.key)
        return ev.spec.reference(*args).to(c.out_dtype), seconds

    ev.call = call
    return ev


def test_a_correct_interpreter_kernel_at_a_model_size_passes_smoke():
    """Inductor's own reduction over a non-last dim takes seconds per call in the interpreter
    (one program per output row): the CPU smoke limit must not call it broken."""
    from autokernel.harness.stages import _stage_smoke

    assert all(c.ok for c in _stage_smoke(_smoke_with(8.5)))
    with pytest.raises(StageFailure, match="broken or serialized"):
        _stage_smoke(_smoke_with(60.0))


def test_a_generic_region_with_an_integer_output_is_judged():
    """An integer cumsum (or an argmax) is a generic target whose output is int64: the judge
    names that dtype to the candidate's process, which must take it, not crash on it."""
    import types

    from autokernel.harness.local import LocalProcess
    from autokernel.harness.stages import _stage_smoke
    from autokernel.model.capture import capture
    from autokernel.specs.generic import generic_spec

    ids = torch.randint(0, 10, (4, 32), generator=torch.Generator().manual_seed(0))
    region = capture(lambda t: torch.cumsum(t, dim=-1), [ids], "cumsum")
    spec = generic_spec(region.to_dict())
    module = types.ModuleType("trusted")
    module.kernel_fn = lambda t: torch.cumsum(t, dim=-1)
    proc = LocalProcess(spec, [module], CPU, seed=3)
    proc.session.monitor = False  # a torch op stands in for a Triton kernel here
    ev = proc.evaluation()
    checks = _stage_smoke(ev)
    assert all(c.ok for c in checks) and spec.out_dtype(spec.dtypes[0]) == torch.int64
