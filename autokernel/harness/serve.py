"""What the candidate's process does on the judge's requests: import, call, time.

Nothing here judges an output. A call builds its inputs from the seed and key the judge names,
calls kernel_fn under the runtime op monitor, and hands back a plain copy of the output
(channel.encode_tensor); the judge compares it with a reference it computed itself. Replies are
dicts: {"status": ..., "message": ...} for a fault seen here (an exception, a forbidden op, a
modified input, an output that is not exactly a torch.Tensor), else the op's result.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from autokernel.harness import interpreter_bounds
from autokernel.harness.channel import encode_tensor, output_bound
from autokernel.harness.guards import TorchOpMonitor
from autokernel.harness.overwrite import overwrite
from autokernel.harness.stages import build_inputs
from autokernel.harness.worker_timing import WATCH_FRACTION, Sampled, TimingRejected, time_calls
from autokernel.kernel_file import import_file
from autokernel.specs import KernelSpec, parse_dtype
from autokernel.specs.base import output_dtype


def load_candidate(path: Path, name: str = "autokernel_candidate"):
    return import_file(path, name)


def _poison(shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
    """Fill, then free, a block the size of the expected output: the allocator hands that same
    block to the kernel's torch.empty, so elements it never writes read back as NaN."""
    if dtype.is_floating_point:
        block = torch.full(shape, float("nan"), dtype=dtype, device=device)
        del block


HELD_OUTPUT_BYTES = 64 << 20  # larger outputs (benchmark sizes) are not held: peak memory
# All held outputs together: past this the oldest is let go. Every stage call's output is held,
# not only the last: a kernel that handed out two kept buffers in turn never returned the memory
# of the call right before, and passed (tests/faults/softmax_output_buffer_ring.py).
HELD_TOTAL_BYTES = 256 << 20


def _nbytes(t: torch.Tensor) -> int:
    return torch.Tensor.untyped_storage(t).nbytes()


def _shares_memory(a: torch.Tensor, b: torch.Tensor | None) -> bool:
    """Whether the storages of a and b overlap (a view of b's memory counts)."""
    if b is None or a.device != b.device:
        return False
    start_a, start_b = (torch.Tensor.untyped_storage(t).data_ptr() for t in (a, b))
    if not (start_a and start_b):
        return False  # an empty storage holds nothing to share
    return start_a < start_b + _nbytes(b) and start_b < start_a + _nbytes(a)


