"""The C++ guard (autokernel/harness/cuda_check.py): attacks refused, honest kernels pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from autokernel.harness.cuda_check import check_cuda_source, ptx_problems
from autokernel.harness.cuda_source import SourceError, entry_points, tokenize
from autokernel.harness.guards import literal_assignment

STARTERS = sorted((Path(__file__).resolve().parents[1] / "kernels" / "cuda").glob("[a-z]*.py"))

ATTACKS = {
    "system call": 'extern "C" __global__ void k() { system("id"); }',
    "declared libc": 'extern "C" int system(const char*);',
    "file io": 'void f() { FILE* f = fopen("/etc/passwd", "r"); }',
    "socket": "int s = socket(2, 1, 0);",
    "thread": "std::thread t(f);",
    "dlopen": 'void* h = dlopen("libc.so.6", 2);',
    "environment": 'char* k = getenv("OPENAI_API_KEY");',
    "absolute include": "#include </etc/passwd>",
    "parent include": '#include "../../secrets.h"',
    "include outside the list": "#include <unistd.h>",
    "include of a macro": "#define H <cuda_bf16.h>\n#include H",
    "include_next": "#include_next <cuda_bf16.h>",
    "embed": '#embed "/etc/shadow"',
    "line directive": '#line 1 "kernel.cu"',
    "token pasting": "#define J(a, b) a##b\nJ(sys, tem)(0);",
    "redefine a keyword": "#define volatile\n",
    "redefine asm": "#define asm foo\n",
    "macro named like a forbidden call": "#define fopen f\n",
    "reserved macro": "#define __CUDA_ARCH__ 900\n",
    "_Pragma": '_Pragma("GCC system_header")',
    "unknown pragma": "#pragma GCC poison x",
    "trap in asm": 'extern "C" __global__ void k() { asm volatile("trap;"); }',
    "exit in asm": 'asm("exit;");',
    "call in asm": 'asm("call f;");',
    "asm built by a macro": '#define P "trap;"\nvoid f() { asm(P); }',
    "asm through a macro name": '#define A asm\nvoid f() { A("trap;"); }',
    "asm stringified": "#define S(x) #x\nvoid f() { asm(S(trap;)); }",
    "directive inside asm": 'void f() { asm("mov.u32 %0, 1;"\n#if 1\n"trap;"\n#endif\n); }',
    "universal character name": "int \\u0073ystem = 0;",
    "raw string": 'const char* s = R"x(system)x";',
    "trigraph": "??=include </etc/passwd>",
    "digraph": "%:include </etc/passwd>",
    "splice into a directive": "#inc\\\nlude </etc/passwd>",
    "comment inside a header name": "#include <cuda/*x*/std>",
    "digit separator hides nothing": "int a = 1'0; int b = system(0); int c = 1'0;",
    "quote in a char literal": "char c = '\"'; int d = system(0);",
    "unterminated comment": "/* never closed",
    "non-ascii identifier": "int syst\u00e9m = 0;",
    # what the compiler reads otherwise than a naive guard (tests/faults/guard_cuda_*)
    "hex escape in asm": 'asm volatile("mov.u64 %0, \\x25\\x25globaltimer;" : "=l"(t));',
    "octal escape in asm": 'asm volatile("mov.u32 %0, 1\\073 trap;" : "=r"(t));',
    "ptx block comment": 'asm("mov.u64 %0, 0 /* // */; mov.u64 %0, %%globaltimer;" : "+l"(t));',
    "unclosed ptx comment": 'asm("mov.u32 %0, 1; /* x" : "=r"(t));',
    "splice after a space": '// x \\ \n/*\nasm("trap;");\n// */',
    "lone carriage return": '// x\rasm("trap;");',
    "digit separator then underscore": "#define D(x)\nD(1'_) asm(\"trap;\"); D(2'_)",
    "digit separator then dollar": "#define D(x)\nD(1'$) int k; D(2'$)",
    "dollar": "int a$b = 0;",
    "__has_include probe": '#if __has_include("/root/.ssh/id_rsa")\n#error yes\n#endif',
    "__has_include header name": "#if __has_include(</*>)\n#endif\n#include </etc/passwd>\n// */",
    "__has_include_next": "#ifdef X\n#elif __has_include_next(<x>)\n#endif",
    "gridid register": 'asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));',
    "gridid function": "unsigned long long g = cuda::ptx::get_sreg_gridid();",
    "envreg register": 'asm("mov.u32 %0, %%envreg1;" : "=r"(g));',
    "shadowed special register": 'asm("{ .reg .u64 %%gridid; mov.u64 %0, %%gridid; }" : "=l"(g));',
}

HONEST = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include <cuda/std/cstdint>
#define TILE 64   // a comment naming system() and fopen is only a comment
#define LOAD(p) __ldg(p)
#pragma unroll 4
const char* doc = "strings may say system(\"x\") and #include </etc/passwd>";
char quote = '\'';
int million = 1'000'000;
template <int N> __device__ float twice(float v) { return N * v; }
extern "C" __global__ void __launch_bounds__(256, 2) k(
    const __nv_bfloat16* __restrict__ x, float* y, long long n, float eps, int m, unsigned u,
    double d, bool b) {
  unsigned s = 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(x));
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %0, 0;\n"
      "  @p mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%1}, {%2}, {%3}, {%4};\n"
      "}\n" : "+r"(m) : "r"(s), "r"(s), "r"(s), "r"(s));
  asm("WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT;"
      :: "r"(s), "r"(m));
}
"""


