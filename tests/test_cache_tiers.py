"""Caches by trust: a candidate never writes what a trusted reader loads, and the baselines come
from a worker that never imports candidate code (cache_tiers.py, trusted_baselines.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autokernel.cache import cache_dir
from autokernel.harness import cache_tiers, containment, prestart, trusted_baselines
from autokernel.harness.judge import Link
from autokernel.harness.sandbox import Options, evaluate, worker_env
from autokernel.harness.verdict import Status
from autokernel.harness.worker import BASELINES

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "kernels" / "reduce.py"
FAST = dict(quick=True, timing=False, prestart=False)
contained = pytest.mark.skipif(
    containment.probe().kind == containment.NONE, reason="no namespaces here"
)


def _report(tmp_path: Path, body: str, name: str = "kernel.py") -> str:
    """Run `body` as candidate code (guards off: it does I/O on purpose) and return what it
    raised, which is how a candidate's words reach the verdict."""
    path = tmp_path / name
    path.write_text("KERNEL_TYPE = 'reduce'\nimport os\n" + body)
    verdict = evaluate(path, Options(guards=False, **FAST))
    assert verdict.status is Status.CRASH, verdict.message
    return verdict.message


# ---- Triton's layered cache (no worker) ------------------------------------------------------


def test_layered_cache_reads_the_trusted_layer_and_writes_its_own(tmp_path, monkeypatch):
    from autokernel.harness.layered_cache import LayeredCache

    shared, own = tmp_path / "shared", tmp_path / "own"
    (shared / "k1").mkdir(parents=True)
    (shared / "k1" / "launcher.so").write_bytes(b"trusted")
    (shared / "k1" / "__grp__k.json").write_text(
        json.dumps({"child_paths": {"launcher.so": str(shared / "k1" / "launcher.so")}})
    )
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    monkeypatch.setenv(cache_tiers.READ_ONLY_ENV, str(shared))
    cache = LayeredCache("k1")
    assert cache.get_file("launcher.so") == str(shared / "k1" / "launcher.so")
    assert cache.get_group("k.json") == {"launcher.so": str(shared / "k1" / "launcher.so")}
    written = cache.put(b"mine", "new.cubin")
    assert Path(written).parent == own / "k1" and not (shared / "k1" / "new.cubin").exists()
    assert cache.get_file("new.cubin") == written
    assert LayeredCache("k2").get_file("launcher.so") is None


def test_triton_takes_the_layered_class_from_the_environment(monkeypatch, tmp_path):
    import triton.runtime.cache as tc

    from autokernel.harness.layered_cache import LayeredCache

    monkeypatch.setenv("TRITON_CACHE_MANAGER", cache_tiers.LAYERED_MANAGER)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    assert isinstance(tc.get_cache_manager("abcd"), LayeredCache)


def test_tiers_replace_the_users_cache_paths(tmp_path):
    env = {"TRITON_CACHE_DIR": "/home/u/.triton/cache", "TORCHINDUCTOR_CACHE_DIR": "/tmp/ti_u",
           "AUTOKERNEL_CACHE_DIR": "/home/u/.cache/autokernel", "PATH": "/usr/bin"}  # fmt: skip
    candidate = cache_tiers.worker_env(env, tmp_path, trusted=False)
    trusted = cache_tiers.worker_env(env, tmp_path, trusted=True)
    root = cache_tiers.trusted_root()
    for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "AUTOKERNEL_CACHE_DIR"):
        assert Path(candidate[name]).is_relative_to(tmp_path.resolve())
        assert Path(trusted[name]).is_relative_to(root)
    assert candidate["TRITON_CACHE_MANAGER"] == cache_tiers.LAYERED_MANAGER
    assert "TRITON_CACHE_MANAGER" not in trusted and trusted["PATH"] == "/usr/bin"
    writable, read_only = cache_tiers.mounts(candidate, tmp_path, trusted=False)
    assert writable == [tmp_path.resolve()] and root / "triton" in read_only


# ---- what a contained candidate can reach ------------------------------------------------------


