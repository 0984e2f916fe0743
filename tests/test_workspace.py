"""Workspace in temporary repositories: runs touch only kernel.py and never the user's work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autokernel.run.workspace import Workspace, WorkspaceError

K0 = "def kernel_fn(x):\n    return x\n"
K1 = "def kernel_fn(x):\n    return x * 1\n"
K2 = "def kernel_fn(x):\n    return x + 0  # attempt two\n"


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path, monkeypatch):
    """No user or system git config: identity and hooks come only from what a test sets."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)


def git(root: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=check)
    return proc.stdout.strip()


def changed_files(root: Path, sha: str) -> list[str]:
    out = git(root, "show", "--name-only", "--format=", sha)
    return sorted(line for line in out.splitlines() if line)


@pytest.fixture
def user_repo(tmp_path) -> Path:
    """A user's project: two committed files, then a staged new file and an unstaged edit."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.name", "Ada")
    git(root, "config", "user.email", "ada@example.com")
    (root / "model.py").write_text("model = 1\n")
    (root / "notes.txt").write_text("v1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "user work")
    (root / "staged.py").write_text("staged = True\n")
    git(root, "add", "staged.py")
    (root / "notes.txt").write_text("v2, not committed\n")
    (root / "scratch.txt").write_text("untracked\n")
    return root


def assert_user_work_intact(root: Path) -> None:
    assert git(root, "diff", "--cached", "--name-only").splitlines() == ["staged.py"]
    assert (root / "notes.txt").read_text() == "v2, not committed\n"
    assert git(root, "diff", "--name-only").splitlines() == ["notes.txt"]
    assert (root / "scratch.txt").read_text() == "untracked\n"


def test_open_inits_plain_dir_and_excludes_our_files(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    ws = Workspace.open(root)
    assert (root / ".git").is_dir()
    assert ws.kernel_path == root.resolve() / "kernel.py"
    (root / "results.tsv").write_text("experiment\n")
    (root / ".autokernel").mkdir()
    (root / ".autokernel" / "state.json").write_text("{}")
    (root / "other.txt").write_text("x")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == "?? other.txt"
    assert git(root, "config", "--local", "user.name") == "autokernel"
    assert git(root, "config", "--local", "user.email") == "autokernel@localhost"
    Workspace.open(root)  # a second open adds nothing twice
    exclude = (root / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/results.tsv") == 1
    assert exclude.count("/.autokernel/") == 1


def test_open_keeps_the_users_identity(user_repo, tmp_path, monkeypatch):
    Workspace.open(user_repo)
    assert git(user_repo, "config", "--local", "user.name") == "Ada"
    glob = tmp_path / "gitconfig"
    glob.write_text("[user]\n\tname = Grace\n\temail = grace@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    other = tmp_path / "other"
    other.mkdir()
    Workspace.open(other)
    assert git(other, "config", "--local", "user.name", check=False) == ""
    assert git(other, "config", "user.name") == "Grace"


def test_open_gives_a_subdirectory_its_own_repo(user_repo):
    sub = user_repo / "kernels_here"
    sub.mkdir()
    Workspace.open(sub)
    assert (sub / ".git").is_dir()
    assert git(sub, "rev-parse", "--show-toplevel") == str(sub.resolve())
    assert "results.tsv" not in (user_repo / ".git" / "info" / "exclude").read_text()


def test_start_commits_only_kernel_and_keeps_user_work(user_repo):
    ws = Workspace.open(user_repo)
    base = git(user_repo, "rev-parse", "HEAD")
    sha = ws.start("night1", K0, "exp 0 [softmax]: starter")
    assert ws.branch == "autokernel/night1"
    assert sha == ws.head() == git(user_repo, "rev-parse", "autokernel/night1")
    assert git(user_repo, "rev-parse", f"{sha}^") == base
    assert changed_files(user_repo, sha) == ["kernel.py"]
    assert ws.kernel_path.read_text() == K0
    assert ws.show(sha) == K0
    assert ws.message(sha) == "exp 0 [softmax]: starter"
    assert_user_work_intact(user_repo)


def test_start_refuses_dirty_tracked_kernel(user_repo):
    (user_repo / "kernel.py").write_text(K0)
    git(user_repo, "add", "kernel.py")
    git(user_repo, "commit", "-q", "-m", "user kernel", "--", "kernel.py")
    ws = Workspace.open(user_repo)
    (user_repo / "kernel.py").write_text(K1)
    with pytest.raises(WorkspaceError, match=r"commit or stash kernel\.py first"):
        ws.start("t", K2, "exp 0")
    git(user_repo, "add", "kernel.py")  # staged only, working file equal to the index
    with pytest.raises(WorkspaceError, match=r"commit or stash kernel\.py first"):
        ws.start("t", K2, "exp 0")
    assert (user_repo / "kernel.py").read_text() == K1
    assert ws.branch != "autokernel/t"
    assert git(user_repo, "branch", "--list", "autokernel/*") == ""


def test_start_refuses_untracked_kernel(user_repo):
    (user_repo / "kernel.py").write_text("mine\n")
    ws = Workspace.open(user_repo)
    with pytest.raises(WorkspaceError, match=r"kernel\.py is not committed"):
        ws.start("t", K0, "exp 0")
    assert (user_repo / "kernel.py").read_text() == "mine\n"


def test_start_refuses_existing_branch(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    git(user_repo, "checkout", "-q", "-")
    with pytest.raises(WorkspaceError, match="use --resume, or another --tag"):
        ws.start("t", K1, "exp 0")


@pytest.mark.parametrize("tag", ["", "a b", "x..y", "a/b", "-x", "x.lock", "a~1", "a:b"])
def test_start_refuses_bad_tag(user_repo, tag):
    ws = Workspace.open(user_repo)
    with pytest.raises(WorkspaceError, match="invalid tag"):
        ws.start(tag, K0, "exp 0")


def test_commit_kernel_commits_only_kernel(user_repo):
    ws = Workspace.open(user_repo)
    first = ws.start("t", K0, "exp 0")
    sha = ws.commit_kernel(K1, "exp 1 [softmax]: wider blocks")
    assert git(user_repo, "rev-parse", f"{sha}^") == first
    assert changed_files(user_repo, sha) == ["kernel.py"]
    assert ws.show(sha) == K1 and ws.kernel_path.read_text() == K1
    assert git(user_repo, "status", "--porcelain", "--", "kernel.py") == ""
    assert_user_work_intact(user_repo)
    with pytest.raises(WorkspaceError, match="unchanged"):
        ws.commit_kernel(K1, "exp 2: same")
    assert ws.head() == sha


def test_revert_keeps_attempt_and_restores_kernel(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    kept = ws.commit_kernel(K1, "exp 1: kept")
    bad = ws.commit_kernel(K2, "exp 2: slower")
    ws.revert(2, kept)
    assert ws.head() == kept == git(user_repo, "rev-parse", "autokernel/t")
    assert ws.attempt_ref(2) == bad
    assert git(user_repo, "rev-parse", "refs/autokernel/attempts/2") == bad
    assert "+    return x + 0  # attempt two" in git(user_repo, "diff", kept, bad)
    assert ws.kernel_path.read_text() == K1
    assert git(user_repo, "status", "--porcelain", "--", "kernel.py") == ""
    assert ws.contains(kept) and not ws.contains(bad)
    assert_user_work_intact(user_repo)
    ws.revert(2, kept)  # a repeat after a crash changes nothing
    assert ws.head() == kept and ws.attempt_ref(2) == bad
    assert ws.attempt_ref(3) is None


def test_revert_restores_kernel_after_crash_between_reset_and_checkout(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    kept = ws.commit_kernel(K1, "exp 1")
    ws.commit_kernel(K2, "exp 2")
    git(user_repo, "update-ref", "refs/autokernel/attempts/2", "HEAD")
    git(user_repo, "reset", "-q", "--soft", kept)  # the crash: kernel.py still holds K2
    ws.revert(2, kept)
    assert ws.kernel_path.read_text() == K1
    assert git(user_repo, "status", "--porcelain", "--", "kernel.py") == ""


def test_revert_refuses_a_commit_that_is_not_an_ancestor(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    side = ws.commit_kernel(K1, "exp 1")
    ws.revert(1, git(user_repo, "rev-parse", f"{side}^"))
    ws.commit_kernel(K2, "exp 2")
    with pytest.raises(WorkspaceError, match="not an ancestor"):
        ws.revert(2, side)
    with pytest.raises(WorkspaceError, match="already holds"):
        ws.revert(1, ws.head() + "^")


def test_save_optimized_commits_only_that_file(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    sha = ws.save_optimized("softmax_4096", K1, "optimized softmax_4096: 1.8x")
    assert changed_files(user_repo, sha) == ["optimized/softmax_4096.py"]
    assert ws.show(sha, "optimized/softmax_4096.py") == K1
    assert (user_repo / "optimized" / "softmax_4096.py").read_text() == K1
    assert ws.show(sha) == K0  # kernel.py unchanged
    assert ws.save_optimized("softmax_4096", K1, "again") == sha
    assert_user_work_intact(user_repo)
    with pytest.raises(WorkspaceError, match="invalid target"):
        ws.save_optimized("../escape", K1, "nope")


def test_resume_and_discard_kernel_changes(user_repo):
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    kept = ws.commit_kernel(K1, "exp 1")
    git(user_repo, "checkout", "-q", "-")
    assert ws.branch != "autokernel/t"
    with pytest.raises(WorkspaceError, match="not on an autokernel"):
        ws.discard_kernel_changes()
    with pytest.raises(WorkspaceError, match=r"existing runs: autokernel/t"):
        ws.resume("other")
    ws.resume("t")
    assert ws.branch == "autokernel/t" and ws.head() == kept
    assert_user_work_intact(user_repo)
    ws.kernel_path.write_text(K2)  # a crash after writing the next candidate
    with pytest.raises(WorkspaceError, match="uncommitted"):
        ws.resume("t")
    assert ws.discard_kernel_changes() is True
    assert ws.kernel_path.read_text() == K1
    assert ws.discard_kernel_changes() is False
    ws.resume("t")
    assert ws.head() == kept
    assert_user_work_intact(user_repo)


def test_resume_refuses_users_dirty_kernel_on_another_branch(user_repo):
    (user_repo / "kernel.py").write_text("user v1\n")
    git(user_repo, "add", "kernel.py")
    git(user_repo, "commit", "-q", "-m", "user kernel", "--", "kernel.py")
    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    git(user_repo, "checkout", "-q", "-")
    (user_repo / "kernel.py").write_text("user v2, unsaved\n")
    with pytest.raises(WorkspaceError, match=r"commit or stash kernel\.py first"):
        ws.resume("t")
    assert (user_repo / "kernel.py").read_text() == "user v2, unsaved\n"


def test_repo_without_commits_gets_a_root_commit(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "model.py").write_text("m\n")
    ws = Workspace.open(root)
    git(root, "add", "model.py")
    with pytest.raises(WorkspaceError, match="no commits"):
        ws.head()
    assert not ws.contains("HEAD")
    sha = ws.start("first", K0, "exp 0")
    assert git(root, "rev-list", "--count", "HEAD") == "1"
    assert git(root, "rev-list", "--max-parents=0", "HEAD") == sha
    assert changed_files(root, sha) == ["kernel.py"]
    assert git(root, "diff", "--cached", "--name-only") == "model.py"


def test_commits_need_a_run_branch(user_repo):
    ws = Workspace.open(user_repo)
    with pytest.raises(WorkspaceError, match="autokernel/"):
        ws.commit_kernel(K0, "exp 1")
    assert not (user_repo / "kernel.py").exists()


def test_show_and_message_are_byte_exact(user_repo):
    ws = Workspace.open(user_repo)
    source = "x = 1\n\n\n"
    sha = ws.start("t", source, "exp 0: subject\n\nbody line")
    assert ws.show(sha) == source
    assert ws.message(sha) == "exp 0: subject\n\nbody line"
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.show(sha, "missing.py")
    assert not ws.contains("0" * 40)


def test_missing_git_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("GIT_PYTHON_GIT_EXECUTABLE", raising=False)
    with pytest.raises(WorkspaceError, match="git is not installed"):
        Workspace.open(tmp_path)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace.open(tmp_path / "nowhere")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_directory_is_a_clear_error(tmp_path):
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o555)
    try:
        with pytest.raises(WorkspaceError, match="cannot write"):
            Workspace.open(root)
    finally:
        root.chmod(0o755)


def test_unwritable_directory_message_without_root_bypass(tmp_path, monkeypatch):
    monkeypatch.setattr("autokernel.run.workspace._writable", lambda path: False)
    with pytest.raises(WorkspaceError, match=r"cannot write to .*fix its permissions"):
        Workspace.open(tmp_path)
    assert not (tmp_path / ".git").exists()


def test_a_stale_index_lock_left_by_a_killed_run_is_cleared_a_live_one_is_not(user_repo):
    """kill -9 of the driver mid-commit leaves .git/index.lock and every git command after it
    fails (seen in CI: --resume of a killed two-worker run). On resume a lock that is old is
    removed; a fresh one (someone's git running now) is waited for and left alone."""
    import time

    ws = Workspace.open(user_repo)
    ws.start("t", K0, "exp 0")
    lock = user_repo / ".git" / "index.lock"
    lock.write_text("")
    with pytest.raises(WorkspaceError, match=r"index\.lock"):
        ws.commit_kernel(K1, "exp 1")
    assert ws.clear_stale_git_locks(wait_s=0.3, stale_s=60.0) == []  # young: kept
    assert lock.exists()
    old = time.time() - 120
    os.utime(lock, (old, old))
    assert ws.clear_stale_git_locks(wait_s=0.3, stale_s=60.0) == [lock]
    assert not lock.exists()
    ws.commit_kernel(K1, "exp 1")
    assert ws.clear_stale_git_locks() == []  # nothing there


def test_a_stale_ref_lock_left_by_a_killed_run_is_cleared(user_repo):
    """kill -9 during `git update-ref refs/autokernel/attempts/2` leaves 2.lock beside the ref
    (seen in CI) and the resumed run cannot record attempt 2; resume removes it."""
    import time

    ws = Workspace.open(user_repo)
    sha = ws.start("t", K0, "exp 0")
    refs = user_repo / ".git" / "refs" / "autokernel" / "attempts"
    refs.mkdir(parents=True)
    lock = refs / "2.lock"
    lock.write_text("")
    old = time.time() - 120
    os.utime(lock, (old, old))
    with pytest.raises(WorkspaceError, match=r"2\.lock"):
        ws._git("update-ref", "refs/autokernel/attempts/2", sha)
    assert ws.clear_stale_git_locks(wait_s=0.3, stale_s=60.0) == [lock]
    ws._git("update-ref", "refs/autokernel/attempts/2", sha)
    assert 2 in ws.attempts()


@pytest.mark.parametrize(
    "err",
    [
        "fatal: sha1 file '/w/.git/index.lock' write error. Out of diskspace",  # git's own words
        "error: unable to write file kernel.py: No space left on device",
    ],
)
def test_a_git_write_on_a_full_disk_says_free_space_not_a_lock(tmp_path, err):
    """git names index.lock when a write fails for lack of space; the hint must not send the
    user looking for another git command or a stale lock."""
    ws = Workspace.open(tmp_path)

    class FullDisk:
        def __getattr__(self, name):
            return lambda *args, **kwargs: (128, "", err)

    ws._repo = type("Repo", (), {"git": FullDisk()})()
    with pytest.raises(WorkspaceError) as caught:
        ws._git("commit", "-m", "x")
    message = str(caught.value)
    assert "the disk is full: free space, then `autokernel run --resume`" in message
    assert "another git command" not in message
