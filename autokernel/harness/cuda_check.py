"""The static guard for a CUDA kernel's C++ source (BACKEND = "cuda"), judged from its tokens.

The builder compiles the source for the device alone (`nvcc -cubin`): no host code of the
candidate's is ever compiled into anything that runs, so the source can reach the machine only
through device code and the compiler itself. The guard closes what is left, with allow-lists:

- `#include` names a header literally, from the list below (CUDA's own device headers, CUB,
  CuTe/CUTLASS); nothing else of the file system is ever read by the compiler;
- inline `asm` is a string literal of PTX whose every instruction is a tensor-core, memory,
  synchronization or data-movement one (mma, wgmma, ldmatrix, cp.async, ld, st, ...);
- no system, file, network, process or thread call names, no dlopen, whatever is declared;
- no preprocessor tricks that would show the compiler other code than the guard read: token
  pasting, `#include` of a macro, `#line`/`#embed`/`_Pragma`, macros that redefine keywords or
  the names the guard looks for, dialect-dependent spellings (see cuda_source.py).

Code inside `#if 0` is judged like the rest: the guard does not evaluate conditions.
"""

from __future__ import annotations

import re

from autokernel.harness.cuda_source import (
    SourceError,
    Token,
    logical_lines,
    skip_parens,
    string_value,
)
from autokernel.harness.cuda_source import tokenize as _tokenize
from autokernel.harness.guard_lists import PTX_CLOCK_REGISTER
from autokernel.harness.static_check import Finding

# Headers by exact name, and folders whose headers may all be included (no "..", no absolute
# path: see HEADER_NAME).
ALLOWED_HEADERS = frozenset(
    {"cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h",
     "cooperative_groups.h", "cuda_pipeline.h", "cuda_pipeline_primitives.h",
     "cuda_awbarrier.h", "cuda_awbarrier_primitives.h", "math_constants.h",
     "device_launch_parameters.h", "cub/cub.cuh", "stdint.h", "cstdint", "cfloat", "float.h",
     "climits", "limits.h", "cstddef", "type_traits", "utility", "limits"}
)  # fmt: skip
ALLOWED_HEADER_DIRS = ("cooperative_groups/", "cub/", "cuda/", "nv/", "cute/", "cutlass/")
HEADER_NAME = re.compile(r"[A-Za-z0-9_]+(?:/[A-Za-z0-9_]+)*(?:\.(?:h|hpp|cuh|inl))?")
DIRECTIVES = frozenset({"include", "define", "undef", "if", "ifdef", "ifndef", "elif", "else",
                        "endif", "pragma", "error", "warning", "elifdef", "elifndef"})  # fmt: skip
CONDITIONALS = frozenset({"if", "elif", "ifdef", "ifndef", "elifdef", "elifndef"})
PRAGMAS = frozenset({"unroll", "nounroll", "once", "nv_diag_suppress", "nv_diag_default"})

# PTX instructions inline asm may use, by the name before the first dot: tensor cores, memory
# and asynchronous copies, barriers and fences, data movement between registers and lanes, the
# conversions and special-function approximations kernels commonly hand-pick, and the branches
# a wait loop on an mbarrier needs.
PTX_ALLOWED = frozenset(
    {"mma", "wgmma", "ldmatrix", "stmatrix", "movmatrix", "cp", "ld", "ldu", "st", "prefetch",
     "prefetchu", "red", "atom", "mov", "cvt", "cvta", "shfl", "bar", "barrier", "membar",
     "fence", "mbarrier", "elect", "setmaxnreg", "griddepcontrol", "tensormap", "setp", "selp",
     "prmt", "isspacep", "mapa", "getctarank", "activemask", "redux", "vote", "match", "ex2",
     "lg2", "rcp", "rsqrt", "sqrt", "tanh", "fma", "add", "sub", "mul", "min", "max", "neg",
     "abs", "and", "or", "xor", "not", "shl", "shr", "bra", "nanosleep", "stas", "multimem"}
)  # fmt: skip
PTX_DIRECTIVES = frozenset({".reg"})  # declarations a PTX block may open with
# PTX special registers inline asm may read (%tid.x, %laneid, ...): where a thread runs and how
# the launch is shaped. Every other one is refused: the clocks and performance counters, and
# %gridid (the context's launch count: a gap since the kernel's previous call tells it that
# another kernel, the timed loop's L2 flush, ran in between), %current_graph_exec, %envreg<n>.
PTX_SREGS = frozenset(
    {"tid", "ntid", "laneid", "warpid", "nwarpid", "ctaid", "nctaid", "smid", "nsmid",
     "is_explicit_cluster", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid",
     "cluster_ctarank", "cluster_nctarank", "lanemask_eq", "lanemask_le", "lanemask_lt",
     "lanemask_ge", "lanemask_gt", "total_smem_size", "aggr_smem_size", "dynamic_smem_size",
     "reserved_smem_offset_begin", "reserved_smem_offset_end", "reserved_smem_offset_cap",
     "reserved_smem_offset_2"}
)  # fmt: skip
PTX_NAME = re.compile(r"%+([A-Za-z_$][\w$]*)")
SREG_FUNCTION = re.compile(r"get_sreg_(\w+?)(?:_is_not_supported_before_\w*)?")
# The escapes an asm string may use: the guard reads PTX as written, so `\x25`, `\073` or `\12`
# would show ptxas a `%`, a `;` or a line break the guard never saw.
ASM_ESCAPE = re.compile(r"\\(.)", re.S)
PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)  # ptxas reads both, left to right
ASM_WORDS = frozenset({"asm", "__asm__", "__asm"})
ASM_QUALIFIERS = frozenset({"volatile", "__volatile__", "inline", "goto"})