@pytest.mark.slow
@contained
def test_a_candidate_cannot_write_the_trusted_cache(tmp_path):
    body = (
        "ro = os.environ['AUTOKERNEL_TRITON_READ_ONLY']\n"
        "try:\n    open(os.path.join(ro, 'planted.so'), 'wb').write(b'x')\n    got = 'wrote'\n"
        "except OSError as e:\n    got = type(e).__name__\n"
        "raise RuntimeError('trusted cache: ' + got)\n"
    )
    message = _report(tmp_path, body)
    assert "trusted cache: OSError" in message or "trusted cache: PermissionError" in message
    assert not (cache_tiers.trusted_root() / "triton" / "planted.so").exists()


@pytest.mark.slow
@contained
def test_a_candidate_sees_neither_the_users_caches_nor_the_baseline_store(tmp_path, monkeypatch):
    users = tmp_path / "users-triton"
    users.mkdir()
    (users / "launcher.so").write_bytes(b"x")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(users))
    trusted_baselines.store("probe", {"device": "cpu"})
    paths = [str(users / "launcher.so"), str(cache_dir() / trusted_baselines.STORE)]
    body = f"raise RuntimeError('seen: ' + str([os.path.exists(p) for p in {paths!r}]))\n"
    assert "seen: [False, False]" in _report(tmp_path, body)


@pytest.mark.slow
@contained
def test_what_a_candidate_compiles_is_gone_for_the_next_evaluation(tmp_path):
    plant = (
        "d = os.environ['TRITON_CACHE_DIR']\nos.makedirs(os.path.join(d, 'k'), exist_ok=True)\n"
        "open(os.path.join(d, 'k', 'planted.cubin'), 'wb').write(b'x')\n"
        "raise RuntimeError('planted in ' + d)\n"
    )
    assert "planted in" in _report(tmp_path, plant, "plant.py")
    look = (
        "found = [f for v in ('TRITON_CACHE_DIR', 'AUTOKERNEL_TRITON_READ_ONLY')\n"
        "         for _, _, fs in os.walk(os.environ[v]) for f in fs if f == 'planted.cubin']\n"
        "raise RuntimeError('found ' + str(len(found)))\n"
    )
    assert "found 0" in _report(tmp_path, look, "look.py")


# ---- the baseline worker ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_baseline_worker_imports_no_kernel():
    worker = prestart.Worker.start(True, worker_env(), trusted=True)
    try:
        link = Link(worker, (120.0, 120.0), lambda p: None, lambda: None)
        # quick, without torch.compile's baseline: what is measured does not matter here, and
        # compiling the reference cost 20-25 s of this test's 28 s on two cores
        first = link.first({"kernel_type": "reduce", "seed": 1, "force_cpu": True,
                            "timing": False, "quick": True, "compile_baseline": False,
                            "mode": BASELINES})  # fmt: skip
        assert first["device"] == "cpu"
        reply = link.request({"op": "import", "files": [str(STARTER)], "names": ["x"]})
        assert reply["status"] == "CRASH" and "imports no kernel" in reply["error"]
    finally:
        worker.close()


@pytest.mark.slow
def test_baselines_are_measured_once_and_the_judge_uses_the_stored_ones(tmp_path, monkeypatch):
    opts = Options(quick=True, compile_baseline=False, prestart=False, force_cpu=True)
    starts: list[bool] = []
    original = prestart.Worker.start

    def counted(force_cpu, env, trusted=False):
        starts.append(trusted)
        return original(force_cpu, env, trusted)

    monkeypatch.setattr(prestart.Worker, "start", counted)
    first = evaluate(STARTER, opts)
    assert first.status is Status.PASS, first.message
    assert first.timings and all(t.eager_us for t in first.timings)
    assert starts.count(True) <= 1  # none when an earlier test measured this key already
    key = trusted_baselines.request_key({"kernel_type": "reduce", "quick": True,
                                         "compile_baseline": False, "force_cpu": True})  # fmt: skip
    # What the judge reports is the stored reply, not anything the candidate's worker said:
    # change the store and the next verdict follows it.
    reply = trusted_baselines.lookup(key)
    assert reply is not None
    for label in reply["baselines"]:
        reply["baselines"][label]["eager"] = 123456.0
    trusted_baselines.store(key, reply)
    starts.clear()
    second = evaluate(STARTER, opts)
    assert second.status is Status.PASS and starts == [False]
    assert all(t.eager_us == 123456.0 for t in second.timings)


