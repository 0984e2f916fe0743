"""A generic target's starter: Inductor's Triton for the region as a kernel.py that passes the
static guard, runs under the interpreter at the model's and perturbed sizes, and passes the five
stages through the sandboxed harness."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
import torch

from autokernel.harness import sandbox
from autokernel.harness.static_check import check_source
from autokernel.model.generic_starter import starter_for
from autokernel.model.inductor_code import ArgSource, InductorCode, generate
from autokernel.model.starter import STATIC_SUFFIX, StarterError, build
from autokernel.specs.generic import generic_spec
from tests.test_region import CASES, region

_sources: dict[str, str] = {}


def starter(name: str) -> str:
    if name not in _sources:
        r = region(name)
        _sources[name] = build(r, generate(r, torch.device("cpu")))
    return _sources[name]


def load(tmp_path: Path, source: str):
    path = tmp_path / "kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"starter_{id(source)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_starter_is_inductors_kernel_within_the_guard_and_right_at_every_size(name, tmp_path):
    source = starter(name)
    assert check_source(source) == []
    assert "torch._inductor" not in source and "libdevice." not in source
    assert 'KERNEL_TYPE = "generic"' in source and "SEARCH_SPACE" in source
    assert "triton_" in source  # Inductor's own kernel names: triton_poi_*/triton_red_*
    module = load(tmp_path, source)
    spec = generic_spec(region(name).to_dict())
    dtype = spec.dtypes[0]  # the region's own: fp32 here, bf16 for rms_fp32_stats
    atol, rtol = spec.tolerance(dtype)
    for size in (spec.cpu.smoke, *spec.cpu.sweep[1:4]):
        gen = torch.Generator().manual_seed(1)
        args = spec.make_inputs(size, dtype, gen, torch.device("cpu"))
        got = module.kernel_fn(*args)
        want = spec.reference(*[a.double() for a in args])
        assert got.shape == want.shape and got.dtype == spec.out_dtype(dtype)
        torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


@pytest.mark.slow
def test_generic_starter_passes_the_five_stages_and_a_planted_bug_fails():
    r = region("log_softmax")
    opts = sandbox.Options(region=r.to_dict(), compile_baseline=False, extra_sizes=[r.symbols],
                           timing=False)  # fmt: skip
    good = Path(__file__).parent / "data" / "_generic_log_softmax.py"
    good.write_text(starter("log_softmax"))
    try:
        verdict = sandbox.evaluate(good, opts)
        assert verdict.status.value == "PASS", verdict.message
        assert [s.name for s in verdict.stages if s.status == "PASS"] == [
            "smoke", "sweep", "adversarial", "determinism", "odd_sizes"
        ]  # fmt: skip
        broken = starter("log_softmax").replace("tmp12 - tmp10", "tmp12 - 0.999 * tmp10")
        assert broken != starter("log_softmax")
        good.write_text(broken)
        verdict = sandbox.evaluate(good, opts)
        assert verdict.status.value == "FAIL" and "smoke" in verdict.message
    finally:
        good.unlink(missing_ok=True)


def test_a_generic_kernel_without_its_region_is_refused(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text('KERNEL_TYPE = "generic"\n\ndef kernel_fn(x0):\n    return x0\n')
    verdict = sandbox.evaluate(path, sandbox.Options(timing=False))
    assert verdict.status.value == "CRASH" and "autokernel run" in verdict.message


# A wrapper as torch 2.11's CUDA backend writes it (device guard, stream, a reinterpreted
# buffer): the translation must not depend on the CPU backend's spelling.
CUDA_WRAPPER = textwrap.dedent('''
    triton_poi_fused_mul_0 = async_compile.triton('triton_poi_fused_mul_0', """
    import triton
    import triton.language as tl
    from torch._inductor.runtime import triton_helpers, triton_heuristics
    from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math

    @triton_heuristics.pointwise(size_hints={'x': 4096}, filename=__file__,
        triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32'}},
        inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set()}, min_elem_per_thread=0)
    @triton.jit
    def triton_poi_fused_mul_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp0 = tl.load(in_ptr0 + (xindex), xmask)
        tmp1 = triton_helpers.maximum(tmp0, tl_math.abs(tmp0) * 0.0)
        tl.store(out_ptr0 + (xindex), libdevice.tanh(tmp1), xmask)
    """, device_str='cuda')

    async_compile.wait(globals())
    del async_compile

    def call(args):
        arg0_1, arg1_1 = args
        args.clear()
        s0 = arg0_1
        assert_size_stride(arg1_1, (s0, ), (1, ))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((s0, ), (1, ), torch.float32)
            stream0 = get_raw_stream(0)
            triton_poi_fused_mul_0.run(arg1_1, buf0, s0, stream=stream0)
            del arg1_1
            buf1 = reinterpret_tensor(buf0, (s0, ), (1, ), 0)
        return (buf1, )
''')


def test_a_recorded_cuda_wrapper_translates_into_a_guarded_kernel(tmp_path):
    r = capture_relu_tanh()
    code = InductorCode(CUDA_WRAPPER, (ArgSource("size", 0, 0), ArgSource("tensor", 0)))
    source = build(r, code)
    assert check_source(source) == []
    assert "_maximum(" in source and "_ld_tanh(" in source and "tl.math.abs" in source
    module = load(tmp_path, source)
    x = torch.randn(3000)
    torch.testing.assert_close(module.kernel_fn(x), torch.tanh(torch.relu(x)))


def test_a_wrapper_that_leaves_part_of_the_region_to_a_library_is_refused():
    r = capture_relu_tanh()
    wrapper = CUDA_WRAPPER.replace("triton_poi_fused_mul_0.run(arg1_1, buf0, s0, stream=stream0)",
                                   "extern_kernels.mm(arg1_1, arg1_1, out=buf0)")  # fmt: skip
    with pytest.raises(StarterError, match="not a Triton kernel"):
        build(r, InductorCode(wrapper, (ArgSource("size", 0, 0), ArgSource("tensor", 0))))


def capture_relu_tanh():
    from autokernel.model.capture import capture

    return capture(lambda x: torch.tanh(torch.relu(x)), [torch.randn(4096)])


def test_at_the_models_shape_kernel_fn_runs_inductors_code_for_that_shape(tmp_path):
    """starter_for writes both of Inductor's wrappers: the one compiled for the model's sizes
    and strides runs there (as torch.compile's would), the any-size one everywhere else, and
    each computes the region."""
    r = region("rotary")  # two outputs and rotate_half's cat: what static sizes fuse
    source = starter_for(r.to_dict(), torch.device("cpu"))
    assert check_source(source) == [] and "AT_SHAPE" in source
    assert f"{STATIC_SUFFIX}[grid]" in source  # its own kernels, launched under their own names
    module = load(tmp_path, source)
    taken = []
    for name in ("_at_shape", "_any_shape"):
        original = getattr(module, name)
        setattr(module, name, lambda *a, _f=original, _n=name: taken.append(_n) or _f(*a))
    spec = generic_spec(r.to_dict())
    atol, rtol = spec.tolerance(spec.dtypes[0])
    for size, path in ((spec.cpu.smoke, "_at_shape"), (spec.cpu.sweep[1], "_any_shape")):
        args = spec.make_inputs(size, spec.dtypes[0], torch.Generator().manual_seed(2),
                                torch.device("cpu"))  # fmt: skip
        got = module.kernel_fn(*args)
        want = spec.reference(*[a.double() for a in args])
        torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)
        assert taken[-1] == path, (size, taken)


def test_a_static_wrapper_it_cannot_translate_leaves_the_any_size_kernels():
    r = capture_relu_tanh()
    args = (ArgSource("size", 0, 0), ArgSource("tensor", 0))
    odd = CUDA_WRAPPER.replace("triton_poi_fused_mul_0.run(arg1_1, buf0, s0, stream=stream0)",
                               "extern_kernels.mm(arg1_1, arg1_1, out=buf0)")  # fmt: skip
    source = build(r, InductorCode(CUDA_WRAPPER, args), InductorCode(odd, args))
    assert "AT_SHAPE" not in source and STATIC_SUFFIX not in source
    assert source == build(r, InductorCode(CUDA_WRAPPER, args))


def test_inductors_autotuned_launch_becomes_the_at_shape_config(tmp_path):
    """Where Inductor ran the model's shape (a GPU), the blocks and warps its autotuner kept
    are the static kernels' CONFIG (in SEARCH_SPACE too, though below its list), and read
    off the autotuner's one remaining launcher."""
    from types import SimpleNamespace

    from autokernel.model.inductor_code import _chosen

    launcher = SimpleNamespace(config=SimpleNamespace(kwargs={"XBLOCK": 32}, num_warps=2))
    module = SimpleNamespace(triton_poi_fused_mul_0=SimpleNamespace(launchers=[launcher]))
    chosen = _chosen(module, CUDA_WRAPPER)
    assert chosen == {"triton_poi_fused_mul_0": {"XBLOCK": 32, "num_warps": 2}}
    r = capture_relu_tanh()
    args = (ArgSource("size", 0, 0), ArgSource("tensor", 0))
    source = build(r, InductorCode(CUDA_WRAPPER, args), InductorCode(CUDA_WRAPPER, args, chosen))
    module = load(tmp_path, source)
    assert module.CONFIG["XBLOCK_1"] == 32 and module.CONFIG["num_warps_1"] == 2
    assert 32 in module.SEARCH_SPACE["XBLOCK_1"] and module.CONFIG["XBLOCK_0"] != 32
    x = torch.randn(4096)  # the captured shape: the at-shape kernel with XBLOCK 32
    torch.testing.assert_close(module.kernel_fn(x), torch.tanh(torch.relu(x)))


OUTER_SUM = """
@triton_heuristics.reduction(
    size_hints={'x': 512, 'r0_': 4096},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_red_fused_sum_0'},
)
@triton.jit
def triton_red_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr,
                           R0_BLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (xindex + 512 * r0_index), r0_mask & xmask, other=0.0)
        _tmp2 = _tmp2 + tmp0
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (xindex), tmp2, xmask)
"""


def test_the_reduction_hint_is_read_where_inductor_writes_it_a_decorator_keyword():
    """An outer reduction (hint OUTER, now a keyword of @triton_heuristics.reduction) starts
    from many rows by few columns, not from the inner reduction's one row by 2048."""
    from autokernel.model.starter import _kernel
    from autokernel.model.starter_launch import tunables

    kernel = _kernel("triton_red_fused_sum_0", OUTER_SUM, set())
    assert kernel.hint == "OUTER"
    config, _ = tunables({kernel.name: kernel}, {})
    assert (config["XBLOCK_0"], config["R0_BLOCK_0"]) == (64, 8)


def test_a_scan_keeps_the_combine_function_inductor_wrote_beside_its_kernel(tmp_path):
    """A cumsum's kernels call tl.associative_scan with a combine function Inductor defines in
    the kernel's own source, and the looped one carries the block's last value through
    triton_helpers.select_one: both must be in the starter, within the guard, and right."""
    from autokernel.model.capture import capture

    x = torch.randn(4, 40, generator=torch.Generator().manual_seed(0))
    r = capture(lambda t: torch.cumsum(t, dim=-1), [x], "cumsum")
    source = build(r, generate(r, torch.device("cpu")), generate(r, torch.device("cpu"), False))
    assert check_source(source) == []
    assert source.count("def _triton_helper_fn_add0(") == 1 and "_select_one(" in source
    module = load(tmp_path, source)
    for t in (x, torch.randn(3, 300, generator=torch.Generator().manual_seed(1))):
        torch.testing.assert_close(module.kernel_fn(t), torch.cumsum(t, -1))


def test_an_argmax_starter_picks_as_torch_does_ties_and_nans_included(tmp_path):
    """Inductor's argmax/argmin kernels reduce (value, index) pairs through
    triton_helpers.maximum_with_index / minimum_with_index: without plain-Triton forms of
    those an argmax was no target at all."""
    from autokernel.model.capture import capture

    x = torch.randn(2, 12, 3, generator=torch.Generator().manual_seed(0))
    for name, fn in (("argmax", torch.argmax), ("argmin", torch.argmin)):
        r = capture(lambda t, fn=fn: fn(t, dim=1), [x], name)
        source = build(r, generate(r, torch.device("cpu")))
        assert check_source(source) == []
        module = load(tmp_path, source)
        y = x.clone()
        y[0, 3:6, 0] = 5.0  # a tie: the lower index wins
        y[1, 7, 2] = float("nan")  # a NaN wins
        for t in (x, y):
            assert torch.equal(module.kernel_fn(t), fn(t, dim=1)), name


def judged(r, source: str, tmp_path: Path, **options):
    """The sandboxed harness's verdict on `source` as the region's kernel.py, judged at the
    model's own sizes too."""
    path = tmp_path / "kernel.py"
    path.write_text(source)
    opts = sandbox.Options(region=r.to_dict(), compile_baseline=False, extra_sizes=[r.symbols],
                           **options)  # fmt: skip
    return sandbox.evaluate(path, opts)


@pytest.mark.slow
def test_a_region_over_overlapping_windows_is_timed(tmp_path):
    """Longformer chunks hidden states into overlapping windows with as_strided; a region fed
    such windows is timed on them, its fresh values written in place over the same layout."""
    from autokernel.model.capture import capture

    base = torch.randn(64, generator=torch.Generator().manual_seed(0))
    r = capture(lambda x: torch.softmax(x * 2, -1), [base.as_strided((15, 8), (4, 1))], "win")
    verdict = judged(r, build(r, generate(r, torch.device("cpu"))), tmp_path, quick=True, seed=7)
    assert verdict.status.value == "PASS", verdict.message
    assert verdict.timings and all(t.us > 0 for t in verdict.timings)


@pytest.mark.slow
def test_a_region_that_gathers_is_judged_at_sizes_smaller_than_the_models(tmp_path):
    """gather's indices are drawn from the range the model used (0..39 into a dim of 40); the
    sweep's smaller sizes cut that dim, and indices past it made the reference replay raise
    inside evaluate(), a crash of the harness instead of a verdict."""
    from autokernel.model.capture import capture

    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(6, 40, generator=gen), torch.randint(0, 40, (6, 3), generator=gen)]
    r = capture(lambda x, i: torch.gather(x, 1, i) * 2, xs, "gather")
    verdict = judged(r, build(r, generate(r, torch.device("cpu"))), tmp_path, quick=True, seed=7)
    assert verdict.status.value == "PASS", verdict.message