# The device clocks (guard_lists.PTX_CLOCK_REGISTER says why a kernel may not read one), under
# any of their spellings: clock64(), cuda::std::chrono's clocks, cuda::ptx::get_sreg_clock64().
CLOCK_NAME = re.compile(r"clock|globaltimer|chrono", re.IGNORECASE)
# Names that reach the operating system, files, the network, processes, threads or the loader.
# Device code cannot call them; a source naming them is refused whatever it declares.
FORBIDDEN_NAMES = frozenset(
    {"system", "popen", "pclose", "fork", "vfork", "clone", "execl", "execlp", "execle",
     "execv", "execvp", "execvpe", "execve", "fexecve", "posix_spawn", "posix_spawnp",
     "syscall", "ptrace", "kill", "raise", "abort", "exit", "_exit", "_Exit", "atexit",
     "fopen", "freopen", "fdopen", "fclose", "fread", "fwrite", "fgets", "fputs", "fscanf",
     "fprintf", "fflush", "open", "openat", "creat", "close", "unlink", "rename", "remove",
     "mkdir", "rmdir", "chmod", "chown", "mmap", "munmap", "mprotect", "ioctl", "socket",
     "connect", "bind", "listen", "accept", "send", "sendto", "recv", "recvfrom",
     "getaddrinfo", "gethostbyname", "dlopen", "dlsym", "dlclose", "dlmopen", "dladdr",
     "pthread_create", "pthread_attr_init", "thread", "jthread", "async", "getenv",
     "setenv", "putenv", "unsetenv", "environ", "FILE", "ifstream", "ofstream", "fstream",
     "filebuf", "filesystem", "_Pragma", "__pragma", "cudaMalloc",
     "cudaFree", "cudaMemcpy", "cudaMemcpyAsync", "cudaStreamCreate", "cudaLaunchKernel",
     "cudaDeviceSynchronize", "cudaSetDevice", "cudaGraphLaunch", "__nv_cudaEntityRegister",
     "__has_include", "__has_include_next", "__has_embed",
}
)  # fmt: skip
# C++ and CUDA keywords: a macro of one of these names would change what the guard read.
KEYWORDS = frozenset(
    {"alignas", "alignof", "auto", "bool", "break", "case", "catch", "char", "class", "const",
     "constexpr", "consteval", "constinit", "const_cast", "continue", "decltype", "default",
     "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
     "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
     "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
     "register", "reinterpret_cast", "return", "short", "signed", "sizeof", "static",
     "static_assert", "static_cast", "struct", "switch", "template", "this", "throw", "true",
     "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
     "volatile", "while", "asm", "defined", "include", "define", "pragma", "__global__",
     "__device__", "__host__", "__shared__", "__constant__", "__managed__",
     "__launch_bounds__", "__forceinline__", "__noinline__", "__restrict__",
     "__grid_constant__", "__cluster_dims__", "__maxnreg__", "__volatile__", "__inline__"}
)  # fmt: skip


