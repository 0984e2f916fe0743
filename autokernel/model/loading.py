"""Loading the user's model for every command that takes one (profile, verify).

Three ways in: a Python file in the KernelBench convention (`Model`, `get_inputs()`,
`get_init_inputs()`); a class by name (`--class`, in the file or as `package.module.Class`) with
`--input-shape`; or a Hugging Face config (`--hf-config`, built without weights). Every way ends
in one checked forward pass, so a model that cannot run fails here with a message naming the
file and line, not later inside the profiler.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from autokernel.model.name_shield import shield_kernels_name
from autokernel.specs import parse_dtype

SEED = 0  # inputs drawn from --input-shape repeat across commands, so profile and verify agree


class ModelInputError(Exception):
    """The model could not be loaded or run; the message says what to change."""


@dataclass
class ModelSource:
    path: Path | None = None
    class_name: str | None = None
    input_shape: tuple[int, ...] | None = None
    hf_config: str | None = None
    dtype: str | None = None  # default: bfloat16 on CUDA, float32 on the CPU
    device: str | None = None  # default: cuda when available


@dataclass
class LoadedModel:
    model: nn.Module
    inputs: list
    dtype: torch.dtype
    device: torch.device
    name: str

    def run(self) -> object:
        """One inference forward pass on the stored inputs."""
        with torch.no_grad():
            return self.model(*self.inputs)


def parse_input_shape(text: str) -> tuple[int, ...]:
    """'2x128' or '2,128' → (2, 128)."""
    try:
        shape = tuple(int(p) for p in text.replace(",", "x").split("x") if p.strip())
    except ValueError:
        raise ModelInputError(f"--input-shape {text!r}: write it as numbers, e.g. 2x128") from None
    if not shape or any(d <= 0 for d in shape):
        raise ModelInputError(f"--input-shape {text!r}: give positive sizes, e.g. 2x128")
    return shape


def load_model(src: ModelSource) -> LoadedModel:
    """Build the model, its inputs, cast both, and run one forward pass to prove it works."""
    device = _device(src.device)
    dtype = _dtype(src.dtype, device)
    shield_kernels_name()  # before transformers or a model module that imports it
    if src.hf_config:
        model, inputs, name, origin = _from_hf(src)
    elif src.path is not None:
        model, inputs, name, origin = _from_file(src)
    elif src.class_name and "." in src.class_name:
        model, inputs, name, origin = _from_import(src)
    else:
        raise ModelInputError(
            "no model given: pass a model file (KernelBench convention: Model, get_inputs, "
            "get_init_inputs), --class package.module.Class with --input-shape, or --hf-config"
        )
    model = model.to(device=device, dtype=dtype).eval()
    inputs = [_cast(x, dtype, device) for x in inputs]
    loaded = LoadedModel(model=model, inputs=inputs, dtype=dtype, device=device, name=name)
    _check_forward(loaded, origin)
    return loaded


def _device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ModelInputError(f"--device {name!r}: use cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelInputError(f"--device {name}: this machine has no CUDA GPU; use --device cpu")
    return device


def run_placement(
    model: nn.Module, inputs: list, cuda_available: bool | None = None
) -> tuple[torch.device, torch.dtype]:
    """Where and in which dtype a model given as (model, inputs) runs, for code that did not
    load it (verify_model, use_kernels). Parameters decide where there are any, then buffers,
    then the floating inputs; a model with none of them (a parameter-free softmax whose
    get_inputs made CPU tensors) goes to the GPU when there is one, as load_model would put it,
    and the dtype reported is the one its tensors are in, never a default."""
    held = [t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
    floats = [x for x in _tensors(inputs) if x.is_floating_point()]
    if held:
        return held[0].device, held[0].dtype
    on_gpu = torch.cuda.is_available() if cuda_available is None else cuda_available
    given = next((x.device for x in _tensors(inputs) if x.device.type != "cpu"), None)
    device = given or torch.device("cuda" if on_gpu else "cpu")
    return device, floats[0].dtype if floats else torch.float32


def placed_at(model: nn.Module, inputs: list) -> tuple[torch.device, torch.dtype]:
    """Where the model and inputs are now (after place_inputs), for the report: the device
    its tensors are really on, never the one asked for."""
    return run_placement(model, inputs, cuda_available=False)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def place_inputs(inputs: list, device: torch.device) -> list:
    """The inputs on `device`, dtypes kept (the model's own dtype decides the compute)."""
    return [_move(x, device) for x in inputs]


def _move(x: object, device: torch.device) -> object:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_move(v, device) for v in x)
    return x


