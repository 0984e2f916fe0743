"""The judge: decides a verdict in a process that never imported candidate code.

It runs in the sandbox's process (the parent of every worker). It drives the five stages and
the benchmark, asking the worker for one call, timing or batch at a time (serve.py) and reading
only plain copies of outputs back (channel.py). Inputs it rebuilds from the seed, references it
computes itself, in float64 on the kernel's device (a GPU reference at GPU sizes takes
milliseconds where the CPU takes minutes); timings it cross-checks with its own clock.

Why the parent and not a judge process of its own: the parent is already trusted and already
holds torch, so judging costs no process start-up per evaluation (the goal is <= 0.3 s of
sandbox overhead); on a GPU it creates one CUDA context, once per run, and it hands its cached
memory back after each evaluation so the worker's timing never competes with it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import torch

from autokernel.harness.benchmark import PEAK_FIELDS, Peaks, bench_sizes, geomean, time_candidate
from autokernel.harness.channel import (
    ChannelError,
    Reader,
    decode_tensor,
    output_bound,
    read_untrusted,
    send,
)
from autokernel.harness.interleave import ROLES, Comparison, compare_kernels
from autokernel.harness.prestart import Worker
from autokernel.harness.stages import Call, Evaluation, StageFailure, run_stages
from autokernel.harness.untrusted_text import printable
from autokernel.harness.verdict import STAGES, Check, StageResult, Status, Verdict
from autokernel.specs import KernelSpec, parse_dtype, resolve
from autokernel.specs.base import dtype_name
from autokernel.timing import Measurement, clock_name

FAULTS = {"CRASH": Status.CRASH, "REJECTED": Status.REJECTED, "FAIL": Status.FAIL}
UNTIMED_PHASES = ("", "start-up", "baselines")  # before the candidate's limit starts
MAX_SAMPLED = 8  # sampled timed outputs fetched per measurement (the worker keeps 3)
PHASE_BYTES = 200  # the longest phase name the worker writes is far shorter


class Link:
    """Request and reply with one worker, under the evaluation's time limits, keeping the
    phase (for the live view, the timeout message, and where the time went)."""

    def __init__(
        self, worker: Worker, limits: tuple[float, float], on_phase: Callable[[str], None],
        tick: Callable[[], None],
    ) -> None:  # fmt: skip
        assert worker.proc.stdout is not None
        self.worker, self.on_phase, self.tick = worker, on_phase, tick
        self.reader = Reader(worker.proc.stdout.fileno())
        self.timeout_s, self.overall_s = limits
        self.start = self.since = time.monotonic()
        self.candidate_start: float | None = None
        self.phase, self.file_phase = "start-up", ""
        self.seconds: dict[str, float] = {}
        self.replies = 0
        self.seq = ""  # the request being answered: a reply must carry it
        if not worker.ready():
            on_phase("start-up")  # truthful: this evaluation waits for the worker's imports

    def enter(self, phase: str) -> None:
        if phase == self.phase or not phase:
            return
        now = time.monotonic()
        self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + now - self.since
        self.phase, self.since = phase, now
        if self.candidate_start is None and phase not in UNTIMED_PHASES:
            self.candidate_start = now
        self.on_phase(phase)

    def _tick(self) -> None:
        self.tick()
        # a phase the worker entered on its own (baselines, waiting for the spare); the file is
        # the candidate's to write, and the phase goes to the user's terminal as it is
        raw = read_untrusted(self.worker.work / "progress", PHASE_BYTES)
        phase = printable(raw.decode(errors="replace")).strip()
        if phase and phase != self.file_phase:
            self.file_phase = phase
            self.enter(phase)

    def deadline(self) -> float:
        overall = self.start + self.overall_s
        if self.candidate_start is None:
            return overall
        return min(overall, self.candidate_start + self.timeout_s)

    def first(self, req: dict[str, Any]) -> dict[str, Any]:
        """Hand the evaluation's request to the worker; return its answer (the figures it
        measured before any candidate code ran)."""
        self.seq = secrets.token_hex(8)
        try:
            self.worker.hand_over({**req, "seq": self.seq})
        except OSError:
            pass  # it died already: seen as the end of its channel
        return self.reply()

    def request(self, message: dict[str, Any], phase: str = "") -> dict[str, Any]:
        """Send one request, return its reply. ChannelError when the worker is gone or its
        reply is malformed, ChannelTimeout when a limit expires."""
        self.enter(phase)
        self.seq = secrets.token_hex(8)
        assert self.worker.proc.stdin is not None
        try:
            msg = self.worker.inside({**message, "phase": self.phase, "seq": self.seq})
            send(self.worker.proc.stdin, msg)
        except OSError:
            raise ChannelError("the worker is gone") from None
        return self.reply()

    def reply(self) -> dict[str, Any]:
        """The answer to the last request. Each request carries a fresh random number that its
        reply must echo, so lines a candidate wrote ahead of time are never taken for one."""
        message = self.reader.line(self.deadline(), self._tick)
        if message.pop("seq", None) != self.seq:
            raise ChannelError("a reply to no request the judge made")
        self.replies += 1
        return message

    def phase_s(self) -> dict[str, float]:
        """Seconds per phase so far, the current one included."""
        seconds = dict(self.seconds)
        seconds[self.phase] = seconds.get(self.phase, 0.0) + time.monotonic() - self.since
        return {k: round(v, 3) for k, v in seconds.items()}


def _fault(reply: dict[str, Any], check: Check) -> StageFailure | None:
    status = reply.get("status")
    if status is None:
        return None
    if not isinstance(status, str) or status not in FAULTS:  # a list is not even hashable
        raise ChannelError(f"a reply with status {str(status)[:100]!r}")
    check.message = str(reply.get("message", ""))[-3000:] or f"{status} without a message"
    return StageFailure(FAULTS[status], check)


class Remote:
    """The candidate's process as the stages and the benchmark see it (stages.Caller and
    benchmark.KernelProcess)."""

    def __init__(self, link: Link, spec: KernelSpec, device: torch.device) -> None:
        self.link, self.spec, self.device = link, spec, device
        self.max_bytes = 0  # what the last call's output may take (channel.output_bound)
        self.sampled = 0  # timed outputs the worker kept for the last measure()

    def call(self, c: Call) -> tuple[torch.Tensor, float]:
        label = self.spec.label(c.size)
        message = {
            "op": "call", "make": c.make, "size": dict(c.size), "dtype": dtype_name(c.dtype),
            "key": list(c.key), "out_shape": list(c.out_shape),
            "out_dtype": dtype_name(c.out_dtype), "role": c.role,
        }  # fmt: skip
        t0 = time.monotonic()
        reply = self.link.request(message)
        seconds = time.monotonic() - t0  # the judge's clock: the smoke stage's speed limit
        failure = _fault(reply, Check(c.stage, label, dtype_name(c.dtype), False, seconds=seconds))
        if failure:
            raise failure
        self.max_bytes = output_bound(c.out_shape, c.out_dtype)
        out = decode_tensor(reply.get("out"), self.link.worker.work, self.device, self.max_bytes)
        return out, seconds

    def held_bytes(self) -> int:
        """Bytes of tensors the worker holds beyond the harness's own (retention.py)."""
        held = self.link.request({"op": "held"}).get("held_bytes")
        if type(held) is not int or held < 0:
            raise ChannelError(f"a held-memory reply of {str(held)[:100]!r}")
        return held

    def measure(self, role: int, label: str, dtype: torch.dtype) -> Measurement:
        reply = self.link.request({"op": "time", "role": role})
        failure = _fault(reply, Check("benchmark", label, dtype_name(dtype), False))
        if failure:
            raise failure
        values = [reply.get(k) for k in ("median_us", "p20_us", "p80_us")]
        if not all(type(v) is float for v in values):
            raise ChannelError(f"a timing reply without times: {str(reply)[:200]}")
        sampled = reply.get("sampled", 0)
        self.sampled = min(sampled, MAX_SAMPLED) if type(sampled) is int and sampled > 0 else 0
        return Measurement(*values)  # type: ignore[arg-type]

    def timed_outputs(self, role: int = 0) -> list[tuple[tuple | None, torch.Tensor]]:
        """The outputs of the timed calls the worker kept at random (worker_timing.Sampled),
        each with the key of the inputs it came from (None: the last checked call's). After
        rounds() a role's count comes from its reply."""
        out = []
        for index in range(self.sampled):
            reply = self.link.request({"op": "timed_output", "index": index, "role": role})
            failure = _fault(reply, Check("benchmark", "", "", False))
            if failure:
                raise failure
            source = reply.get("source")
            plain = (
                isinstance(source, list)
                and len(source) <= 8
                and all(type(part) in (str, int) for part in source)
            )
            if source is not None and not plain:
                raise ChannelError(f"a timed output from inputs {str(source)[:100]!r}")
            got = decode_tensor(reply.get("out"), self.link.worker.work, self.device,
                                self.max_bytes)  # fmt: skip
            out.append((tuple(source) if source else None, got))
        self.sampled = 0
        return out

    def refill(self, key: tuple) -> None:
        self.link.request({"op": "refill", "key": list(key)})

    def batch(self, role: int, calls: int, check_at: int) -> float:
        t0 = time.monotonic()
        reply = self.link.request({"op": "batch", "role": role, "calls": calls,
                                   "check_at": check_at})  # fmt: skip
        wall = time.monotonic() - t0
        failure = _fault(reply, Check("benchmark", "", "", False))
        if failure:
            raise failure
        return wall

    def output(self) -> torch.Tensor:
        reply = self.link.request({"op": "output"})
        failure = _fault(reply, Check("benchmark", "", "", False))
        if failure:
            raise failure
        return decode_tensor(reply.get("out"), self.link.worker.work, self.device, self.max_bytes)

    def rounds(self, rounds: int, label: str) -> dict[str, Any]:
        return self.link.request({"op": "rounds", "rounds": rounds, "label": label,
                                  "roles": list(ROLES)})  # fmt: skip

    def sampled_in_rounds(self, count: object) -> None:
        """How many timed outputs of a role to fetch next (the rounds reply's count)."""
        self.sampled = min(count, MAX_SAMPLED) if type(count) is int and count > 0 else 0


