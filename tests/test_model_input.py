"""Loading a model: the three ways in, casting, and a clear message for each bad input."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autokernel.model.loading import (
    ModelInputError,
    ModelSource,
    load_model,
    parse_input_shape,
    vocab_size,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def write(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def error(src: ModelSource) -> str:
    with pytest.raises(ModelInputError) as info:
        load_model(src)
    return str(info.value)


def test_kernelbench_file_loads_in_eval_fp32_on_cpu():
    loaded = load_model(ModelSource(path=EXAMPLES / "llama_style.py"))
    assert loaded.name == "llama_style"
    assert loaded.dtype == torch.float32 and loaded.device.type == "cpu"
    assert not loaded.model.training
    assert tuple(loaded.run().shape) == (2, 64, 512)


def test_dtype_casts_model_and_floating_inputs_only(tmp_path):
    path = write(
        tmp_path,
        """
        import torch
        from torch import nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)
            def forward(self, idx, x):
                return self.emb(idx) * x
        def get_inputs():
            return [torch.tensor([[1, 2]]), torch.ones(1, 2, 4)]
        def get_init_inputs():
            return []
        """,
    )
    loaded = load_model(ModelSource(path=path, dtype="bf16"))
    assert loaded.dtype == torch.bfloat16
    assert loaded.model.emb.weight.dtype == torch.bfloat16
    assert loaded.inputs[0].dtype == torch.int64 and loaded.inputs[1].dtype == torch.bfloat16


def test_class_with_input_shape_draws_tokens_below_the_vocabulary(tmp_path):
    path = write(
        tmp_path,
        """
        from torch import nn
        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(37, 8)
                self.head = nn.Linear(8, 37)
            def forward(self, idx):
                return self.head(self.embed(idx))
        """,
    )
    loaded = load_model(ModelSource(path=path, class_name="TinyLM", input_shape=(4, 300)))
    (tokens,) = loaded.inputs
    assert tokens.shape == (4, 300) and tokens.dtype == torch.int64
    assert int(tokens.max()) < 37 and int(tokens.min()) >= 0
    assert int(tokens.max()) > 30  # drawn over the whole vocabulary, not a fixed small range
    assert loaded.name == "TinyLM"


def test_vocab_size_prefers_the_config():
    model = torch.nn.Sequential(torch.nn.Embedding(100, 4))
    model.config = type("Config", (), {"vocab_size": 64})()
    assert vocab_size(model) == 64
    assert vocab_size(torch.nn.Sequential(torch.nn.Embedding(100, 4))) == 100
    assert vocab_size(torch.nn.Linear(2, 2)) is None


def test_input_shape_without_embedding_gives_float_inputs(tmp_path):
    path = write(tmp_path, "from torch import nn\nclass Net(nn.Linear):\n    pass\n")
    src = ModelSource(path=path, class_name="Net", input_shape=(3, 5))
    with pytest.raises(ModelInputError):  # Net needs constructor arguments
        load_model(src)
    path = write(
        tmp_path,
        "from torch import nn\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(5, 2)\n"
        "    def forward(self, x):\n        return self.l(x)\n",
    )
    loaded = load_model(ModelSource(path=path, class_name="Net", input_shape=(3, 5)))
    assert loaded.inputs[0].is_floating_point() and loaded.inputs[0].shape == (3, 5)


def test_class_by_import_path():
    loaded = load_model(ModelSource(class_name="torch.nn.Tanh", input_shape=(2, 3)))
    assert isinstance(loaded.model, torch.nn.Tanh)
    assert "input-shape" in error(ModelSource(class_name="torch.nn.Tanh"))


def test_no_such_file(tmp_path):
    msg = error(ModelSource(path=tmp_path / "missing.py"))
    assert "no such file" in msg and "missing.py" in msg


def test_no_model_class_lists_the_classes_found(tmp_path):
    path = write(tmp_path, "from torch import nn\nclass Encoder(nn.Module):\n    pass\n")
    msg = error(ModelSource(path=path))
    assert "no nn.Module class named 'Model'" in msg and "--class" in msg and "Encoder" in msg


def test_no_model_and_no_classes_says_what_to_define(tmp_path):
    msg = error(ModelSource(path=write(tmp_path, "x = 1\n")))
    assert "define class Model(nn.Module)" in msg


def test_get_inputs_missing(tmp_path):
    path = write(
        tmp_path,
        "from torch import nn\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x\n",
    )
    msg = error(ModelSource(path=path))
    assert "no get_inputs()" in msg and "--input-shape" in msg


def test_forward_raising_names_the_exception_and_line(tmp_path):
    path = write(
        tmp_path,
        """
        import torch
        from torch import nn
        class Model(nn.Module):
            def forward(self, x):
                y = x * 2
                raise ValueError("shapes do not line up")
        def get_inputs():
            return [torch.ones(2)]
        def get_init_inputs():
            return []
        """,
    )
    msg = error(ModelSource(path=path))
    assert "forward pass" in msg
    assert "ValueError: shapes do not line up" in msg
    assert "model.py:7" in msg
    assert "Traceback" not in msg


def test_import_error_names_the_line(tmp_path):
    path = write(tmp_path, "import torch\n\nraise RuntimeError('boom')\n")
    msg = error(ModelSource(path=path))
    assert "importing it raised RuntimeError: boom" in msg and "model.py:3" in msg
    path = write(tmp_path, "def broken(:\n    pass\n", name="syntax.py")
    msg = error(ModelSource(path=path))
    assert "SyntaxError" in msg and "syntax.py:1" in msg


def test_get_init_inputs_raising(tmp_path):
    path = write(
        tmp_path,
        "from torch import nn\nclass Model(nn.Module):\n    pass\n"
        "def get_init_inputs():\n    return 1 / 0\n"
        "def get_inputs():\n    return []\n",
    )
    msg = error(ModelSource(path=path))
    assert "get_init_inputs() raised ZeroDivisionError" in msg and "model.py:5" in msg


def test_bad_dtype_device_and_nothing_given():
    assert "unknown dtype" in error(ModelSource(path=EXAMPLES / "single_op.py", dtype="int3"))
    if not torch.cuda.is_available():
        assert "no CUDA GPU" in error(ModelSource(path=EXAMPLES / "single_op.py", device="cuda"))
    assert "no model given" in error(ModelSource())


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is not None, reason="transformers is installed"
)
def test_hf_config_without_transformers_gives_the_install_hint():
    assert "pip install transformers" in error(ModelSource(hf_config="gpt2"))


@pytest.mark.parametrize(("text", "shape"), [("2x128", (2, 128)), ("4,16", (4, 16)), ("7", (7,))])
def test_parse_input_shape(text, shape):
    assert parse_input_shape(text) == shape


@pytest.mark.parametrize("text", ["", "2xA", "0x4", "-1"])
def test_parse_input_shape_rejects(text):
    with pytest.raises(ModelInputError, match="--input-shape"):
        parse_input_shape(text)


def test_class_imports_from_the_current_directory(tmp_path, monkeypatch):
    """`autokernel profile --class mymodels.net.Net`: the package beside the user imports,
    though the `autokernel` script's own sys.path does not hold the current directory."""
    (tmp_path / "mymodels").mkdir()
    (tmp_path / "mymodels" / "__init__.py").write_text("")
    (tmp_path / "mymodels" / "net.py").write_text(
        "from torch import nn\nclass Net(nn.Sequential):\n"
        "    def __init__(self):\n        super().__init__(nn.Linear(5, 2))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    loaded = load_model(ModelSource(class_name="mymodels.net.Net", input_shape=(3, 5)))
    assert loaded.name == "Net" and loaded.inputs[0].shape == (3, 5)
    assert str(tmp_path) not in sys.path  # only for the import


needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="needs transformers"
)


