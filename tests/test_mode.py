import pytest
import torch

from autokernel.mode import ModeError, default_mode, parse_mode


def test_default_follows_the_device():
    assert default_mode("cpu") == "eager"
    assert default_mode(torch.device("cuda")) == "compile"
    assert parse_mode(None, "cpu") == "eager"
    assert parse_mode("auto", "cuda") == "compile"


def test_named_modes_pass_and_others_are_refused():
    assert parse_mode("compile", "cpu") == "compile"
    assert parse_mode("eager", "cuda") == "eager"
    with pytest.raises(ModeError, match="eager, compile"):
        parse_mode("fast", "cpu")