def _handed(args: tuple) -> tuple:
    """The inputs as one kernel is handed them: tensor objects of its own over the shared
    memory. `x.set_(y)` (allowed: views and the interpreter's marshalling use it) re-points a
    tensor object, and with the very same objects one kernel of a comparison left the other a
    transposed layout of the same values for its timed rounds."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a and b hold the same bytes, element for element: torch.equal calls NaN unequal
    to itself and -0.0 equal to 0.0, and an input must stay exactly what it was."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    return torch.equal(*(t.detach().reshape(-1).contiguous().view(torch.uint8) for t in (a, b)))


INPUTS_CHANGED = (
    "kernel_fn modified one of its inputs{when}; inputs must stay unchanged (the other kernel of "
    "a comparison, and the judge's next calls, read the same memory)"
)


def _fault(status: str, message: str) -> dict[str, Any]:
    return {"status": status, "message": message[-3000:]}


def _outside(when: str = "") -> dict[str, Any] | None:
    """The first access a kernel made outside its launch's arguments under the interpreter
    (interpreter_bounds.py), as a CRASH, whether or not the kernel caught the exception."""
    found = interpreter_bounds.first_violation()
    return _fault("CRASH", f"kernel_fn{when}: {found}") if found else None


def _build_fault(exc: BaseException) -> dict[str, Any] | None:
    """A CUDA build's failure as the judge reports it: the compiler's message, FAIL (or
    REJECTED for source the C++ guard refused); None for any other exception."""
    from autokernel.cuda_build import CudaBuildError, CudaSourceRefused

    if isinstance(exc, CudaSourceRefused):
        return {"status": "REJECTED", "message": f"CUDA source refused: {exc}"[:3000]}
    if isinstance(exc, CudaBuildError):
        return {"status": "FAIL", "message": f"CUDA build failed: {exc}"[:3000]}
    return None


def cuda_builds() -> list[dict[str, Any]]:
    """The CUDA builds this process made (none unless a kernel imported the builder)."""
    builder = sys.modules.get("autokernel.cuda_build")
    return builder.builds() if builder is not None else []


def _forbidden(ops: list[str], when: str) -> dict[str, Any]:
    where = f" {when}" if when else ""
    return _fault("REJECTED", f"kernel_fn called torch ops that compute{where}: "
                  f"{', '.join(ops[:8])}. Only allocation, views and copies may run outside "
                  "the kernel.")  # fmt: skip


class Session:
    """The candidate's side of one evaluation: its kernels and the inputs of the last call."""

    def __init__(
        self, spec: KernelSpec, device: torch.device, seed: int, work: Path, monitor: bool
    ) -> None:
        if device.type == "cuda" and device.index is None:
            # tensors report cuda:N; a bare "cuda" would never compare equal to their device
            device = torch.device("cuda", torch.cuda.current_device())
        self.spec, self.device, self.seed, self.work = spec, device, seed, work
        self.monitor = monitor
        self.kernels: list[Callable] = []
        self.modules: list[Any] = []
        self.key: tuple | None = None
        self.args: tuple = ()
        self.size: dict = {}
        self.dtype = torch.float32
        self.kept: object = None
        # earlier calls' outputs (HELD_TOTAL_BYTES of them, newest last), held so that their
        # memory cannot be handed out again: a later output in that memory was kept by the
        # kernel across calls
        self.previous: list[torch.Tensor] = []
        self.n_out = 0
        self.out_bound = 0  # the most bytes an output may take (channel.output_bound)
        self.source: tuple | None = None  # the refill key of the inputs' values; None: built
        self.timed: dict[int, list] = {}  # role -> sampled timed outputs (Sampled)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def import_files(self, files: list[str], names: list[str]) -> dict[str, Any]:
        for index, (file, name) in enumerate(zip(files, names, strict=True)):
            try:
                module = load_candidate(Path(file), name)
                kernel_fn = getattr(module, "kernel_fn", None)
                if not callable(kernel_fn):
                    raise AttributeError("kernel.py defines no callable kernel_fn")
            except BaseException as exc:  # SyntaxError, ImportError, anything raised at import
                build = _build_fault(exc)
                if build:
                    return {**build, "index": index, "error": build["message"][:1000],
                            "builds": cuda_builds()}  # fmt: skip
                tb = "".join(traceback.format_exception(exc)[-8:])
                what = f"{type(exc).__name__}: {exc}"
                return {"status": "CRASH", "index": index, "error": what[:1000],
                        "message": f"{what}\n{tb}"[-3000:]}  # fmt: skip
            outside = _outside(" at import")
            if outside:  # a launch at the top level, its exception caught there
                return {**outside, "index": index, "error": outside["message"][:1000]}
            self.modules.append(module)
            self.kernels.append(kernel_fn)
        return {"ok": True, "builds": cuda_builds()}

    def _inputs(self, make: str, size: dict, dtype: torch.dtype, key: tuple) -> tuple:
        """The named inputs; the same key as the last call re-uses its very tensors (the
        determinism stage calls three times on one set, a comparison both kernels on one)."""
        full = (make, tuple(sorted(size.items())), dtype, key)
        if full != self.key:
            self.args = ()  # free the old set before building the new one
            self.args = build_inputs(self.spec, make, size, dtype, self.device, self.seed, key)
            self.key, self.size, self.dtype = full, size, dtype
            self.source = None
        return self.args

    def _send(self, out: object) -> dict[str, Any]:
        self.n_out += 1
        if type(out) is torch.Tensor and out.numel() * out.element_size() > self.out_bound:
            # Not written: torch.empty(1 << 34) costs nothing to return, and its bytes went to
            # the host's disk (up to the file size cap) before the judge refused them.
            return _fault("FAIL", f"output shape {tuple(out.shape)} {out.dtype} is far larger "
                          "than the output expected; it was not handed to the judge")  # fmt: skip
        try:
            return {"out": encode_tensor(out, self.work, f"out-{self.n_out}.bin")}
        except TypeError as exc:
            return _fault("FAIL", f"kernel_fn returned something the judge cannot take: {exc}; "
                          "return a plain torch.Tensor")  # fmt: skip

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        dtype = parse_dtype(req["dtype"])
        args = self._inputs(req["make"], req["size"], dtype, tuple(req["key"]))
        kernel_fn = self.kernels[int(req.get("role", 0))]
        snapshot = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        handed = _handed(args)
        _poison(req["out_shape"], output_dtype(req["out_dtype"]), self.device)
        self.out_bound = output_bound(tuple(req["out_shape"]), output_dtype(req["out_dtype"]))
        monitor = TorchOpMonitor()
        try:
            if self.monitor:
                with monitor:
                    got = kernel_fn(*handed)
            else:
                got = kernel_fn(*handed)
            self._sync()
        except Exception as exc:  # the candidate's own error: report it, don't die of it
            build = _build_fault(exc) or _outside()
            if build:
                return build
            tb = traceback.format_exception(exc)[-6:]
            return _fault("CRASH", f"kernel_fn raised {type(exc).__name__}: {exc}\n{''.join(tb)}")
        outside = _outside()
        if outside:
            return outside
        if monitor.forbidden:
            return _forbidden(monitor.forbidden, "")
        for before, after in zip(snapshot, args, strict=True):
            if isinstance(before, torch.Tensor) and not same_bits(before, after):
                return _fault("REJECTED", INPUTS_CHANGED.format(when=""))
        if type(got) is torch.Tensor and got.device != self.device:
            return _fault("FAIL", f"output on {got.device}, inputs on {self.device}")
        if (
            type(got) is torch.Tensor
            and any(_shares_memory(got, held) for held in self.previous)
            and not any(_shares_memory(got, a) for a in args if type(a) is torch.Tensor)
        ):  # a view of this call's input is judged by its values, not here
            return _fault("REJECTED", "kernel_fn returned memory it had returned from an earlier "
                          "call (an output buffer kept across calls): a caller's earlier result "
                          "would change under it; allocate every output")  # fmt: skip
        if type(got) is torch.Tensor and _nbytes(got) <= HELD_OUTPUT_BYTES:
            self._hold(got)
        return self._send(got)

    def own_tensors(self) -> list[object]:
        """Every tensor the harness holds here (retention.held_bytes leaves them out)."""
        timed = [out for kept in self.timed.values() for _, out in kept]
        return [*self.args, *self.previous, self.kept, *timed]

    def _hold(self, out: torch.Tensor) -> None:
        """Keep out among the held outputs, letting the oldest go past HELD_TOTAL_BYTES."""
        self.previous.append(out)
        total = sum(_nbytes(t) for t in self.previous)
        while total > HELD_TOTAL_BYTES and len(self.previous) > 1:
            total -= _nbytes(self.previous.pop(0))

    def refill(self, key: tuple) -> None:
        """Write new values, drawn under a new key, into the last call's input tensors."""
        label = self.spec.label(self.size)
        fresh = build_inputs(self.spec, "inputs", self.size, self.dtype, self.device, self.seed,
                             (*key, label))  # fmt: skip
        for dst, src in zip(self.args, fresh, strict=True):
            if isinstance(dst, torch.Tensor):
                overwrite(dst, src)  # an expanded mask included
        self.source = (*key, label)

    def inputs_intact(self) -> bool:
        """Whether the inputs still hold the values they were built or last refilled with,
        rebuilt from their key (nothing held during the timing).

        Why: the inputs were checked after each checked call alone. The timed calls, the
        judge's batches and a comparison's rounds re-use the same memory, and in a comparison
        both kernels read it: a candidate's timed calls could leave the best kernel's timed
        calls other values (tests/faults/softmax_inputs_rewritten_when_timed.py). Checked after
        every kernel's timed calls, before anyone else reads them, at every size (rebuilding
        costs what building them did)."""
        if self.key is None:
            return True
        make, _, dtype, key = self.key
        if self.source is not None:
            make, key = "inputs", self.source
        want = build_inputs(self.spec, make, self.size, dtype, self.device, self.seed, key)
        self._sync()
        return all(
            same_bits(have, ref)
            for have, ref in zip(self.args, want, strict=True)
            if isinstance(have, torch.Tensor)
        )

    def _sampled(self, role: int) -> Sampled:
        """A kernel's timed calls: outputs sampled, a sample of calls under the op monitor."""
        watch = WATCH_FRACTION[self.device.type == "cuda"] if self.monitor else 0.0
        return Sampled(self._fn(role), lambda: self.source, watch)

    def _fn(self, role: int) -> Callable[[], object]:
        kernel_fn, args = self.kernels[role], _handed(self.args)
        return lambda: kernel_fn(*args)

    def time(self, req: dict[str, Any]) -> dict[str, Any]:
        """Median and spread of kernel_fn on the last call's inputs (see worker_timing)."""
        sampled = self._sampled(int(req.get("role", 0)))
        self.previous, self.timed = [], {}
        try:
            m = time_calls(sampled, self.refill, self.device.type == "cuda")
        except TimingRejected as exc:
            return _fault("REJECTED", str(exc))
        except Exception as exc:
            return _outside(" while timed") or _fault(
                "CRASH", f"kernel_fn raised while timed: {type(exc).__name__}: {exc}"
            )
        outside = _outside(" while timed")
        if outside:
            return outside
        if sampled.forbidden:
            return _forbidden(sampled.forbidden, "while timed")
        if not self.inputs_intact():
            return _fault("REJECTED", INPUTS_CHANGED.format(when=" while timed"))
        self.timed = {int(req.get("role", 0)): sampled.kept}
        return {"median_us": m.median_us, "p20_us": m.p20_us, "p80_us": m.p80_us,
                "sampled": len(sampled.kept)}  # fmt: skip

    def timed_output(self, index: int, role: int) -> dict[str, Any]:
        """A sampled timed call's output (Sampled), with the key of its inputs for the judge."""
        kept = self.timed.get(role, [])
        source, out = kept[index] if 0 <= index < len(kept) else (None, None)
        if 0 <= index < len(kept):
            kept[index] = (source, None)  # handed over: free it
        return {**self._send(out), "source": list(source) if source else None}

    def batch(self, req: dict[str, Any]) -> dict[str, Any]:
        """`calls` back-to-back calls on the last inputs, the device drained before and after:
        the judge times this reply with its own clock. The output of call `check_at` is kept
        for the judge to check. The op monitor watches these calls too: a kernel that knows a
        timed call from a checked one (the same buffers again, at a benchmark size) could hand
        its timed calls to torch, and the judge's clock would agree with torch's figure. Its
        cost per call is a few microseconds, within the judge's slack."""
        fn, check_at = self._fn(int(req.get("role", 0))), int(req["check_at"])
        self.kept, self.previous = None, []
        monitor = TorchOpMonitor()
        try:
            self._sync()
            with monitor if self.monitor else contextlib.nullcontext():
                for i in range(int(req["calls"])):
                    out = fn()
                    if i == check_at:
                        self.kept = out
            self._sync()
        except Exception as exc:
            return _outside(" while timed") or _fault(
                "CRASH", f"kernel_fn raised while timed: {type(exc).__name__}: {exc}"
            )
        outside = _outside(" while timed")
        if outside:
            return outside
        if monitor.forbidden:
            return _forbidden(monitor.forbidden, "while timed")
        if not self.inputs_intact():
            return _fault("REJECTED", INPUTS_CHANGED.format(when=" while timed"))
        return {"ok": True}

    def output(self) -> dict[str, Any]:
        kept, self.kept = self.kept, None
        return self._send(kept)

    def rounds(self, req: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
        """Both kernels timed in alternating rounds on the last inputs (interleave.py)."""
        on_gpu, label = self.device.type == "cuda", req["label"]
        self.previous = []
        fns = [self._sampled(k) for k in (0, 1)]
        pairs = []
        for r in range(max(1, int(req["rounds"]))):
            us = [0.0, 0.0]
            for k in (0, 1) if r % 2 == 0 else (1, 0):
                progress(f"compare {label}: timing {req['roles'][k]}")
                try:
                    us[k] = time_calls(fns[k], self.refill, on_gpu).median_us
                except TimingRejected as exc:  # a trick the timed calls show (worker_timing)
                    return {"error": f"{req['roles'][k]} kernel at {label}: {exc}"}
                except Exception as exc:  # its checked call did not raise; a repeated one did
                    return {"error": f"{req['roles'][k]} kernel raised while timed at {label}: "
                            f"{type(exc).__name__}: {exc}"}  # fmt: skip
                problem = self._round_fault(fns[k])
                if problem:  # before the other kernel reads the inputs
                    return {"error": f"{req['roles'][k]} kernel at {label}: {problem}"}
            pairs.append(us)
        found = interpreter_bounds.first_violation()
        if found:
            return {"error": f"a kernel while timed: {found}"}
        self.timed = {k: fn.kept for k, fn in enumerate(fns)}
        return {"pairs": pairs, "sampled": [len(fn.kept) for fn in fns]}

    def _round_fault(self, fn: Sampled) -> str | None:
        """What a kernel's timed calls in one round did that they may not, if anything."""
        if fn.forbidden:
            return _forbidden(fn.forbidden, "while timed")["message"]
        if not self.inputs_intact():
            return INPUTS_CHANGED.format(when=" while timed")
        return None
