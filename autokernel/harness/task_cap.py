"""The cap on how many tasks (processes and threads) a candidate's worker and its descendants
may hold at once, enforced by the kernel, so a fork or thread bomb cannot exhaust the host.

Two mechanisms, because neither works everywhere (both verified on a Linux 6.18 VM, root, cgroup
v1 hierarchy, bwrap 0.11):

- RLIMIT_NPROC, set by the worker itself inside its bwrap user namespace. Since Linux 5.14 the
  count behind it is kept per (user namespace, uid), so inside the sandbox it counts the
  sandbox's own tasks only: as `nobody`, a sandbox capped at 200 stopped at 198 threads and at
  198 processes while 300 of nobody's processes ran outside. The kernel never enforces it for
  the host's root (uid 0 in the initial namespace, whatever the uid inside): as root the same
  sandbox made 3000 of each. Outside a user namespace it would count every process of the user
  (a desktop's browser threads too), so there it is not set.
- A pids cgroup, made by the parent for each worker where it may write the cgroup tree (root
  on a VM; a delegated subtree): the worker is moved into it before bwrap starts, by the shell
  that then execs bwrap, so nothing it starts is ever outside. The sandbox's /sys is read-only,
  so no task inside can leave it. Used where the rlimit does not hold: the harness runs as root,
  or without the sandbox.

Where neither applies, the evaluation runs uncapped and the verdict says so (a note among its
guards), as the sandbox's own absence is reported: never a crash.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CAP_ENV = "AUTOKERNEL_MAX_TASKS"  # the parent's cap for the worker's RLIMIT_NPROC; unset: none
# A CPU evaluation (TRITON_INTERPRET=1, 2 cores, softmax, matmul, flash_attention, fused_mlp,
# layernorm, all five stages and timing) peaked at 5 tasks in the worker's tree: bwrap, its
# init, the worker and torch's intra-op pool (one thread per core). A GPU evaluation adds the
# CUDA driver's few threads and nvcc/ptxas one at a time; torch may add an inter-op pool of one
# thread per core. 256 plus 4 per core leaves 50x the measured constant and 4x the per-core
# part: 264 tasks on 2 cores, 320 on 16, 768 on 128.
BASE_TASKS = 256
TASKS_PER_CPU = 4
RLIMIT, CGROUP, NONE = "rlimit", "cgroup", "none"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "autokernel-"  # each worker's cgroup: autokernel-<harness pid>-<n>
KILL_WAIT_S = 2.0  # a killed task leaves its cgroup once reaped, usually within milliseconds


def max_tasks(cpus: int | None = None) -> int:
    """The cap for this machine (cpus: its core count, os.cpu_count() when None)."""
    return BASE_TASKS + TASKS_PER_CPU * (cpus or os.cpu_count() or 1)


# --- the worker's side ----------------------------------------------------------------------


def in_initial_user_namespace() -> bool:
    """Whether this process runs in the host's own user namespace, whose uid_map is the
    identity over all 2**32 - 1 ids; bwrap's maps one id."""
    try:
        fields = Path("/proc/self/uid_map").read_text().split()
    except OSError:  # no /proc: no namespaces to tell apart
        return True
    return fields == ["0", "0", "4294967295"]


def limit_tasks(cap: int) -> bool:
    """Set RLIMIT_NPROC (soft and hard) to cap where it counts this sandbox alone: inside a user
    namespace. Returns whether it was set. The hard limit cannot be raised again without
    CAP_SYS_RESOURCE in the host's namespace, which no task inside has."""
    import resource

    if cap <= 0 or in_initial_user_namespace():
        return False
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    cap = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    return True


def cap_from_env() -> int:
    """The cap the parent chose for this worker (0: none, e.g. the trusted baseline worker)."""
    try:
        return int(os.environ.get(CAP_ENV, "0"))
    except ValueError:
        return 0