def _device(reply: dict[str, Any]) -> torch.device:
    kind = reply.get("device")
    if kind == "cuda" and torch.cuda.is_available():
        return torch.device("cuda")
    if kind == "cpu":
        return torch.device("cpu")
    raise ChannelError(f"the worker reports device {kind!r}")


def _floats(d: object) -> dict[str, float | None]:
    if not isinstance(d, dict):
        return {}
    return {str(k): float(v) if type(v) in (int, float) else None for k, v in d.items()}


def _strings(value: object) -> list[str]:
    return [str(s)[:500] for s in value] if isinstance(value, list) else []


MAX_BUILDS = 16  # a kernel builds one module, rarely a few; more is noise in the verdict


def builds(value: object) -> list[dict[str, Any]]:
    """The worker's account of its CUDA builds, reduced to numbers and flags (it is a claim,
    shown as the compile time and never judged on)."""
    out = []
    for b in value[:MAX_BUILDS] if isinstance(value, list) else []:
        if not isinstance(b, dict) or type(b.get("seconds")) not in (int, float):
            continue
        compile_s = b.get("compile_s")
        compiled = float(compile_s) if type(compile_s) in (int, float) else None
        out.append({"cached": b.get("cached") is True, "seconds": float(b["seconds"]),
                    "compile_s": compiled})  # fmt: skip
    return out


