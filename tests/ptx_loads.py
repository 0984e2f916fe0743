"""Compile starter kernels for an H100/H200 (sm_90) on a machine without a GPU and count the
global load/store instructions by width; print them as JSON.

Run as a script (``python tests/ptx_loads.py cases.json``) in its own process: the CPU tests set
TRITON_INTERPRET, under which triton.jit gives interpreted functions that cannot be compiled.
Triton's wheel carries ptxas, so this needs no CUDA install.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path


def counts(
    path: str, kernel: str, signature: dict, constexprs: dict, aligned: list, num_warps: int
) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location(Path(path).stem + "_ptx", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, kernel)
    # Arguments named in `aligned` are specialised as 16-byte aligned (pointers) or divisible by
    # 16 (integers), as Triton does at launch; the others (an odd row stride) are not.
    names = list(signature)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(
        src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}
    )
    ptx = compiled.asm["ptx"]
    widths = Counter(m.group(0) for m in re.finditer(r"\b(?:ld|st)\.global[.a-z0-9]*", ptx))
    return {"widths": dict(widths)}


def main() -> int:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = {name: counts(**case) for name, case in cases.items()}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