# --- the parent's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How the workers started from here are capped: kind is RLIMIT, CGROUP or NONE; for NONE,
    reason says why (it becomes the verdict's note)."""

    kind: str
    reason: str = ""
    hierarchy: Path | None = None  # CGROUP: the folder new cgroups are made in


def plan(sandbox: str, uid: int | None = None) -> Plan:
    """The mechanism for workers contained by `sandbox` ("bwrap" or "none"), started by uid."""
    uid = os.getuid() if uid is None else uid
    if sandbox != NONE and uid != 0:
        return Plan(RLIMIT)
    return _cgroup_plan(sandbox)


def apply(sandbox: str, env: dict[str, str]) -> tuple[PidsCgroup | None, str]:
    """Cap the next candidate worker: (its pids cgroup or None, the verdict's note, "" when
    capped). For RLIMIT the cap goes into the worker's `env`, which it reads at start-up."""
    chosen = plan(sandbox)
    if chosen.kind == RLIMIT:
        env[CAP_ENV] = str(max_tasks())
        return None, ""
    if chosen.kind == CGROUP and chosen.hierarchy is not None:
        try:
            return PidsCgroup(chosen.hierarchy, max_tasks()), ""
        except OSError as exc:  # the tree changed since the plan: run uncapped
            return None, f"no cap on the kernel's processes and threads: {exc}"
    return None, chosen.reason


@functools.cache
def _cgroup_plan(sandbox: str) -> Plan:
    """A pids cgroup folder this process may make cgroups in, checked once by making one."""
    who = "root" if os.getuid() == 0 else "without the sandbox"
    place, why = pids_hierarchy()
    if place is None:
        return Plan(NONE, f"no cap on the kernel's processes and threads ({who}): {why}")
    try:
        probe = place / f"{PREFIX}{os.getpid()}-probe"
        probe.mkdir(exist_ok=True)
        (probe / "pids.max").write_text("1\n")
        probe.rmdir()
    except OSError as exc:
        why = f"cannot make a pids cgroup in {place}: {exc.strerror or exc}"
        return Plan(NONE, f"no cap on the kernel's processes and threads ({who}): {why}")
    _remove_stale(place)
    return Plan(CGROUP, hierarchy=place)


def pids_hierarchy() -> tuple[Path | None, str]:
    """This process's own cgroup in the hierarchy that has the pids controller, as a folder
    (cgroup v1's pids mount, or v2's unified tree with pids enabled for its children); else
    None and why."""
    own = _own_cgroups()
    for mount_root, point, fstype, options in _cgroup_mounts():
        if fstype == "cgroup" and "pids" in options.split(","):
            rel = own.get("pids")
        elif fstype == "cgroup2" and "pids" in _read(point / "cgroup.controllers").split():
            rel = own.get("")
        else:
            continue
        if rel is None or not (rel + "/").startswith(mount_root.rstrip("/") + "/"):
            continue  # this mount shows another part of the tree
        folder = point / rel[len(mount_root.rstrip("/")) :].lstrip("/")
        if fstype == "cgroup2" and not _pids_for_children(folder):
            return None, f"pids is not enabled below {folder} (cgroup.subtree_control)"
        return folder, ""
    return None, "no cgroup hierarchy with the pids controller is mounted"


def _pids_for_children(folder: Path) -> bool:
    """Whether a v2 cgroup made in folder gets pids.max; enables it where allowed (a cgroup
    that holds processes itself, other than the root, refuses: no internal processes)."""
    if "pids" in _read(folder / "cgroup.subtree_control").split():
        return True
    try:
        (folder / "cgroup.subtree_control").write_text("+pids\n")
    except OSError:
        return False
    return True


def _cgroup_mounts() -> list[tuple[str, Path, str, str]]:
    """(root within the hierarchy, mount point, fstype, super options) of each cgroup mount."""
    out = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        mine, _, theirs = line.partition(" - ")
        fields, tail = mine.split(), theirs.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            out.append((fields[3], Path(fields[4]), tail[0], tail[2]))
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller name to this process's cgroup path ("" for v2's unified hierarchy)."""
    out: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(","):
                out[name] = parts[2]
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_stale(place: Path) -> None:
    """Remove the empty cgroups of harness processes that are gone (killed before they could
    clean up): rmdir refuses any that still holds a task."""
    for folder in place.glob(f"{PREFIX}*"):
        owner = folder.name.removeprefix(PREFIX).split("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            try:
                folder.rmdir()
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_serial = itertools.count()


class PidsCgroup:
    """One worker's pids cgroup: made with its pids.max, entered by the worker's first process
    (wrap), and at close every task left in it killed and the cgroup removed."""

    def __init__(self, place: Path, cap: int) -> None:
        self.path = place / f"{PREFIX}{os.getpid()}-{next(_serial)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(f"{cap}\n")

    def wrap(self, argv: list[str]) -> list[str]:
        """argv started by a shell that first moves itself into the cgroup, then execs argv
        (the same process: its children, bwrap's sandbox included, are born inside)."""
        enter = 'echo $$ > "$1" && shift && exec "$@"'
        return ["/bin/sh", "-c", enter, "sh", str(self.path / "cgroup.procs"), *argv]

    def kill_all(self) -> None:
        """SIGKILL every task left in the cgroup (a candidate's setsid daemon too, where the
        PID namespace did not already end it), until it is empty or KILL_WAIT_S passed."""
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            pids = [int(p) for p in _read(self.path / "cgroup.procs").split() if p.isdigit()]
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def close(self) -> None:
        """Kill what is left and remove the cgroup; one that will not go is left for
        _remove_stale, never an error for the caller."""
        self.kill_all()
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
