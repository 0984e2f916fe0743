"""Plain-Triton forms of the helpers Inductor's kernels import, written into generic starters.

Inductor's kernels call torch._inductor.runtime.triton_helpers (NaN-propagating max and min,
Welford steps, online-softmax steps) and libdevice (tanh, pow, erf, ...). A kernel.py may import
neither: torch._inductor is outside the static guard's allow-list, and Triton's interpreter, which
runs every kernel on a CPU, cannot call libdevice. LIBRARY holds the same arithmetic in
triton.language only, one @triton.jit function per helper; a starter copies in the ones its
kernels call (and the ones those call), nothing else.
"""

from __future__ import annotations

import ast
import functools

from autokernel import syntax

# triton_helpers.<name> becomes _<name>; libdevice.<name> becomes LIBDEVICE[name].
LIBRARY = """
@triton.jit
def _promote_to_tensor(x):
    # adding a 1-element tensor turns a scalar into a tensor of the same type
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def _maximum(a, b):
    # max that keeps a NaN, as torch.maximum does
    keep = a > b
    if a.dtype.is_floating():
        keep = keep | (a != a)
    return tl.where(keep, a, b)


@triton.jit
def _minimum(a, b):
    keep = a < b
    if a.dtype.is_floating():
        keep = keep | (a != a)
    return tl.where(keep, a, b)


@triton.jit
def _max2(a, dim):
    return tl.reduce(a, dim, _maximum)


@triton.jit
def _min2(a, dim):
    return tl.reduce(a, dim, _minimum)


@triton.jit
def _minimum_with_index(a_value, a_index, b_value, b_index):
    # the smaller value and its index, as torch.argmin picks: a NaN wins, a tie takes the
    # lower index
    mask = a_value < b_value
    equal = a_value == b_value
    if a_value.dtype.is_floating():
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        mask = mask | (a_nan & ~b_nan)
        equal = equal | (a_nan & b_nan)
    mask = mask | (equal & (a_index < b_index))
    return tl.where(mask, a_value, b_value), tl.where(mask, a_index, b_index)


@triton.jit
def _maximum_with_index(a_value, a_index, b_value, b_index):
    # the larger value and its index, as torch.argmax picks: a NaN wins, a tie takes the
    # lower index
    mask = a_value > b_value
    equal = a_value == b_value
    if a_value.dtype.is_floating():
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        mask = mask | (a_nan & ~b_nan)
        equal = equal | (a_nan & b_nan)
    mask = mask | (equal & (a_index < b_index))
    return tl.where(mask, a_value, b_value), tl.where(mask, a_index, b_index)


@triton.jit
def _min_with_index(value, index, dim):
    return tl.reduce((value, index), dim, _minimum_with_index)


@triton.jit
def _max_with_index(value, index, dim):
    return tl.reduce((value, index), dim, _maximum_with_index)


@triton.jit
def _times(a, b):
    return a * b


@triton.jit
def _prod(x, dim):
    return tl.reduce(x, dim, _times)


@triton.jit
def _either(a, b):
    return a | b


@triton.jit
def _any(x, dim):
    return tl.reduce(x, dim, _either)


@triton.jit
def _select_one(x, mask, dim, keep_dims: tl.constexpr = False):
    # the one element of x along dim where mask is set (a scan block's last value, the carry):
    # adding zeros to it is exact, but for a -0.0 that comes back +0.0
    picked = tl.sum(tl.where(mask, x, tl.zeros_like(x)), dim, keep_dims=keep_dims)
    return picked.to(x.dtype)


@triton.jit
def _div_floor_integer(a, b):
    # Triton's // truncates toward zero; floor division rounds toward -inf
    q = a // b
    down = (a % b != 0) & ((a < 0) != (b < 0))
    return tl.where(down, q - 1, q)


@triton.jit
def _remainder_integer(a, b):
    # Python's remainder takes the divisor's sign
    r = a % b
    return tl.where((r != 0) & ((a < 0) != (b < 0)), r + b, r)


@triton.jit
def _welford_reduce(value, mean, m2, weight, first_iteration):
    # one more sample into a running (mean, sum of squared deviations, count)
    if first_iteration:
        count = tl.full(weight.shape, 1, weight.dtype)
        new_mean = value
        new_m2 = tl.zeros_like(m2)
    else:
        count = weight + 1
        delta = value - mean
        new_mean = mean + delta / count
        new_m2 = m2 + delta * (value - new_mean)
    return new_mean, new_m2, count


@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    # two partial (mean, m2, count) merged (Chan et al.); equal means give no delta even when
    # both are infinite
    n = n_a + n_b
    delta = tl.where(mean_a == mean_b, 0.0, mean_b - mean_a)
    frac_b = tl.where(n == 0.0, 0.0, n_b / n)
    return mean_a + delta * frac_b, m2_a + m2_b + delta * delta * n_a * frac_b, n


@triton.jit
def _welford(mean, m2, weight, dim):
    return tl.reduce((mean, m2, weight), dim, _welford_combine)


@triton.jit
def _exp(x, use_fast_math: tl.constexpr):
    return tl.exp(x)


@triton.jit
def _online_softmax_reduce(part_max, part_sum, dim, use_fast_math: tl.constexpr):
    # partial (max, sum of exp(x - max)) along dim merged into one per row
    row_max = _max2(part_max, dim)
    keep = tl.expand_dims(row_max, dim)
    shift = tl.where(keep == float("-inf"), 0.0, part_max - keep)
    return row_max, tl.sum(part_sum * tl.exp(shift), dim)


@triton.jit
def _online_softmax_combine(acc_max, acc_sum, new_max, use_fast_math: tl.constexpr):
    # the running (max, sum of exp) after one more element whose own sum is 1
    top = _maximum(acc_max, new_max)
    scale_acc = tl.where(top == float("-inf"), 1.0, tl.exp(acc_max - top))
    scale_new = tl.where(top == float("-inf"), 1.0, tl.exp(new_max - top))
    return top, acc_sum * scale_acc + scale_new


@triton.jit
def _ld_tanh(x):
    # 1 - 2 / (exp(2x) + 1): exact limits at +-inf, no overflow to inf/inf (Inductor hands
    # these helpers fp32 or fp64 values, as tl.exp needs)
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def _ld_isnan(x):
    return x != x


@triton.jit
def _ld_isinf(x):
    return tl.abs(x) == float("inf")


@triton.jit
def _ld_signbit(x):
    # negative zero included: 1 / -0.0 is -inf
    return (x < 0) | ((x == 0) & (1.0 / x < 0))


@triton.jit
def _ld_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _ld_nearbyint(x):
    # round half to even, as torch.round
    f = tl.floor(x)
    d = x - f
    even = (f - 2.0 * tl.floor(f * 0.5)) == 0.0
    up = (d > 0.5) | ((d == 0.5) & (even == 0))
    return tl.where(up, f + 1.0, f)


@triton.jit
def _ld_expm1(x):
    # for small |x| the series keeps the digits exp(x) - 1 cancels
    small = tl.abs(x) < 1e-3
    return tl.where(small, x + 0.5 * x * x + x * x * x / 6.0, tl.exp(x) - 1.0)


@triton.jit
def _ld_log1p(x):
    # log(u) * x / (u - 1) with u = 1 + x recovers the digits 1 + x rounds away
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))


@triton.jit
def _ld_pow(a, b):
    # |a|^b, with the sign of a for odd integer b, NaN for a < 0 and fractional b, 1 for b == 0
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) == 1.0)
    signed = tl.where((a < 0) & odd, -mag, mag)
    signed = tl.where((a < 0) & (b_int == 0), float("nan"), signed)
    return tl.where(b == 0, 1.0, signed)


@triton.jit
def _ld_sinh(x):
    return 0.5 * (tl.exp(x) - tl.exp(-x))


@triton.jit
def _ld_cosh(x):
    return 0.5 * (tl.exp(x) + tl.exp(-x))


@triton.jit
def _ld_tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _ld_fmod(a, b):
    q = a / b
    return a - tl.where(q < 0, tl.ceil(q), tl.floor(q)) * b
"""