class _Judge:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def flag(self, line: int, what: str) -> None:
        self.findings.append(Finding(line, what))

    def directive(self, line: list[Token]) -> None:
        head = line[0].line
        if len(line) == 1:
            return  # the null directive
        name = line[1].text
        if name not in DIRECTIVES:
            self.flag(head, f"#{name} is not allowed in CUDA source")
            return
        if name == "include":
            self.include(line)
        elif name in ("define", "undef"):
            self.macro(line)
        elif name == "pragma":
            word = line[2].text if len(line) > 2 else ""
            if word not in PRAGMAS:
                self.flag(
                    head, f"#pragma {word} is not allowed (allowed: {', '.join(sorted(PRAGMAS))})"
                )

    def include(self, line: list[Token]) -> None:
        head = line[0].line
        rest = line[2:]
        if rest and rest[0].kind == "string" and len(rest) == 1:
            header = string_value(rest[0])
        elif len(rest) == 1 and rest[0].kind == "header":
            header = rest[0].text[1:-1]
        else:
            self.flag(head, '#include must name a header literally, as <name> or "name"')
            return
        ok = HEADER_NAME.fullmatch(header) and (
            header in ALLOWED_HEADERS or header.startswith(ALLOWED_HEADER_DIRS)
        )
        if not ok:
            self.flag(head, f"#include <{header}> is not allowed: only CUDA's device headers "
                      "(cuda_bf16.h, cuda_fp16.h, mma.h, ...; program.md lists them) and headers "
                      f"under {', '.join(ALLOWED_HEADER_DIRS)}")  # fmt: skip

    def macro(self, line: list[Token]) -> None:
        head = line[0].line
        if len(line) < 3 or line[2].kind != "ident":
            self.flag(head, f"#{line[1].text} must name a macro")
            return
        name = line[2].text
        reserved = name.startswith("__") or re.match(r"_[A-Z]", name)
        if name in KEYWORDS or name in FORBIDDEN_NAMES or name in ASM_WORDS or reserved:
            self.flag(head, f"#{line[1].text} {name}: a macro may not take the name of a keyword, "
                      "a reserved name or a name the guard looks for")  # fmt: skip

    def asm(self, toks: list[Token], i: int) -> None:
        head = toks[i].line
        j = i + 1
        while j < len(toks) and toks[j].text in ASM_QUALIFIERS:
            j += 1
        if j >= len(toks) or toks[j].text != "(":
            self.flag(head, f'{toks[i].text} must be followed by ("PTX" ...)')
            return
        start, j = j, j + 1
        parts: list[str] = []
        while j < len(toks) and toks[j].kind == "string" and toks[j].text.startswith('"'):
            parts.append(string_value(toks[j]))
            j += 1
        if not parts or j >= len(toks) or toks[j].text not in (":", "::", ")"):
            self.flag(head, "inline asm must be one or more plain string literals of PTX, not a "
                      "macro or an expression")  # fmt: skip
            return
        try:
            end = skip_parens(toks, start)
        except SourceError:
            end = len(toks)
        if any(t.kind == DIRECTIVE for t in toks[start:end]):
            self.flag(head, "a preprocessor directive inside an asm statement is not allowed")
        for bad in ptx_problems("".join(parts)):
            self.flag(head, bad)

    def tokens(self, toks: list[Token]) -> None:
        for i, tok in enumerate(toks):
            if tok.text == "##":
                self.flag(tok.line, "token pasting (##) is not allowed in CUDA source")
            elif tok.kind == "ident" and tok.text in ASM_WORDS:
                self.asm(toks, i)
            elif tok.kind == "ident" and CLOCK_NAME.search(tok.text):
                self.flag(tok.line, f"{tok.text} reads a clock: a kernel may not time itself")
            elif tok.kind == "ident" and _bad_sreg_function(tok.text):
                self.flag(tok.line, f"{tok.text} reads a special register that is not allowed "
                          f"(allowed: {', '.join(sorted(PTX_SREGS))})")  # fmt: skip
            elif tok.kind == "ident" and tok.text in FORBIDDEN_NAMES:
                self.flag(tok.line, f"{tok.text} is not allowed in CUDA source: kernels "
                          "compute on the device; no system, file, network, process or thread "
                          "calls")  # fmt: skip


DIRECTIVE = "directive"  # stands in the code's token stream for one directive line
PTX_SPLIT = re.compile(r";|\\n|\n")


