"""The git side of a run: one branch per run, one commit per experiment, touching only kernel.py.

The user's directory is the workspace and may hold their own uncommitted work, so nothing here
resets hard, stashes or commits anything but our own paths: every commit uses `--only <path>`
(the user's staged files stay staged and out of it) and a revert is a soft reset plus a checkout
of kernel.py alone. A directory that is not the top of a work tree gets its own repository, even
inside another repo, so a run never writes to a parent project's history.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autokernel.atomic import write_atomic
from autokernel.run import layout
from autokernel.secrets import redact

if TYPE_CHECKING:
    import git

BRANCH_PREFIX = "autokernel/"
ATTEMPT_PREFIX = "refs/autokernel/attempts/"
KERNEL = layout.KERNEL.as_posix()
EXCLUDED = layout.EXCLUDED
DEFAULT_NAME = "autokernel"
DEFAULT_EMAIL = "autokernel@localhost"
# Unattended commits of generated code: a user's pre-commit hook or GPG prompt must not stall
# or veto an overnight run.
COMMIT_FLAGS = ("--no-verify", "--no-gpg-sign")
_TARGET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# How git says a write failed for lack of space ("sha1 file '.git/index.lock' write error. Out
# of diskspace", "unable to write ...: No space left on device", a quota)
_DISK_FULL = ("out of diskspace", "no space left", "disk quota exceeded")


class WorkspaceError(Exception):
    """A git or filesystem problem the user can fix; the message says how."""


def _load_git() -> Any:
    """Import GitPython late: its import fails outright when no git executable exists."""
    exe = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE", "git")
    if shutil.which(exe) is None:
        raise WorkspaceError("git is not installed or not on PATH: install git and try again")
    try:
        import git
    except ImportError as e:
        raise WorkspaceError(f"git could not be started ({e}): check your git installation") from e
    return git


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


class Workspace:
    """A git work tree rooted at the user's directory; all of autokernel's git goes through here."""

    def __init__(self, root: Path, repo: git.Repo) -> None:
        self.root = root
        self.kernel_path = root / KERNEL
        self._repo = repo

    @classmethod
    def open(cls, root: Path) -> Workspace:
        """Open `root` as a repo (initialising one if it is not a work tree's top level)."""
        gitmod = _load_git()
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise WorkspaceError(f"{root} is not a directory: create it or pick another one")
        if not _writable(root):
            raise WorkspaceError(f"cannot write to {root}: fix its permissions or pick another one")
        try:
            repo = gitmod.Repo(root)  # no search_parent_directories: the workspace is its own repo
            if repo.bare:
                raise WorkspaceError(f"{root} is a bare git repository: use a work tree")
            if Path(repo.working_tree_dir or "").resolve() != root:
                raise gitmod.InvalidGitRepositoryError(root)
        except (gitmod.InvalidGitRepositoryError, gitmod.NoSuchPathError):
            try:
                repo = gitmod.Repo.init(root)
            except (OSError, gitmod.GitCommandError) as e:
                raise WorkspaceError(f"cannot create a git repository in {root}: {e}") from e
        ws = cls(root, repo)
        try:
            ws._exclude_untracked()
        except OSError as e:
            raise WorkspaceError(f"cannot write to {root}/.git: {e}") from e
        for key, value in (("user.name", DEFAULT_NAME), ("user.email", DEFAULT_EMAIL)):
            if ws._git("config", "--get", key, check=False)[0] != 0:
                ws._git("config", "--local", key, value)
        return ws

    def _git(self, cmd: str, *args: str, check: bool = True) -> tuple[int, str, str]:
        """Run `git <cmd> <args>` in the work tree; (status, stdout, stderr), raising if `check`."""
        status, out, err = self._run_git([cmd, *args])
        if check and status != 0:
            hint = ""
            if any(sign in err.lower() for sign in _DISK_FULL):  # its message names a .lock too
                hint = " (the disk is full: free space, then `autokernel run --resume`)"
            elif ".lock" in err:
                hint = " (another git command is running, or a crashed one left its lock file)"
            raise WorkspaceError(f"git {cmd} failed: {err.strip() or out.strip()}{hint}")
        return status, out, err

    def _run_git(self, argv: list[str], exact: bool = False) -> tuple[int, Any, str]:
        """(status, stdout, stderr) of one git process in its own session: a Ctrl-C (SIGINT to
        the terminal's whole process group) means "stop after this experiment" and must not kill
        the git that records it. So nothing here reads through GitPython's object database,
        whose `git cat-file` stays alive in our group: killed, it broke the next read's pipe
        and turned a clean stop into an internal error. exact: stdout as bytes, untrimmed."""
        return self._repo.git.execute(
            [self._repo.git.GIT_PYTHON_GIT_EXECUTABLE, *argv],
            with_extended_output=True, with_exceptions=False, start_new_session=True,
            stdout_as_string=not exact, strip_newline_in_stdout=not exact,
        )  # fmt: skip

    def _exclude_untracked(self) -> None:
        rel = self._git("rev-parse", "--git-path", "info/exclude")[1].strip()
        path = self.root / rel
        text = path.read_text() if path.exists() else ""
        present = {line.strip().lstrip("/") for line in text.splitlines()}
        missing = [p for p in EXCLUDED if p.lstrip("/") not in present]
        if missing:
            path.parent.mkdir(parents=True, exist_ok=True)
            sep = "" if not text or text.endswith("\n") else "\n"
            path.write_text(text + sep + "\n".join(missing) + "\n")

    def _has_commits(self) -> bool:
        return self._git("rev-parse", "--verify", "--quiet", "HEAD", check=False)[0] == 0

    def _sha(self, ref: str) -> str | None:
        spec = f"{ref}^{{commit}}"
        status, out, _ = self._git("rev-parse", "--verify", "--quiet", spec, check=False)
        return out.strip() if status == 0 else None

    def _kernel_state(self) -> str:
        """'absent', 'untracked', 'clean' or 'dirty' (staged or unstaged changes against HEAD)."""
        if self._git("ls-files", "--error-unmatch", "--", KERNEL, check=False)[0] != 0:
            present = self.kernel_path.exists() or self.kernel_path.is_symlink()
            return "untracked" if present else "absent"
        if not self._has_commits():
            return "dirty"  # staged but never committed
        unstaged = self._git("diff", "--quiet", "--", KERNEL, check=False)[0]
        staged = self._git("diff", "--cached", "--quiet", "HEAD", "--", KERNEL, check=False)[0]
        return "dirty" if unstaged or staged else "clean"

    def _require_committed_kernel(self) -> None:
        state = self._kernel_state()
        if state == "untracked":
            raise WorkspaceError("kernel.py is not committed: commit it or move it away")
        if state == "dirty":
            raise WorkspaceError(
                "kernel.py has uncommitted changes: commit or stash kernel.py first"
            )

    def _require_run_branch(self) -> None:
        if not (self.branch or "").startswith(BRANCH_PREFIX):
            raise WorkspaceError("not on an autokernel/* branch: start or resume a run first")

    def _commit_path(self, rel: str, source: str, message: str, *, empty_ok: bool = False) -> str:
        """Write `rel` and commit it alone; the user's other staged changes stay staged."""
        if not message.strip():
            raise WorkspaceError("a commit message is required")
        message = redact(message)  # an agent's hypothesis goes into git history
        try:
            write_atomic(self.root / rel, source, self.root / layout.SCRATCH)
        except OSError as e:
            raise WorkspaceError(f"cannot write {self.root / rel}: {e}") from e
        self._git("add", "--force", "--", rel)  # --force: the user's ignore rules may list it
        extra = ("--allow-empty",) if empty_ok else ()
        self._git("commit", *COMMIT_FLAGS, *extra, "-m", message, "--only", "--", rel)
        return self.head()

    @property
    def branch(self) -> str | None:
        """The checked-out branch's short name, None on a detached HEAD."""
        status, out, _ = self._git("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return out.strip() if status == 0 else None

    def branches(self) -> list[str]:
        """Existing run branches (`autokernel/*`), sorted."""
        out = self._git("for-each-ref", "--format=%(refname:short)", "refs/heads/autokernel/")[1]
        return sorted(line for line in out.splitlines() if line)

    def check_can_start(self, tag: str) -> None:
        """Everything start() would refuse, checked before the run writes any state."""
        if not tag or "/" in tag or tag.startswith("-"):
            raise WorkspaceError(f"invalid tag {tag!r}: use letters, digits, '-', '_' or '.'")
        name = BRANCH_PREFIX + tag
        if self._git("check-ref-format", "--branch", name, check=False)[0] != 0:
            raise WorkspaceError(f"invalid tag {tag!r}: use letters, digits, '-', '_' or '.'")
        if self._sha(f"refs/heads/{name}") is not None:
            raise WorkspaceError(f"branch {name} already exists: use --resume, or another --tag")
        self._require_committed_kernel()

    def start(self, tag: str, first_source: str, message: str) -> str:
        """Create `autokernel/<tag>` from HEAD and commit `first_source` as kernel.py; its sha."""
        self.check_can_start(tag)
        name = BRANCH_PREFIX + tag
        # `checkout -b` keeps the user's uncommitted files; on an unborn HEAD the first commit
        # below becomes the branch's root commit.
        self._git("checkout", "-b", name)
        return self._commit_path(KERNEL, first_source, message, empty_ok=True)

    def _git_locks(self) -> list[Path]:
        """Every lock file git may be holding: index, HEAD, config, packed-refs and each ref.

        A ref update takes `<ref>.lock` beside the ref (refs/autokernel/attempts/2.lock, seen in
        CI), so the refs folders are searched too; objects/ never holds a lock."""
        dirs = {self._git("rev-parse", "--absolute-git-dir")[1].strip()}
        common = Path(self._git("rev-parse", "--git-common-dir")[1].strip())
        dirs.add(str(common if common.is_absolute() else (self.root / common).resolve()))
        found: list[Path] = []
        for d in map(Path, sorted(dirs)):
            found += d.glob("*.lock")
            found += (d / "refs").rglob("*.lock")
            found += (d / "logs").rglob("*.lock")
        return found

    def clear_stale_git_locks(self, wait_s: float = 5.0, stale_s: float = 5.0) -> list[Path]:
        """Remove the git lock files a killed run left behind; the ones removed.

        Called only on resume, under the run lock, so no other autokernel run is writing here.
        A driver killed with -9 in the middle of a git command (its git child killed with it)
        leaves index.lock or a ref's lock, and every later git command on it fails. git holds a
        lock for milliseconds and writes it once, so one that was last written stale_s or more
        ago is left over; a younger one (someone's git running now) is waited for up to wait_s
        and never removed."""
        import time

        deadline = time.monotonic() + wait_s
        removed: list[Path] = []
        while True:
            young = False
            for lock in self._git_locks():
                try:
                    age = time.time() - lock.stat().st_mtime
                except FileNotFoundError:
                    continue
                if age >= stale_s:
                    lock.unlink(missing_ok=True)
                    removed.append(lock)
                else:
                    young = True
            if not young or time.monotonic() >= deadline:
                return removed  # one still in use: the next git command says so, with a hint
            time.sleep(0.1)

    def resume(self, tag: str) -> None:
        """Check out the run branch `autokernel/<tag>` to continue it."""
        name = BRANCH_PREFIX + tag
        if self._sha(f"refs/heads/{name}") is None:
            runs = ", ".join(self.branches()) or "none"
            raise WorkspaceError(f"no branch {name} to resume (existing runs: {runs})")
        if self.branch == name and self._kernel_state() == "dirty":
            # The loop calls discard_kernel_changes() first; a user sees this only by hand.
            raise WorkspaceError(
                f"kernel.py has uncommitted changes on {name}, left by an interrupted "
                "experiment: discard them (git checkout -- kernel.py) and resume"
            )
        self._require_committed_kernel()
        self._git("checkout", name)

    def discard_kernel_changes(self) -> bool:
        """Restore kernel.py from HEAD after a crash mid-experiment; True if it changed anything.

        Only on a run branch, where kernel.py is ours: elsewhere the changes are the user's.
        """
        self._require_run_branch()
        if self._kernel_state() == "clean":
            return False
        self._git("checkout", "HEAD", "--", KERNEL)
        return True

    def head(self) -> str:
        """Sha of HEAD."""
        sha = self._sha("HEAD")
        if sha is None:
            raise WorkspaceError("the repository has no commits yet: start a run first")
        return sha

    def commit_kernel(self, source: str, message: str) -> str:
        """Commit `source` as kernel.py (only that file); the new sha. Identical source is a bug."""
        self._require_run_branch()
        if self._has_commits() and self._blob("HEAD", KERNEL) == source:
            raise WorkspaceError("kernel.py is unchanged from HEAD: nothing to commit")
        return self._commit_path(KERNEL, source, message)

    def revert(self, attempt: int, to: str) -> None:
        """Keep HEAD under refs/autokernel/attempts/<attempt>, move the branch back to `to`.

        A soft reset plus restoring kernel.py alone: the user's uncommitted files are untouched.
        Safe to repeat after a crash part-way through.
        """
        self._require_run_branch()
        head, target = self.head(), self._sha(to)
        if target is None:
            raise WorkspaceError(f"cannot revert to {to}: no such commit")
        ref = f"{ATTEMPT_PREFIX}{int(attempt)}"
        if head != target:
            if not self.contains(target):
                raise WorkspaceError(f"cannot revert to {to}: it is not an ancestor of HEAD")
            kept = self.attempt_ref(attempt)
            if kept is not None and kept != head:
                raise WorkspaceError(f"{ref} already holds another commit ({kept[:12]})")
            self._git("update-ref", "-m", f"autokernel: attempt {attempt}", ref, head)
            self._git("reset", "--soft", target)
        self._git("checkout", target, "--", KERNEL)

    def attempts(self) -> dict[int, str]:
        """Every kept attempt: experiment number -> sha (refs/autokernel/attempts/*)."""
        fmt = "--format=%(refname) %(objectname)"
        out = self._git("for-each-ref", fmt, ATTEMPT_PREFIX.rstrip("/"))[1]
        found = {}
        for line in out.splitlines():
            ref, _, sha = line.partition(" ")
            tail = ref.removeprefix(ATTEMPT_PREFIX)
            if tail.isdigit():
                found[int(tail)] = sha
        return found

    def branch_head(self, tag: str) -> str | None:
        """Sha of the run branch autokernel/<tag>, None when the branch does not exist."""
        return self._sha(f"refs/heads/{BRANCH_PREFIX}{tag}")

    def attempt_ref(self, attempt: int) -> str | None:
        """Sha kept for a reverted attempt, or None."""
        return self._sha(f"{ATTEMPT_PREFIX}{int(attempt)}")

    def save_optimized(self, target: str, source: str, message: str) -> str:
        """Commit a finished target's best kernel as optimized/<target>.py; the sha of HEAD after.

        Already saved with this content (a repeat after a crash): no new commit.
        """
        if not _TARGET_NAME.fullmatch(target):
            raise WorkspaceError(f"invalid target name {target!r} for optimized/<target>.py")
        self._require_run_branch()
        rel = layout.optimized(target).as_posix()
        if self._has_commits() and self._blob("HEAD", rel) == source:
            return self.head()
        return self._commit_path(rel, source, message)

    def show(self, sha: str, path: str = KERNEL) -> str:
        """A file's content at a commit."""
        text = self._blob(sha, path)
        if text is None:
            raise WorkspaceError(f"{path} does not exist at {sha}")
        return text

    def message(self, sha: str) -> str:
        """A commit's full message, without the trailing newline."""
        full = self._sha(sha)
        if full is None:
            raise WorkspaceError(f"no such commit: {sha}")
        status, out, err = self._run_git(["show", "-s", "--format=%B", full], exact=True)
        if status != 0:
            raise WorkspaceError(f"git show {full} failed: {err.strip()}")
        return out.decode("utf-8", "replace").rstrip("\n")

    def contains(self, sha: str) -> bool:
        """Is the commit HEAD or one of its ancestors (unknown shas: False)."""
        if self._sha(sha) is None or not self._has_commits():
            return False
        return self._git("merge-base", "--is-ancestor", sha, "HEAD", check=False)[0] == 0

    def _blob(self, rev: str, path: str) -> str | None:
        """File content at `rev` read byte-exact (git's CLI output would lose trailing newlines)."""
        sha = self._sha(rev)
        if sha is None:
            return None
        status, out, _ = self._run_git(["cat-file", "blob", f"{sha}:{path}"], exact=True)
        return out.decode("utf-8") if status == 0 else None
