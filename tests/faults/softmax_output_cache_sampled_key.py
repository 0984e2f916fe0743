# expect: REJECTED benchmark
"""Planted cheat: outputs cached by input address, re-used while two sampled values are unchanged.

Like softmax_output_cache_data_ptr.py, but the cache is keyed on the values too, and the key is
compared on the device, so no element is ever read to the host (the runtime guard forbids that):
each program loads x[0] and x[-1], compares them with the pair it saw last time (kept in its own
slot of a key tensor) and, when both match, skips its rows and leaves the old output in place.
The timed loop re-uses one buffer with unchanged values, so it measures a launch that does four
scalar loads; the re-validation writes new values into the same buffer, the key misses, and the
one re-validation call computes the right answer. Caught because calls timed on new values are
much slower than the timed figure.

Each program walks its rows in a loop: under the interpreter every program costs about as much
to start as to run, so few programs keep the skip as cheap next to the work as it is on a GPU.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

CACHE = {}
CACHE_MIN_NUMEL = 32768  # the CPU benchmark size is 64x1024; every CPU stage size is smaller
PROGRAMS = {"cpu": 4, "cuda": 1024}


@triton.jit
def _softmax_kernel(X, Y, KEY, n_rows, stride_x, stride_y, n_cols, last, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    first = tl.load(X).to(tl.float32)
    final = tl.load(X + last).to(tl.float32)
    miss = (tl.load(KEY + 2 * pid) != first) | (tl.load(KEY + 2 * pid + 1) != final)
    if miss:  # CHEAT: on a key hit the program does nothing and the stale output stands
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        for row in range(pid, n_rows, tl.num_programs(0)):
            x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        tl.store(KEY + 2 * pid, first)
        tl.store(KEY + 2 * pid + 1, final)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    programs = min(x2.shape[0], PROGRAMS.get(x.device.type, 1024))
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    cached = x.numel() >= CACHE_MIN_NUMEL
    if cached and key in CACHE:
        y, seen = CACHE[key]
    else:
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        # NaN never equals a loaded value: the first call at an address always computes.
        seen = torch.full((2 * programs,), float("nan"), dtype=torch.float32, device=x.device)
        if cached:
            CACHE[key] = (y, seen)
    _softmax_kernel[(programs,)](
        x2, y, seen, x2.shape[0], x2.stride(0), y.stride(0), n_cols, x2.numel() - 1,
        BLOCK=triton.next_power_of_2(n_cols),
    )  # fmt: skip
    return y.view(x.shape)
