"""The judge decides in a process that never imported the candidate: outputs reach it only as
plain tensors parsed from raw bytes, and replies it did not ask for are not believed. What it
believes of a claimed time is in test_judge_timing.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from autokernel.harness import judge
from autokernel.harness.channel import (
    ChannelError,
    Reader,
    decode_tensor,
    encode_tensor,
    output_bound,
)
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Check, Status

CPU = torch.device("cpu")


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