def _build_failed(verdict: Verdict, reply: dict[str, Any]) -> Verdict:
    """A kernel whose CUDA source did not build: FAIL in the first stage with the compiler's
    message (or REJECTED, when the builder's C++ guard refused the source it was handed)."""
    status = Status.FAIL if reply["status"] == "FAIL" else Status.REJECTED
    stage = STAGES[0] if status is Status.FAIL else "static"
    message = str(reply.get("message", ""))[-3000:] or "the CUDA build failed"
    verdict.status, verdict.failure = status, Check(stage, "", "", False, message)
    verdict.message = f"{status.value} in {stage}: {message.splitlines()[0]}"
    if status is Status.FAIL:
        verdict.stages = [StageResult(stage, "FAIL")] + [
            StageResult(s, "SKIPPED") for s in STAGES[1:]
        ]
    return verdict


def evaluate(link: Link, req: dict[str, Any], trusted: dict[str, Any] | None = None) -> Verdict:
    """Judge one kernel file: import, five stages, benchmark. trusted: the baseline worker's
    reply (baselines, ceilings, notes); nothing the candidate's worker says is taken for them."""
    trusted = trusted or {}
    prepared = link.first(req)
    device = _device(prepared)
    on_gpu = device.type == "cuda"
    spec = resolve(req["kernel_type"], req.get("region"))
    dtype = parse_dtype(req["dtype"]) if req.get("dtype") else (
        spec.bench_dtype_gpu if on_gpu else spec.bench_dtype_cpu
    )  # fmt: skip
    seed = int(req["seed"])
    verdict = Verdict(
        status=Status.PASS, kernel_type=spec.name, file=req["file"], seed=seed,
        device=str(prepared.get("device_name", ""))[:200], interpreter=not on_gpu,
        clock=clock_name(on_gpu),
    )  # fmt: skip
    verdict.guards += _strings(trusted.get("notes"))
    raw = trusted.get("baselines") if trusted.get("device", device.type) == device.type else None
    baselines = {str(k): _floats(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    peaks = Peaks(**{k: _floats(trusted.get("peaks")).get(k) for k in PEAK_FIELDS})
    reply = link.request(
        {"op": "import", "files": [req["file"]], "names": ["autokernel_candidate"]}, "import"
    )
    verdict.builds = builds(reply.get("builds"))
    if reply.get("status") in ("FAIL", "REJECTED"):  # the CUDA build: compiler or C++ guard
        return _build_failed(verdict, reply)
    if reply.get("status"):
        verdict.status = Status.CRASH
        verdict.failure = Check("import", "", "", False, str(reply.get("message", ""))[-3000:])
        verdict.message = f"import failed: {str(reply.get('error', ''))[:500]}"
        return verdict
    remote = Remote(link, spec, device)
    ev = Evaluation(spec, device, seed, tuple(req.get("extra_sizes") or ()),
                    bool(req.get("quick")), call=remote.call, held=remote.held_bytes)  # fmt: skip
    try:
        run_stages(ev, progress=link.enter)
        streams = _strings(link.request({"op": "streams"}).get("streams"))
        if streams:
            message = f"kernel used {', '.join(streams)}: launch on the current stream"
            raise StageFailure(Status.REJECTED, Check("guards", "", "", False, message))
        if req.get("timing", True):
            link.request({"op": "quiet"})
            link.enter("benchmark")
            verdict.timings = time_candidate(ev, remote, dtype, peaks, baselines)
    except StageFailure as failure:
        verdict.status = failure.status
        verdict.failure = failure.check
        c = failure.check
        where = " ".join(x for x in (c.stage, c.size, c.dtype) if x)
        verdict.message = f"{failure.status.value} in {where}: {c.message.splitlines()[0]}"
    finally:
        if on_gpu:
            torch.cuda.empty_cache()  # the next worker times on this GPU
    verdict.stages = ev.results
    finish = link.request({"op": "finish"})
    verdict.speedup_vs_eager = geomean([t.speedup_vs_eager for t in verdict.timings])
    verdict.speedup_vs_compile = geomean([t.speedup_vs_compile for t in verdict.timings])
    verdict.builds = builds(finish.get("builds")) or verdict.builds
    spilled = finish.get("spilled_registers")
    verdict.spilled_registers = spilled if type(spilled) is int else None
    if verdict.status is Status.PASS:
        verdict.message = "PASS: all five stages" + (
            f"; {verdict.speedup_vs_eager:.2f}x vs eager" if verdict.speedup_vs_eager else ""
        )
        if verdict.spilled_registers:
            verdict.message += f"; spilled {verdict.spilled_registers} registers per thread"
    peak = finish.get("peak_mem_bytes")
    verdict.peak_mem_bytes = peak if type(peak) is int else 0
    return verdict


def compare(link: Link, req: dict[str, Any]) -> Comparison:
    """Both files (best, candidate) imported side by side in one worker, then timed
    interleaved there and judged here."""
    prepared = link.first(req)
    device = _device(prepared)
    spec = resolve(req["kernel_type"], req.get("region"))
    dtype = parse_dtype(req["dtype"]) if req.get("dtype") else (
        spec.bench_dtype_gpu if device.type == "cuda" else spec.bench_dtype_cpu
    )  # fmt: skip
    names = [f"autokernel_{role}_{i}" for i, role in enumerate(ROLES)]
    reply = link.request({"op": "import", "files": req["files"], "names": names}, "import")
    if reply.get("status"):
        index = reply.get("index")
        role = ROLES[index] if index in (0, 1) else "a"
        return Comparison(error=f"{role} kernel: import failed: {str(reply.get('error'))[:500]}")
    remote = Remote(link, spec, device)
    ev = Evaluation(spec, device, int(req["seed"]), tuple(req.get("extra_sizes") or ()),
                    bool(req.get("quick")), call=remote.call)  # fmt: skip
    link.request({"op": "quiet"})
    try:
        result = compare_kernels(
            ev, remote, bench_sizes(spec, ev.on_gpu, ev.quick, ev.extra_sizes), dtype,
            req["rounds"], link.enter,
        )  # fmt: skip
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    finish = link.request({"op": "finish"})
    streams = _strings(finish.get("streams"))
    if streams and not result.error:
        result.error = f"a kernel used {', '.join(streams)}"
    return result
