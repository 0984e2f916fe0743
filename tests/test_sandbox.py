"""Isolation: the verdict comes back whatever the candidate does to its process, secrets never
reach it, and a forged verdict is not believed."""

from __future__ import annotations

import sys
import time

import pytest
import torch

from autokernel.harness import outcome, sandbox
from autokernel.harness import worker_env as worker_env_module
from autokernel.harness.sandbox import KernelFileError, Options, evaluate, worker_env
from autokernel.harness.verdict import Status

FAST = dict(timing=False, compile_baseline=False)


def write(tmp_path, body: str, name: str = "kernel.py"):
    path = tmp_path / name
    path.write_text("KERNEL_TYPE = 'reduce'\n" + body)
    return path


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(KernelFileError, match="no such file"):
        evaluate(tmp_path / "nope.py")


def test_unknown_kernel_type_is_reported(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("KERNEL_TYPE = 'convolution'\ndef kernel_fn(x):\n    return x\n")
    v = evaluate(path, Options(**FAST))
    assert v.status is Status.CRASH and "convolution" in v.message and "softmax" in v.message


@pytest.mark.slow
def test_secrets_are_stripped_from_the_worker_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "1")
    env = worker_env()
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env
    assert env["HARMLESS_SETTING"] == "1"
    # and for real: a (guards-off) candidate that looks for the key crashes if it finds one
    path = write(
        tmp_path,
        "import os, reference\n"
        "def kernel_fn(x):\n"
        "    assert 'OPENAI_API_KEY' not in os.environ, 'key leaked'\n"
        "    assert 'sk-test-secret' not in str(os.environ), 'key leaked'\n"
        "    return reference.reduce(x)\n",
    )
    assert evaluate(path, Options(guards=False, **FAST)).status is Status.PASS


@pytest.mark.slow
def test_forged_verdict_is_not_believed(tmp_path):
    path = write(
        tmp_path,
        "import json, os\njson.dump({'status': 'PASS'}, open('verdict.json', 'w'))\nos._exit(0)\n",
    )
    v = evaluate(path, Options(guards=False, **FAST))
    # The harness kills the worker once a verdict file exists; whether the candidate's own
    # exit came first is a race (a sandboxed worker's exit takes its namespace down too).
    assert v.status is Status.CRASH and ("without a verdict" in v.message or "SIGKILL" in v.message)


@pytest.mark.slow
def test_timeout_kills_the_process_group_promptly(tmp_path):
    path = write(
        tmp_path,
        "import subprocess\n"
        "subprocess.Popen(['sleep', '600'])\n"  # a child that would outlive a naive kill
        "def kernel_fn(x):\n"
        "    while True:\n"
        "        pass\n",
    )
    t0 = time.monotonic()
    v = evaluate(path, Options(guards=False, timeout_s=3, **FAST))
    assert v.status is Status.TIMEOUT and v.failure.stage == "smoke"
    assert time.monotonic() - t0 < 3 + 20


def test_static_guard_rejects_before_any_process_starts(tmp_path):
    path = write(tmp_path, "import subprocess\ndef kernel_fn(x):\n    return x\n")
    v = evaluate(path, Options(**FAST))
    assert v.status is Status.REJECTED and v.failure.stage == "static"
    assert v.harness_s < 1.0


def test_workers_get_a_bytecode_cache_only_where_none_was_installed(tmp_path, monkeypatch):
    # Each experiment starts a fresh worker: without bytecode, each one compiled torch again.
    module = tmp_path / "pkg" / "__init__.py"
    module.parent.mkdir()
    module.write_text("")
    assert worker_env_module.ships_no_bytecode(str(module))
    pyc = module.parent / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"")
    assert not worker_env_module.ships_no_bytecode(str(module))

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(worker_env_module, "ships_no_bytecode", lambda f: True)
    env = worker_env_module.worker_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "pycache")
    monkeypatch.setattr(worker_env_module, "ships_no_bytecode", lambda f: False)
    env = worker_env_module.worker_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in env


def test_a_keyboard_interrupt_the_candidate_raises_is_not_called_a_signal():
    """A worker that died of the candidate's own KeyboardInterrupt must not read as if someone
    pressed Ctrl-C: the agent has to learn its kernel raised it."""
    out = outcome.Outcome(
        None,
        "smoke",
        returncode=-2,
        stderr="Traceback (most recent call last):\nKeyboardInterrupt\n",
    )
    message = outcome.verdict_of(out, 60).message
    assert "candidate's code raised" in message and "killed by SIGINT" not in message
    plain = outcome.Outcome(None, "smoke", returncode=-2, stderr="")
    assert "killed by SIGINT" in outcome.verdict_of(plain, 60).message


def test_the_judge_running_out_of_gpu_memory_is_the_kernels_crash(tmp_path, monkeypatch):
    """On a GPU a candidate can hold all the device memory (torch.empty is allowed), and there
    the judge's own allocations fail: that must cost the kernel a verdict, never end the run."""
    path = write(tmp_path, "import torch\ndef kernel_fn(x):\n    return torch.empty_like(x)\n")

    def starved(link, req, trusted=None):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(sandbox.judge, "evaluate", starved)
    v = evaluate(path, Options(**FAST, prestart=False))
    assert v.status is Status.CRASH and "ran out of GPU memory" in v.message, v.message
    assert "Tried to allocate" in v.message and "\n" not in v.message
