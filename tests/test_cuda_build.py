"""The CUDA builder (autokernel/cuda_build.py) on the CPU: defines, cache keys, the build lock,
and the compiler's errors as an agent reads them (with the nvcc of the nvidia-cuda-nvcc wheel)."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path

import pytest
from cuda_helpers import nvcc_or_skip

from autokernel import cuda_build
from autokernel.cuda_build import CudaBuildError, CudaSourceRefused


def test_config_becomes_defines_and_strings_become_flags():
    flags = cuda_build.define_flags({"ITEMS": 4, "FAST": True, "SCALE": 0.5, "VARIANT": "onepass"})
    assert flags == ["-DITEMS=4", "-DFAST=1", "-DSCALE=0.5", "-DVARIANT_onepass=1"]


@pytest.mark.parametrize(
    "config",
    [
        {"X": "1 -Xcompiler -fplugin=evil.so"},
        {"X": "system"},
        {"A B": 1},
        {"__CUDA_ARCH__": 1},
        {"X": [1, 2]},
        {"X": float("inf")},  # repr() would define X as the identifier inf
    ],
)
def test_config_that_could_inject_code_is_refused(config):
    if config == {"X": "system"}:  # an identifier string becomes X_system=1, never X=system
        assert cuda_build.define_flags(config) == ["-DX_system=1"]
        return
    with pytest.raises(CudaSourceRefused):
        cuda_build.define_flags(config)


def test_cache_key_changes_with_source_flags_and_compiler():
    base = cuda_build.cache_key("src", ["-DA=1"], "13.0.88")
    assert base == cuda_build.cache_key("src", ["-DA=1"], "13.0.88")
    assert base != cuda_build.cache_key("src2", ["-DA=1"], "13.0.88")
    assert base != cuda_build.cache_key("src", ["-DA=2"], "13.0.88")
    assert base != cuda_build.cache_key("src", ["-DA=1"], "13.1.0")


def test_arch_is_the_gpus_own_with_the_arch_specific_suffix_on_hopper():
    assert cuda_build.gpu_arch((9, 0)) == "sm_90a"
    assert cuda_build.gpu_arch((8, 0)) == "sm_80"


def test_load_refuses_source_the_guard_refuses_before_anything_else():
    with pytest.raises(CudaSourceRefused, match="system"):
        cuda_build.load('extern "C" __global__ void k() { system("id"); }')


def test_load_without_a_gpu_is_a_build_error_not_a_crash(monkeypatch):
    monkeypatch.setattr(cuda_build.torch.cuda, "is_available", lambda: False)
    with pytest.raises(CudaBuildError, match="needs an NVIDIA GPU"):
        cuda_build.load('extern "C" __global__ void k(float* y) { y[0] = 1.f; }')


def _fake_nvcc(folder: Path) -> str:
    """An 'nvcc' that logs each run, takes a while, and writes the -o file."""
    script = folder / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        f'echo run >> "{folder}/runs"\n'
        "sleep 1\n"
        'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then printf cubin > "$2"; fi; shift; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _build(key: str, nvcc: str, out: Path) -> None:
    image, _ = cuda_build._cached_or_built(key, "source", nvcc, [])
    out.write_bytes(image)


def test_two_processes_building_one_kernel_compile_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    nvcc = _fake_nvcc(tmp_path)
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_build, args=("k" * 64, nvcc, tmp_path / f"out{i}")) for i in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert (tmp_path / "runs").read_text().count("run") == 1
    assert (tmp_path / "out0").read_bytes() == (tmp_path / "out1").read_bytes() == b"cubin"
    image, compile_s = cuda_build._cached_or_built("k" * 64, "source", nvcc, [])
    assert image == b"cubin" and compile_s is None  # the third comes from the cache


def test_build_cache_lives_under_cache_dir(tmp_path, monkeypatch):
    """The sandboxed worker's cache_dir() is its own root: a build made there must never be
    what the user's process loads, so the builder writes nowhere else."""
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    cuda_build._cached_or_built("a" * 64, "source", _fake_nvcc(tmp_path), [])
    assert (tmp_path / "cache" / "cuda" / ("a" * 64 + ".cubin")).exists()


