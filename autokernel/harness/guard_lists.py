"""The static guard's lists: what kernel.py may import, name and call. program.md states the
public ones word for word (tests/test_program.py holds the two to each other)."""

from __future__ import annotations

import builtins

ALLOWED_IMPORTS = frozenset(
    {"torch", "triton", "math", "functools", "typing", "dataclasses", "itertools", "enum",
     "operator", "__future__", "autokernel"}
)  # fmt: skip
# What kernel.py may take from autokernel: the starters' launch fast path (autokernel/launch.py),
# which reads Triton internals a candidate may not name itself, and the CUDA builder
# (autokernel/cuda_build.py), which compiles only device code that passed the C++ guard.
# Nothing else of the package.
AUTOKERNEL_MEMBERS = {
    "launch": frozenset({"launcher", "remember"}),
    "cuda_build": frozenset({"load"}),
}

# torch.<path> that kernel.py may touch: allocation, dtypes, device queries. Everything else in
# torch computes and is off limits. (No torch.utils.cpp_extension: its host code would run
# unjudged; BACKEND = "cuda" builds through autokernel.cuda_build.)
ALLOWED_TORCH = frozenset(
    {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "full", "arange",
     "float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16",
     "int32", "int64", "long", "int", "uint8", "bool", "dtype", "device", "Size", "Tensor",
     "finfo", "iinfo", "no_grad", "inference_mode", "is_tensor",
     "cuda.get_device_properties", "cuda.current_device", "cuda.is_available",
     "cuda.device_count", "cuda.get_device_capability", "cuda.get_device_name"}
)  # fmt: skip
# Classes whose members are methods shared by every tensor: torch.Tensor.add(x, y) computes,
# and torch.Tensor.<method> is exactly what a forged comparison would rebind.
TORCH_NO_MEMBERS = frozenset({"Tensor"})

# Named so program.md can list them; every builtin outside ALLOWED_BUILTINS is refused anyway.
FORBIDDEN_CALLS = frozenset(
    {"open", "eval", "exec", "compile", "__import__", "input", "breakpoint", "globals",
     "locals", "vars", "getattr", "setattr", "delattr", "memoryview", "exit", "quit"}
)  # fmt: skip
_EXCEPTIONS = {
    n for n, v in vars(builtins).items()
    if isinstance(v, type) and issubclass(v, Exception) and not n.startswith("_")
}  # fmt: skip
# No getattr/hasattr/type/dir: each looks names up by string or builds classes at run time.
ALLOWED_BUILTINS = frozenset(
    {"abs", "all", "any", "bool", "callable", "chr", "classmethod", "complex", "dict", "divmod",
     "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int",
     "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object",
     "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set",
     "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip", "bin", "bytes",
     "NotImplemented", "Ellipsis", *_EXCEPTIONS}
)  # fmt: skip
REFUSED_BUILTINS = frozenset(set(dir(builtins)) - ALLOWED_BUILTINS)
assert FORBIDDEN_CALLS <= REFUSED_BUILTINS
SAFE_DUNDER_NAMES = frozenset({"__name__"})
SAFE_DUNDER_METHODS = frozenset({"__init__", "__post_init__", "__repr__", "__str__"})
# Builtins a jit body may call: the interpreter runs them on the host, the compiler knows them.
JIT_BUILTINS = frozenset({"range", "min", "max", "int", "float", "bool", "len", "abs", "print"})

# Members per module (None: every public member). Left out on purpose: typing.get_type_hints and
# functools.singledispatch evaluate string annotations; operator.attrgetter/methodcaller look
# attributes up by a string the guard cannot read; dataclasses.make_dataclass runs exec;
# functools.wraps gets and sets the attributes its strings name (updated=("__globals__",) merged
# torch's globals, os among them, into kernel.py's).
_FUNCTOOLS = {"lru_cache", "cache", "partial", "reduce", "cached_property", "total_ordering",
              "cmp_to_key"}  # fmt: skip
_TYPING = {"Any", "Optional", "Union", "Callable", "Sequence", "Iterable", "Iterator", "Tuple",
           "List", "Dict", "Literal", "NamedTuple", "Final", "TYPE_CHECKING", "cast", "TypeVar",
           "Mapping", "ClassVar"}  # fmt: skip
# No asdict/astuple: they deep-copy every value that is not a dataclass, and a deep copy runs the
# value's __reduce_ex__ (given by a string key, enum.Enum("E", {"__reduce_ex__": f})), then sets
# every attribute the reduction names on the object it names: setattr by string, dunders
# included, on Triton's shared objects (tests/faults/guard_asdict_deepcopy_setattr.py).
_DATACLASSES = {"dataclass", "field", "fields", "replace", "is_dataclass", "InitVar"}
MODULE_MEMBERS: dict[str, frozenset[str] | None] = {
    "math": None,
    "itertools": None,
    "operator": None,
    "functools": frozenset(_FUNCTOOLS),
    "typing": frozenset(_TYPING),
    "dataclasses": frozenset(_DATACLASSES),
    "enum": frozenset({"Enum", "IntEnum", "Flag", "IntFlag", "auto", "unique"}),
    "__future__": frozenset({"annotations"}),
}
REFUSED_MEMBERS = {"operator": frozenset({"attrgetter", "methodcaller"})}
TRITON_MEMBERS = frozenset(
    {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "set_allocator"}
)
TRITON_JIT_DECORATORS = frozenset({"jit", "autotune", "heuristics"})
TENSOR_DESCRIPTOR = ("tools", "tensor_descriptor", "TensorDescriptor")
# triton.language's submodules lead on to importlib and pkgutil (tl.extra.module_from_spec):
# only the math libraries among them are open.
TL_LIBRARIES = (("extra", "cuda", "libdevice"), ("extra", "hip", "libdevice"),
                ("extra", "libdevice"), ("math",))  # fmt: skip