@pytest.mark.parametrize("source", ATTACKS.values(), ids=ATTACKS.keys())
def test_attack_sources_are_refused(source):
    assert check_cuda_source(source), source


def test_honest_device_code_passes():
    assert check_cuda_source(HONEST) == []


def test_findings_name_the_line():
    src = '#include <cuda_bf16.h>\n\nvoid f() {\n  asm("trap;");\n}\n'
    (finding,) = check_cuda_source(src)
    assert finding.line == 4 and "trap" in finding.what


def test_ptx_allowlist_reads_labels_predicates_and_blocks():
    assert (
        ptx_problems("{ .reg .b32 r; L1: @!p bra L1; ld.global.v4.u32 {%0,%1,%2,%3}, [%4]; }") == []
    )
    assert ptx_problems("mov.u32 %0, %%globaltimer;\\n\\ttrap;") != []
    assert ptx_problems(".global .u32 g;") != []


def test_ptx_allowlist_takes_the_hopper_matmul_instructions():
    """What the wgmma matmul starter issues: warpgroup MMA and its fence, commit and wait, the
    async-proxy fence after cp.async, a predicate for scale-d. Already allowed by family name
    (wgmma, fence, setp); held here so a narrower list cannot drop them unnoticed."""
    for ptx in ("wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;",
                "wgmma.wait_group.sync.aligned 1;", "fence.proxy.async.shared::cta;",
                "{\\n.reg .pred p;\\nsetp.ne.b32 p, %2, 0;\\nwgmma.mma_async.sync.aligned."
                "m64n8k16.f32.bf16.bf16 {%0,%1}, %3, %4, p, 1, 1, 0, 1;\\n}\\n"):  # fmt: skip
        assert ptx_problems(ptx) == [], ptx
    assert ptx_problems("wgmma.fence.sync.aligned; trap;") != []


def test_ptx_reads_declared_registers_and_shape_registers():
    assert ptx_problems("{ .reg .b32 %%r<2>; mov.u32 %%r1, %%laneid; mov.u32 %0, %%r1; }") == []
    assert ptx_problems("mov.u32 %0, %%tid.x;\\n\\tmov.u32 %1, %%ctaid.y; // %%clock") == []
    assert check_cuda_source("unsigned t = cuda::ptx::get_sreg_tid_x();") == []


def test_entry_points_carry_parameter_kinds():
    (entry,) = entry_points(tokenize(HONEST))
    assert entry.name == "k" and entry.params == ("P", "P", "q", "f", "i", "I", "d", "?")


def test_entry_point_with_an_unpassable_parameter_is_an_error():
    with pytest.raises(SourceError, match="cannot pass"):
        entry_points(tokenize('extern "C" __global__ void k(float2 v) {}'))


@pytest.mark.parametrize("path", STARTERS, ids=[p.stem for p in STARTERS])
def test_cuda_starters_pass_the_guard(path):
    source = literal_assignment(path.read_text(), "CUDA_SOURCE")
    assert isinstance(source, str), f"{path.name} has no CUDA_SOURCE literal"
    assert check_cuda_source(source) == []


@pytest.mark.parametrize(
    "source, needle",
    [
        ("__global__ void k(long long* o) { o[0] = clock64(); }", "clock64 reads a clock"),
        ("__global__ void k(int* o) { o[0] = clock(); }", "clock reads a clock"),
        ("__global__ void k(long long* o) { o[0] = cuda::ptx::get_sreg_globaltimer(); }",
         "get_sreg_globaltimer reads a clock"),
        ("__global__ void k(long long* o) { o[0] = cuda::std::chrono::system_clock::now()"
         ".time_since_epoch().count(); }", "chrono reads a clock"),
        ('__global__ void k(long long* o) { long long t; asm volatile("mov.u64 %0, '
         '%%globaltimer;" : "=l"(t)); o[0] = t; }', "%globaltimer"),
    ],
)  # fmt: skip
def test_device_clocks_are_refused(source, needle):
    # with a clock a kernel tells the worker's timed calls from the judge's checked ones
    got = [str(f) for f in check_cuda_source(source)]
    assert any(needle in g for g in got), got