def _dtype(name: str | None, device: torch.device) -> torch.dtype:
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return parse_dtype(name)
    except ValueError as exc:
        raise ModelInputError(f"--dtype: {exc}") from None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ModelInputError(f"{path}: no such file; give the path of a Python model file")
    if path.suffix != ".py":
        raise ModelInputError(f"{path}: not a .py file; give a Python model file")
    name = f"autokernel_user_model_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelInputError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up by name
    sys.path.insert(0, str(path.parent))  # so the file can import its siblings
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ModelInputError(f"{path}: importing it raised {_describe(exc, path)}") from None
    finally:
        sys.path.remove(str(path.parent))
    return module


def _from_file(src: ModelSource) -> tuple[nn.Module, list, str, Path | None]:
    path = src.path.expanduser().resolve() if src.path else None
    module = _import_file(path)
    class_name = src.class_name or "Model"
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        found = sorted(
            n for n, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, nn.Module) and v.__module__ == module.__name__
        )  # fmt: skip
        hint = (
            f"pass --class with one of: {', '.join(found)} (and --input-shape)"
            if found
            else "define class Model(nn.Module) with get_inputs() and get_init_inputs()"
        )
        raise ModelInputError(f"{path}: no nn.Module class named {class_name!r}; {hint}")
    init_args = _call(module, "get_init_inputs", path) if hasattr(module, "get_init_inputs") else []
    model = _construct(cls, init_args, path)
    if src.input_shape is not None:
        inputs = [_tokens_or_noise(model, src.input_shape)]
    elif hasattr(module, "get_inputs"):
        inputs = _call(module, "get_inputs", path)
    else:
        raise ModelInputError(
            f"{path}: no get_inputs(); define get_inputs() returning the forward's arguments "
            "as a list, or pass --input-shape (e.g. 2x128)"
        )
    return model, inputs, path.stem if class_name == "Model" else class_name, path