def ptx_problems(template: str) -> list[str]:
    """Why the PTX of one asm statement is refused: one line per instruction not allowed."""
    problems = []
    escapes = {m.group(1) for m in ASM_ESCAPE.finditer(template)} - {"n", "t"}
    if escapes:
        shown = ", ".join("\\" + e for e in sorted(escapes))
        return [f"escape {shown} in inline asm: write the PTX out (only \\n and \\t)"]
    text = template.replace("\\t", " ").replace("\\n", "\n")
    if "/*" in PTX_COMMENT.sub(" ", text):
        return ["a PTX /* comment in inline asm is never closed"]
    text = PTX_COMMENT.sub(" ", text)
    stmts = PTX_SPLIT.split(text)
    declared = set()
    for stmt in stmts:
        if stmt.strip().strip("{}").strip().startswith(".reg"):
            declared |= {m.group(1) for m in PTX_NAME.finditer(stmt)}
    for name in sorted({m.group(1) for m in PTX_NAME.finditer(text)}):
        base = re.sub(r"\d+$", "", name)
        if name in PTX_SREGS or ((name in declared or base in declared) and not _sreg_like(name)):
            continue  # a special register allowed, or a register the asm declared
        problems.append(f"PTX register %{name} is not allowed in inline asm (special registers "
                        f"allowed: {', '.join(sorted(PTX_SREGS))})")  # fmt: skip
    for stmt in stmts:
        stmt = stmt.strip().strip("{}").strip()
        while re.match(r"[A-Za-z_$][\w$]*:", stmt):  # labels
            stmt = stmt.split(":", 1)[1].strip()
        stmt = re.sub(r"^@!?%?[\w$]+\s+", "", stmt)  # a predicate guard
        stmt = stmt.strip("{}").strip()
        if not stmt:
            continue
        opcode = stmt.split()[0]
        if opcode.startswith("."):
            if opcode not in PTX_DIRECTIVES:
                problems.append(f"PTX directive {opcode} is not allowed in inline asm")
            continue
        base = opcode.split(".")[0]
        clock = re.search(PTX_CLOCK_REGISTER, stmt)
        if clock:
            problems.append(f"PTX register {clock.group(0)} reads a clock or counter: a kernel "
                            "may not time itself")  # fmt: skip
        if base not in PTX_ALLOWED:
            problems.append(f"PTX instruction {opcode} is not allowed in inline asm "
                            "(allowed: tensor-core, memory, barrier and data-movement "
                            "instructions)")  # fmt: skip
    return problems


def _sreg_like(name: str) -> bool:
    """Whether a PTX name is (or shadows) a special register outside PTX_SREGS."""
    return (
        re.fullmatch(r"(clock|globaltimer|pm|envreg|gridid|current_graph_exec)\w*", name)
        is not None
    )


def _bad_sreg_function(word: str) -> bool:
    """cuda::ptx::get_sreg_<name>() of a special register outside PTX_SREGS."""
    m = SREG_FUNCTION.fullmatch(word)
    return m is not None and re.sub(r"_[xyz]$", "", m.group(1)) not in PTX_SREGS


def check_cuda_source(source: str) -> list[Finding]:
    """Findings of the C++ guard (empty when clean). Never raises for bad source: what the
    tokenizer cannot read is itself a finding."""
    if "\0" in source:
        return [Finding(0, "CUDA source contains a null byte")]
    try:
        toks = _tokenize(source)
    except (SourceError, RecursionError) as exc:
        return [Finding(_line_of(str(exc)), str(exc))]
    judge = _Judge()
    code: list[Token] = []
    for line in logical_lines(toks):
        if line[0].text == "#":
            judge.directive(line)
            if len(line) > 1 and line[1].text == "define":
                judge.tokens(line[3:])  # a macro's body, judged on its own: asm in it too
            elif len(line) > 1 and line[1].text in CONDITIONALS:
                judge.tokens(line[2:])  # a condition's names: __has_include probes the disk
            code.append(Token(DIRECTIVE, "#", line[0].line))
        else:
            code.extend(line)
    judge.tokens(code)
    return sorted(judge.findings, key=lambda f: f.line)


def tokenize(source: str) -> list[Token]:
    """The tokens of a source the guard passed (for the builder's entry points)."""
    return _tokenize(source)


def _line_of(message: str) -> int:
    m = re.match(r"line (\d+)", message)
    return int(m.group(1)) if m else 0