# libdevice.<name> -> a triton.language function or a helper of LIBRARY
LIBDEVICE: dict[str, str] = {
    "exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2",
    "sqrt": "tl.sqrt_rn", "rsqrt": "tl.rsqrt", "sin": "tl.sin", "cos": "tl.cos", "erf": "tl.erf",
    "floor": "tl.floor", "ceil": "tl.ceil", "abs": "tl.abs", "fabs": "tl.abs",
    "tanh": "_ld_tanh", "isnan": "_ld_isnan", "isinf": "_ld_isinf", "signbit": "_ld_signbit",
    "trunc": "_ld_trunc", "nearbyint": "_ld_nearbyint", "expm1": "_ld_expm1",
    "log1p": "_ld_log1p", "pow": "_ld_pow", "sinh": "_ld_sinh", "cosh": "_ld_cosh",
    "tan": "_ld_tan", "fmod": "_ld_fmod",
}  # fmt: skip


@functools.cache
def _functions() -> dict[str, tuple[str, frozenset[str]]]:
    """Each LIBRARY function's source and the LIBRARY functions it calls."""
    tree = syntax.parse(LIBRARY)
    names = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
    out = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            calls = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in names}
            segment = ast.get_source_segment(LIBRARY, fn, padded=False) or ""
            out[fn.name] = ("@triton.jit\n" + segment, frozenset(calls - {fn.name}))
    return out


def has(name: str) -> bool:
    """Whether LIBRARY defines the function `name` (e.g. '_maximum')."""
    return name in _functions()


def sources(names: set[str]) -> list[str]:
    """The sources of the LIBRARY functions `names` and those they call, callees first."""
    functions, order = _functions(), []

    def visit(name: str) -> None:
        if name in order:
            return
        for callee in sorted(functions[name][1]):
            visit(callee)
        order.append(name)

    for name in sorted(names):
        visit(name)
    return [functions[n][0] for n in order]