def _from_import(src: ModelSource) -> tuple[nn.Module, list, str, Path | None]:
    module_name, _, class_name = src.class_name.rpartition(".")
    # As `python -m` does: the current directory first, so a package beside the user imports
    # (the `autokernel` script's own path holds only its bin folder).
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ModelInputError(
            f"--class {src.class_name}: cannot import {module_name}: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if added:
            sys.path.remove(here)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ModelInputError(
            f"--class {src.class_name}: {module_name} has no nn.Module {class_name}"
        )
    if src.input_shape is None:
        raise ModelInputError(f"--class {src.class_name}: also pass --input-shape, e.g. 2x128")
    origin = Path(module.__file__) if getattr(module, "__file__", None) else None
    model = _construct(cls, [], origin)
    return model, [_tokens_or_noise(model, src.input_shape)], class_name, origin


def _from_hf(src: ModelSource) -> tuple[nn.Module, list, str, Path | None]:
    try:
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM
    except ImportError:
        raise ModelInputError(
            "--hf-config needs the transformers package: pip install transformers"
        ) from None
    if src.hf_config.endswith(".json") and not Path(src.hf_config).is_file():
        # A missing local file would otherwise be looked up on the Hub as a repo id: a
        # minute of retries offline, then a network error that never names the typo.
        raise ModelInputError(
            f"--hf-config {src.hf_config}: no such file (from {Path.cwd()}); give the path of "
            "a config.json, its folder, or a model name on the Hub"
        )
    try:
        config = AutoConfig.from_pretrained(src.hf_config)
    except Exception as exc:
        raise ModelInputError(
            f"--hf-config {src.hf_config}: cannot load the config ({type(exc).__name__}: {exc}); "
            "give a model name on the Hub or a local config.json or its folder"
        ) from None
    if getattr(config, "is_encoder_decoder", False):
        # Its forward needs decoder inputs too; --input-shape makes one tensor, and the
        # forward's own error ("specify exactly one of input_ids...") says nothing of this.
        raise ModelInputError(
            f"--hf-config {src.hf_config}: {config.model_type!r} is an encoder-decoder model, "
            "which takes encoder and decoder inputs; --input-shape gives one tensor: write a "
            "model file in the KernelBench convention (Model, get_inputs) that passes both"
        )
    # A causal LM where the architecture has one (its logits are what users run); else the
    # base model, so encoders and vision models (ViT, CLIP's towers) load too. Decided by the
    # registry, not by trying: a causal LM that fails to build must say why, not turn into
    # its base model.
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    causal = getattr(config, "model_type", None) in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    auto = AutoModelForCausalLM if causal else AutoModel
    try:
        model = auto.from_config(config)
    except Exception as exc:
        raise ModelInputError(
            f"--hf-config {src.hf_config}: transformers cannot build a "
            f"{'causal LM' if causal else 'model'} of type {config.model_type!r} from it "
            f"({type(exc).__name__}: {_first_line(str(exc))}); fix the config, or write a model "
            "file in the KernelBench convention (Model, get_inputs) that builds and calls it"
        ) from None
    shape = src.input_shape or (1, 128)
    if vocab_size(model) is not None and len(shape) != 2:
        # transformers' text models take input_ids of (batch, sequence); another rank fails deep
        # inside the forward with a size mismatch that does not say which option to change.
        raise ModelInputError(
            f"--input-shape {'x'.join(map(str, shape))}: a {config.model_type} model takes token "
            "ids as BATCHxSEQ, e.g. --input-shape 1x128"
        )
    name = Path(src.hf_config).stem if Path(src.hf_config).exists() else src.hf_config
    return model, [_tokens_or_noise(model, shape)], name.replace("/", "_"), None


def _first_line(text: str, limit: int = 300) -> str:
    """transformers' errors can list every supported class (thousands of characters)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _call(module: ModuleType, fn: str, path: Path) -> list:
    try:
        value = getattr(module, fn)()
    except Exception as exc:
        raise ModelInputError(f"{path}: {fn}() raised {_describe(exc, path)}") from None
    if isinstance(value, torch.Tensor):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise ModelInputError(f"{path}: {fn}() must return a list, not {type(value).__name__}")
    return list(value)


def _construct(cls: Callable, args: list, origin: Path | None) -> nn.Module:
    try:
        return cls(*args)
    except Exception as exc:
        raise ModelInputError(
            f"{cls.__name__}(*get_init_inputs()) raised {_describe(exc, origin)}"
        ) from None


def vocab_size(model: nn.Module) -> int | None:
    """The token vocabulary: config.vocab_size, else the first nn.Embedding's size."""
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(size, int) and size > 0:
        return size
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
    return None


def _tokens_or_noise(model: nn.Module, shape: tuple[int, ...]) -> torch.Tensor:
    """Token ids below the model's vocabulary when it embeds tokens, else normal noise."""
    gen = torch.Generator().manual_seed(SEED)
    vocab = vocab_size(model)
    if vocab is not None:
        return torch.randint(0, vocab, shape, generator=gen)
    return torch.randn(shape, generator=gen)


def _cast(x: object, dtype: torch.dtype, device: torch.device) -> object:
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype, device) for v in x)
    return x


def _check_forward(loaded: LoadedModel, origin: Path | None) -> None:
    try:
        loaded.run()
    except Exception as exc:
        where = f"{origin}: " if origin else ""
        raise ModelInputError(
            f"{where}the forward pass of {loaded.name} ({loaded.dtype}, {loaded.device}) raised "
            f"{_describe(exc, origin)}"
        ) from None


def _describe(exc: BaseException, origin: Path | None) -> str:
    """'ValueError: message (at model.py:12)', the line being the deepest one in the user's file
    (else the deepest frame), so the user sees where their code failed without a traceback."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} (at {Path(exc.filename).name}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    if origin is not None:
        own = [f for f in frames if Path(f.filename).resolve() == origin.resolve()]
        frames = own or frames
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"