def test_a_wiped_trusted_cache_makes_the_stored_baselines_stale(monkeypatch):
    trusted_baselines.store("wipe-test", {"device": "cpu"})
    assert trusted_baselines.lookup("wipe-test") == {"device": "cpu"}
    os.unlink(cache_tiers.trusted_root() / trusted_baselines.STAMP)
    assert trusted_baselines.lookup("wipe-test") is None


# ---- what a candidate can take from the machine ------------------------------------------------


@pytest.mark.slow
def test_a_candidate_is_the_first_to_go_and_writes_bounded_files(tmp_path):
    from autokernel.harness.worker import MAX_FILE_BYTES

    body = (
        "import resource\n"
        "score = open('/proc/self/oom_score_adj').read().strip()\n"
        "limit = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_FSIZE, (limit[0], limit[1] * 2))\n"
        "    raised = 'raised'\n"
        "except (ValueError, OSError):\n    raised = 'kept'\n"
        "raise RuntimeError(f'oom {score} fsize {limit} {raised}')\n"
    )
    message = _report(tmp_path, body)
    assert f"oom 1000 fsize ({MAX_FILE_BYTES}, {MAX_FILE_BYTES}) kept" in message


@contained
def test_the_private_tmp_is_capped():
    binary = containment.probe().binary
    if not containment._sized(binary):
        pytest.skip("this bwrap cannot size a tmpfs")
    argv, env = containment.build(
        binary, [sys.executable, "-c", "import os; s = os.statvfs('/tmp');"
                 " print(s.f_blocks * s.f_frsize)"], worker_env(), Path(tempfile.mkdtemp())
    )  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == containment.TMP_BYTES


def test_the_judge_reads_only_the_end_of_a_huge_stderr(tmp_path):
    from autokernel.harness.sandbox import _tail

    path = tmp_path / "stderr"
    with path.open("wb") as f:
        f.truncate(64 << 30)  # 64 GiB, sparse: reading it whole would take the judge's memory
        f.seek(0, os.SEEK_END)
        f.write(b"the end")
    t0 = time.perf_counter()
    assert _tail(path, 100).endswith("the end") and len(_tail(path, 100)) == 100
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.slow
def test_a_candidates_words_reach_no_terminal_as_control_sequences(tmp_path):
    # clear screen, a fake keep line, the clipboard (OSC 52), a right-to-left override
    body = (
        "import sys\nsys.stderr.write('\\x1b[2J\\x1b[Hkeep 0.1 us\\x1b]52;c;aGk=\\x07')\n"
        "raise RuntimeError('\\x1b[2J\\x1b[1A\\x9b2J fake \\u202e txet')\n"
    )
    path = tmp_path / "kernel.py"
    path.write_text("KERNEL_TYPE = 'reduce'\n" + body)
    verdict = evaluate(path, Options(guards=False, **FAST))
    text = json.dumps(verdict.to_json(), ensure_ascii=False)
    assert "fake" in verdict.message and "keep 0.1 us" in verdict.stderr_tail
    for control in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert control not in text


@pytest.mark.gpu
def test_a_copy_of_the_starter_finds_every_launcher_in_the_trusted_cache(tmp_path):
    # The baseline worker compiled the starter (warm_starter.py): a candidate with the same
    # signatures builds no launcher of its own (each would be a C compile in every worker).
    probe = (
        "\n_starter_fn, _calls = kernel_fn, [0]\n"
        "def kernel_fn(*args):\n"
        "    out = _starter_fn(*args)\n    _calls[0] += 1\n"
        "    if _calls[0] == 30:\n"
        "        import os\n        d = os.environ['TRITON_CACHE_DIR']\n"
        "        built = sorted(f for _, _, fs in os.walk(d) for f in fs if f.endswith('.so'))\n"
        "        raise RuntimeError(f'private launchers: {built}')\n"
        "    return out\n"
    )
    path = tmp_path / "kernel.py"
    path.write_text((ROOT / "kernels" / "softmax.py").read_text() + probe)
    warm = evaluate(ROOT / "kernels" / "softmax.py", Options(prestart=False))  # baselines first
    assert warm.status is Status.PASS, warm.message
    verdict = evaluate(path, Options(guards=False, prestart=False))
    assert "private launchers: []" in verdict.message, verdict.message