BROKEN = """#include <cuda_bf16.h>
extern "C" __global__ void k(float* y) {
  float unused = 0;
  y[0] = undefined_thing + 1;
  int z = "str";
  y[1] = foo(2);
  y[2] = bar(3);
  y[3] = baz(4);
  y[4] = qux(5);
  y[5] = quux(6);
}
"""


def test_compiler_errors_come_back_trimmed_with_their_lines():
    nvcc = nvcc_or_skip()
    with pytest.raises(CudaBuildError) as info:
        cuda_build.compile_cubin(BROKEN, nvcc, [*cuda_build.BASE_FLAGS, "-arch=sm_90a"])
    message = str(info.value)
    first = message.splitlines()[0]
    assert first == 'nvcc: line 4: error: identifier "undefined_thing" is undefined', message
    assert "y[0] = undefined_thing + 1;" in message  # the offending line, as nvcc shows it
    assert message.count("error:") == cuda_build.MAX_ERRORS
    assert "(and 2 more errors)" in message  # seven in all
    assert "warning" not in message and "/tmp" not in message


def test_ptxas_errors_come_back_too():
    nvcc = nvcc_or_skip()
    source = 'extern "C" __global__ void k(float* y) {\n  __shared__ float s[100000];\n' \
             "  s[threadIdx.x] = 1; y[threadIdx.x] = s[threadIdx.x + 1];\n}\n"  # fmt: skip
    with pytest.raises(CudaBuildError, match="too much shared data"):
        cuda_build.compile_cubin(source, nvcc, [*cuda_build.BASE_FLAGS, "-arch=sm_90a"])


def test_a_build_failure_in_the_worker_is_a_fail_of_the_first_stage():
    """serve.py turns the builder's error into a FAIL reply, judge.py into the verdict the agent
    reads: the compiler's first error on the message's first line, the rest of the stages
    skipped."""
    from autokernel.harness import judge, serve
    from autokernel.harness.verdict import Status, Verdict

    try:
        raise CudaBuildError('nvcc: line 4: error: identifier "x" is undefined\n    x = 1;')
    except CudaBuildError as exc:
        reply = serve._build_fault(exc)
    assert reply["status"] == "FAIL"
    verdict = judge._build_failed(Verdict(status=Status.PASS), reply)
    assert verdict.status is Status.FAIL and verdict.failure.stage == "smoke"
    assert verdict.message == (
        'FAIL in smoke: CUDA build failed: nvcc: line 4: error: identifier "x" is undefined'
    )
    assert [s.status for s in verdict.stages] == ["FAIL"] + ["SKIPPED"] * 4
    refused = serve._build_fault(CudaSourceRefused("line 2: trap"))
    assert judge._build_failed(Verdict(status=Status.PASS), refused).status is Status.REJECTED
    assert serve._build_fault(ValueError("the candidate's own")) is None


def test_the_workers_account_of_its_builds_is_reduced_to_numbers():
    from autokernel.harness.judge import builds

    claimed = [
        {"cached": True, "compile_s": None, "seconds": 0.02, "extra": "x" * 10_000},
        {"seconds": "forged"},
        "junk",
        {"cached": "yes", "compile_s": 3, "seconds": 3.5},
    ]
    assert builds(claimed) == [
        {"cached": True, "seconds": 0.02, "compile_s": None},
        {"cached": False, "seconds": 3.5, "compile_s": 3.0},
    ]
    assert builds("not a list") == []


def test_source_and_config_of_other_types_than_str_and_dict_are_refused():
    """A str subclass may define its own replace(): the guard would read other text than nvcc
    compiles. Plain types only, for the source, CONFIG, its keys and its values."""

    class Two(str):
        def replace(self, *args):
            return 'extern "C" __global__ void k() {}'

    class Sly(int):
        def __str__(self):
            return '1; asm("trap;")'

    with pytest.raises(CudaSourceRefused, match="plain string"):
        cuda_build.load(Two('extern "C" __global__ void k() { asm("trap;"); }'))
    with pytest.raises(CudaSourceRefused, match="plain dict"):
        cuda_build.load('extern "C" __global__ void k() {}', Two())
    with pytest.raises(CudaSourceRefused):
        cuda_build.define_flags({"X": Sly(1)})