TL_MODULES = frozenset(
    {"core", "extra", "math", "random", "standard", "target_info", "semantic", "cuda", "hip",
     "libdevice", "utils", "gdc"}
)  # fmt: skip

# Tensor methods that compute. Outside @triton.jit bodies kernel.py has no business calling them:
# the arithmetic belongs in the kernel. (Inside jit bodies these names are Triton's own.)
FORBIDDEN_METHODS = frozenset(
    {"sum", "mean", "prod", "cumsum", "cumprod", "softmax", "log_softmax", "exp", "exp2", "expm1",
     "log", "log2", "log1p", "sigmoid", "silu", "tanh", "relu", "gelu", "sqrt", "rsqrt", "pow",
     "square", "abs", "neg", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_",
     "matmul", "mm", "bmm", "addmm", "baddbmm", "addmv", "mv", "dot", "einsum", "amax", "amin",
     "max", "min", "argmax", "logsumexp", "norm", "var", "std", "layer_norm", "rms_norm",
     "cross_entropy", "nll_loss", "scaled_dot_product_attention", "linear", "gather",
     "index_select", "scatter", "scatter_add", "where", "clamp", "clip", "masked_fill", "lerp",
     "addcmul", "addcdiv", "cos", "sin", "roll", "flip", "cat", "stack", "numpy", "cpu"}
)  # fmt: skip
# Tensor methods that hand element values to Python without any aten op (the runtime monitor
# sees nothing): with them kernel.py computed a softmax in Python and passed. Refused as
# attributes, called or not: `read = x.tolist; read()` has no call of `.tolist()` to flag.
HOST_READ_ATTRS = frozenset({"tolist", "item", "map_", "map2_", "apply_"})

# Attribute names that lead out of the sandbox from any object (e.g. triton.runtime.jit.os), and
# those that reach a module's globals without a dunder: frames and generators, and a jit
# function's record of the globals it read (_k.used_global_vals, _k.get_capture_scope()).
ESCAPE_ATTRS = frozenset(
    {"os", "sys", "subprocess", "builtins", "importlib", "system", "popen", "modules", "socket",
     "ctypes", "environ", "shutil", "pathlib", "io", "gi_frame", "gi_code", "cr_frame",
     "ag_frame", "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame", "tb_next",
     "func_globals", "pkgutil", "module_from_spec", "inspect", "used_global_vals",
     "get_capture_scope", "cr_await", "gi_yieldfrom", "from_file", "ag_code", "signature",
     "from_callable", "storage", "untyped_storage", "storage_type", "numpy", "handle",
     "cr_code", "do_bench", "obj"}
)  # fmt: skip
# obj: an AttributeError's .obj (Python 3.10+) is the object the failed lookup was made on.
# `operator.no_such_name` passes the path rules (operator is open by member) and raised with
# .obj the operator module itself: a plain value, no longer an import alias, whose attrgetter
# no rule refused (tests/faults/guard_attribute_error_obj.py). Any module a failed lookup names
# is handed over so, triton.language's through a member it lacks.
# numpy, handle: an ndarray writes files (tofile, dump) and computes outside the kernel; a tensor's
# .numpy reaches one even uncalled (f = x.numpy), and under the interpreter every value of a jit
# body carries one in .handle.data.
# from_file (above): a tensor's storage maps any file, read or (shared) written, from a method;
# storage, untyped_storage, storage_type: a storage's .type("a.b") imports the module a string
# names (the fault corpus's own attacks among them) and calls what it finds with an int; a
# tensor's .storage_type() is the legacy storage class, which builds one from a size.
# signature, from_callable: Triton's functions carry an inspect.Signature, whose
# from_callable(f, eval_str=True) evals f's string annotations, and Torch's and Triton's own,
# in their modules (code in a string, unread by this guard).
# do_bench: an autotuned kernel's .do_bench is Triton's benchmarker, a device clock (see
# PTX_CLOCK_REGISTER). cr_code: a coroutine's code object, like gi_code and ag_code.
# str.format and format_map look up the attributes and items their string names, dunders
# included: "{0.__traceback__.tb_frame.f_back.f_locals}" read the harness's frames.
STRING_LOOKUP_ATTRS = frozenset({"format", "format_map"})
# PTX special registers that read a clock (%clock, %clock64, %globaltimer_lo, ...) or a
# performance counter (%pm0-7): with a clock a kernel tells the worker's timed calls (spaced by
# the L2 flush) from the judge's checked ones (back to back) and skips its work in the former.
PTX_CLOCK_REGISTER = r"%(clock|globaltimer|pm)\w*"
INLINE_ASM = ("triton", "language", "inline_asm_elementwise")
# Launching on another stream hides work from the timer's events on the current stream.
STREAM_ATTRS = frozenset({"stream", "Stream", "set_stream", "ExternalStream", "StreamContext"})
