"""The Ray pool's checks that need no cluster: an address where nothing answers is refused at
once, a checkout (not an installed package) is what the actors are given, and the sources the
actors judge with are told apart from the driver's by content. The pool itself, on a local Ray
cluster, is in tests/test_parallel_run.py."""

from __future__ import annotations

import shutil
import site
import socket
import time
from pathlib import Path

import pytest

import autokernel
from autokernel.eval_job import code_fingerprint
from autokernel.pool import PoolError
from autokernel.ray_pool import check_reachable, code_path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: nothing listens there


@pytest.mark.parametrize("prefix", ["", "ray://"])
def test_an_address_where_nothing_answers_is_one_line_at_once(prefix):
    address = f"{prefix}127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(PoolError, match=r"nothing answers at 127\.0\.0\.1") as err:
        check_reachable(address)
    assert time.monotonic() - t0 < 10  # Ray alone waited over 5 minutes
    assert "\n" not in str(err.value) and "ray start --head" in str(err.value)


def test_auto_and_a_listening_address_pass():
    check_reachable("auto")  # Ray finds the local cluster itself
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_reachable(f"127.0.0.1:{s.getsockname()[1]}")


def test_a_checkout_is_put_on_the_actors_path_an_installed_package_is_not(tmp_path):
    package = Path(autokernel.__file__).parent
    assert code_path(package) == str(package.resolve().parent)  # this checkout
    installed = Path(site.getsitepackages()[0]) / "autokernel"
    assert code_path(installed) is None


def test_the_fingerprint_follows_the_sources_not_their_bytecode(tmp_path):
    copy = tmp_path / "autokernel"
    shutil.copytree(Path(autokernel.__file__).parent / "run", copy / "run")
    before = code_fingerprint(copy)
    (copy / "run" / "__pycache__").mkdir(exist_ok=True)
    (copy / "run" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert code_fingerprint(copy) == before
    path = copy / "run" / "keep_rule.py"
    path.write_text(path.read_text() + "MIN_GAIN = 0.02\n")  # another keep rule
    assert code_fingerprint(copy) != before