@needs_transformers
def test_hf_config_without_a_causal_lm_builds_the_base_model(tmp_path):
    """A vision config (ViT) has no causal LM head: the base model loads, fed noise pixels of
    --input-shape, instead of an error listing every causal LM transformers knows."""
    import transformers

    transformers.ViTConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=16, patch_size=8,
    ).save_pretrained(tmp_path)  # fmt: skip
    loaded = load_model(
        ModelSource(hf_config=str(tmp_path / "config.json"), input_shape=(1, 3, 16, 16))
    )
    assert type(loaded.model).__name__ == "ViTModel"
    assert loaded.inputs[0].dtype == torch.float32 and loaded.inputs[0].shape == (1, 3, 16, 16)


@needs_transformers
def test_hf_config_missing_json_file_is_named_not_looked_up(tmp_path, monkeypatch):
    """A mistyped config.json path fails at once, naming the file, rather than being tried as
    a Hub repo id (a minute of network retries offline, then a message about the network)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # without the check: no network wait in the test
    msg = error(ModelSource(hf_config="cfg.json", input_shape=(1, 8)))
    assert "cfg.json: no such file" in msg


@needs_transformers
def test_hf_config_encoder_decoder_says_to_write_a_model_file(tmp_path):
    """T5 and the like need decoder inputs that --input-shape cannot give: say so, rather
    than the forward's own 'specify exactly one of input_ids or inputs_embeds'."""
    import transformers

    transformers.T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                          vocab_size=32).save_pretrained(tmp_path)  # fmt: skip
    msg = error(ModelSource(hf_config=str(tmp_path / "config.json"), input_shape=(1, 8)))
    assert "encoder-decoder" in msg and "KernelBench" in msg


@needs_transformers
def test_hf_config_text_model_with_one_dimension_says_batch_x_seq(tmp_path):
    """`--input-shape 16` on a text model used to fail inside its forward with a size mismatch
    naming a line of transformers; the user needs to hear which option to change and how."""
    import transformers

    transformers.LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        vocab_size=64,
    ).save_pretrained(tmp_path)  # fmt: skip
    msg = error(ModelSource(hf_config=str(tmp_path / "config.json"), input_shape=(16,)))
    assert "--input-shape 16" in msg and "BATCHxSEQ" in msg
    loaded = load_model(ModelSource(hf_config=str(tmp_path / "config.json"), input_shape=(2, 8)))
    assert loaded.inputs[0].shape == (2, 8)
