# expect: REJECTED static
"""Planted forgery: str.format reads the attributes and items its string names, dunders
included, where the guard's "no attribute starting with _" never looks.

From an exception caught in kernel_fn, "{0.__traceback__.tb_frame.f_back...}" walks up the
caller's frames: the kernel learns whether the harness is checking it (Session.call) or timing
it (measure, single_calls_us), and in the judge's batch it reads check_at and the loop index.
It computes only when checked, so every check passes and the timed calls cost an allocation: on
a GPU the judge's clock cannot tell one real call among up to a thousand. One program computes
the whole tile so the one real call fits the interpreter's slack on the CPU too (PASS at a
forged median without the fix). str.format and format_map are refused; f-strings are judged.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _softmax_kernel(
    X, Y, stride_x, stride_y, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr
):
    rows = tl.arange(0, ROWS)[:, None]  # one program, one tile: cheap under the interpreter
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(X + rows * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(Y + rows * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


TIMERS = ("measure", "single_calls_us", "wall_per_call_us", "do_bench", "rounds")


def _callers():
    try:
        raise ValueError("peek")
    except ValueError as e:
        names = []
        path = "0.__traceback__.tb_frame.f_back"
        for _ in range(6):
            try:
                names.append(("{" + path + ".f_code.co_name}").format(e))
            except AttributeError:
                break
            if names[-1] == "batch":
                i = ("{" + path + ".f_locals[i]}").format(e)
                at = ("{" + path + ".f_locals[check_at]}").format(e)
                return names, i == at
            path = path + ".f_back"
        return names, None


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    names, checked = _callers()
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    timed = checked is False or (checked is None and any(n in TIMERS for n in names))
    if not timed:
        _softmax_kernel[(1,)](
            x2,
            y,
            x2.stride(0),
            y.stride(0),
            x2.shape[0],
            n_cols,
            ROWS=triton.next_power_of_2(x2.shape[0]),
            BLOCK=triton.next_power_of_2(n_cols),
        )
    return y.view(x.shape)
