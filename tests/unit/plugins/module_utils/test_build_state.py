# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_state: lock, state files that never follow a symlink, and a fingerprint that sees every change."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import stat
import subprocess
import threading

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout

GIT = shutil.which("git")


def digest(revision, variables=None, toolchain=None, jobs="8"):
    env = dict(variables or {}, MAX_JOBS=jobs)
    return state.configuration_fingerprint(["make"], "/src", "/src/build", env, revision, toolchain or {},
                                           ("MAX_JOBS",))


def test_fingerprint_ignores_the_job_count_and_keeps_no_values():
    first, config = digest({"kind": "git", "revision": "abc"}, {"PIP_INDEX_URL": "https://u:secret@x"})
    assert first == digest({"kind": "git", "revision": "abc"}, {"PIP_INDEX_URL": "https://u:secret@x"}, jobs="2")[0]
    assert first != digest({"kind": "git", "revision": "abc"}, {"PIP_INDEX_URL": "https://u:other@x"})[0]
    assert "secret" not in repr(config) and config["env_names"] == ["PIP_INDEX_URL"]
    assert first != digest({"kind": "git", "revision": "abc"}, {"PIP_INDEX_URL": "https://u:secret@x"},
                           toolchain={"nvcc": "/usr/local/cuda/bin/nvcc 1 2 | 12.8"})[0]


@pytest.mark.parametrize("rel, ignored", [
    ("build", True), ("build/a.o", True), ("csrc/build/kernel.cu", False), ("csrc/build", False),
    ("dist/x.whl", True), ("distribution.cu", False), ("third_party/cache", True),
])
def test_ignore_rules_apply_from_the_top_only(rel, ignored):
    assert state.top_level_ignored(rel, ["build", "dist", "third_party/cache"]) is ignored


def test_porcelain_paths_with_renames():
    text = " M sgl-kernel/a.cu\0?? sgl-kernel/new.cu\0R  sgl-kernel/b.cu\0sgl-kernel/old.cu\0"
    assert state.porcelain_paths(text) == ["sgl-kernel/a.cu", "sgl-kernel/new.cu", "sgl-kernel/b.cu",
                                           "sgl-kernel/old.cu"]


def _git(repo, *args):
    subprocess.check_call(["git", "-C", str(repo)] + list(args), stdout=subprocess.DEVNULL)


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_git_subdirectory_source_sees_edits_untracked_files_and_nested_build_dirs(tmp_path):
    """The sgl-kernel layout: the source is a subdirectory of a git work tree."""
    repo = tmp_path / "sglang"
    source = repo / "sgl-kernel"
    (source / "csrc" / "build").mkdir(parents=True)
    (source / "csrc" / "build" / "k.cu").write_text(u"v1")
    (repo / "README").write_text(u"top")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")

    def rev():
        return state.source_revision(str(source), run_with_timeout, GIT, ["build"])
    clean = rev()
    assert clean["kind"] == "git" and clean["dirty"] is None
    (source / "csrc" / "build" / "k.cu").write_text(u"v2")     # a source folder named build: not ignored
    first_edit = rev()
    assert first_edit["dirty"] and first_edit != clean
    (source / "csrc" / "build" / "k.cu").write_text(u"v3")     # edited a second time: seen again
    second_edit = rev()
    assert second_edit["dirty"] != first_edit["dirty"]
    (source / "new.cu").write_text(u"untracked")               # a new untracked file
    assert rev()["dirty"] != second_edit["dirty"]
    (source / "build").mkdir()
    (source / "build" / "out.o").write_text(u"object")          # the top-level build dir: ignored
    with_build = rev()
    (source / "build" / "out2.o").write_text(u"object")
    assert rev() == with_build
    (repo / "README").write_text(u"outside the source")         # outside the subtree: not the build's input
    assert rev() == with_build


def test_tree_revision_sees_content_changes_that_keep_size_and_mtime(tmp_path):
    (tmp_path / "a.cu").write_text(u"aaaa")
    (tmp_path / "build").mkdir()
    first = state.source_revision(str(tmp_path), run_with_timeout, None, ["build"])
    assert first["kind"] == "tree" and first["why"] == "no git on this node"
    (tmp_path / "build" / "a.o").write_text(u"object")
    assert state.source_revision(str(tmp_path), run_with_timeout, None, ["build"]) == first
    info = os.stat(str(tmp_path / "a.cu"))
    (tmp_path / "a.cu").write_text(u"bbbb")
    os.utime(str(tmp_path / "a.cu"), ns=(info.st_atime_ns, info.st_mtime_ns))
    assert state.source_revision(str(tmp_path), run_with_timeout, None, ["build"])["revision"] != first["revision"]


def test_toolchain_identity_changes_when_a_compiler_is_replaced_in_place(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cc = bindir / "cc"
    cc.write_text(u"#!/bin/sh\necho 'cc (fake) 1.0'\n")
    cc.chmod(0o755)
    env = {"PATH": str(bindir)}

    def find(name, environ):
        return find_executable(name, [str(bindir)])
    first = state.toolchain_identity(env, run_with_timeout, find)
    assert first["cc"].endswith("| cc (fake) 1.0") and first["nvcc"] is None
    cc.write_text(u"#!/bin/sh\necho 'cc (fake) 1.0'\n# rebuilt\n")
    assert state.toolchain_identity(env, run_with_timeout, find)["cc"] != first["cc"]


RECORD = {"module_pid": os.getpid(), "module_start_time": 1, "run_id": "run-1"}


def lock(tmp_path, build="build"):
    return state.BuildLock(str(tmp_path / build), directory=str(tmp_path / "registry"))


def test_lock_refuses_a_second_holder_naming_the_pid_run_and_since(tmp_path):
    held = lock(tmp_path).acquire(RECORD)
    try:
        with pytest.raises(state.StateError) as err:
            lock(tmp_path).acquire(dict(RECORD, run_id="run-2"))
        # the pid the holder's record names (RECORD is made at import: under xdist that can be another process)
        assert "module pid %d (run run-1, since " % RECORD["module_pid"] in str(err.value)
        assert err.value.details["lock_holder_pid"] == RECORD["module_pid"]
        assert lock(tmp_path, "other").acquire(RECORD).release() is None, "another build dir has its own lock"
    finally:
        held.release()
    lock(tmp_path).acquire(RECORD).release()  # free again once released


def test_the_lock_lives_outside_the_build_dir_and_survives_its_removal(tmp_path):
    """Finding 1: the lock file lived in the build dir; ``rm -rf build`` freed it under a running build."""
    (tmp_path / "build").mkdir()
    held = lock(tmp_path).acquire(RECORD)
    try:
        assert not held.path.startswith(str(tmp_path / "build"))
        shutil.rmtree(str(tmp_path / "build"))
        (tmp_path / "build").mkdir()
        with pytest.raises(state.StateError):
            lock(tmp_path).acquire(RECORD)
    finally:
        held.release()
    assert state.registry_directory(euid=0) == "/run/gpufleet-build"
    assert state.registry_directory(euid=1000, environ={"XDG_RUNTIME_DIR": "/run/user/1000"}) == \
        "/run/user/1000/gpufleet-build"


def test_the_build_never_inherits_the_lock(tmp_path):
    """Finding 3: a daemon the build left kept the inherited lock fd, and every later build was refused."""
    held = lock(tmp_path).acquire(RECORD)
    child = subprocess.Popen(["sleep", "30"], close_fds=False)
    try:
        held.release()
        lock(tmp_path).acquire(RECORD).release()
        assert lock(tmp_path).holder() is None, "a released lock names no holder"
        assert os.listdir(str(tmp_path / "registry")) == [], "a released lock leaves no file behind in /run"
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("name", ["lock", state.LOG_NAME, "status temp file"])
def test_planted_symlinks_are_never_followed(tmp_path, name):
    if name == "status temp file":  # named after the writing pid (ids must not be: xdist workers compare them)
        name = state.STATUS_NAME + ".tmp.%d" % os.getpid()
    victim = tmp_path / "victim"
    victim.write_text(u"precious")
    build = tmp_path / "build"
    build.mkdir()
    (tmp_path / "registry").mkdir(mode=0o700)
    target = lock(tmp_path).path if name == "lock" else str(build / name)
    os.symlink(str(victim), target)
    try:
        if name == "lock":
            lock(tmp_path).acquire(RECORD).release()
        elif name == state.LOG_NAME:
            state.open_log(str(build / name)).close()
        else:
            state.write_json_atomic(str(build / state.STATUS_NAME), {"state": "running"})
    except state.StateError as exc:
        assert "symlink" in str(exc)
    assert victim.read_text() == u"precious"


def test_state_files_are_private(tmp_path):
    path = str(tmp_path / "status.json")
    state.write_json_atomic(path, {"state": "running"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert state.read_json(path) == {"state": "running"}
    state.open_log(str(tmp_path / "log")).close()
    assert stat.S_IMODE(os.stat(str(tmp_path / "log")).st_mode) == 0o600


def test_directories_of_other_users_are_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    state.check_directory(str(mine), "build_dir")
    with pytest.raises(state.StateError) as err:
        state.check_directory(str(mine), "build_dir", euid=os.geteuid() + 1)
    assert "refusing build_dir %s: it is owned by uid" % mine in str(err.value)
    mine.chmod(0o777)
    with pytest.raises(state.StateError) as err:
        state.check_directory(str(mine), "log_path")
    assert "everyone may write to it" in str(err.value)
    os.symlink(str(mine), str(tmp_path / "link"))
    with pytest.raises(state.StateError) as err:
        state.check_directory(str(tmp_path / "link"), "build_dir")
    assert "is not a directory (a symlink is refused" in str(err.value)


def test_stale_status_needs_a_dead_owner():
    status = {"state": "running", "module_pid": 42, "module_start_time": 7, "run_id": "r"}
    assert "module pid 42, run r" in state.stale_status(status, lambda pid, start: False)
    assert "no longer runs" in state.stale_status(status, lambda pid, start: False)
    assert state.stale_status(status, lambda pid, start: True) is None, "a live owner's status is not stale"
    assert state.stale_status({"state": "succeeded"}, lambda pid, start: False) is None
    assert state.stale_status(None, lambda pid, start: False) is None


@pytest.mark.parametrize("status, alive, refused", [
    ({"state": "running", "module_pid": 42, "module_start_time": 7, "run_id": "r"}, True, True),
    ({"state": "oom-backoff", "module_pid": 42, "module_start_time": 7, "run_id": "r"}, True, True),
    ({"state": "running", "module_pid": 42, "module_start_time": 7, "run_id": "r"}, False, False),   # dead: stale
    ({"state": "running", "module_pid": 1000, "module_start_time": 7, "run_id": "r"}, True, False),  # our own pid
    ({"state": "succeeded", "module_pid": 42, "module_start_time": 7, "run_id": "r"}, True, False),
    (None, True, False),
])
def test_a_live_other_build_named_in_the_status_is_refused(status, alive, refused):
    text = state.live_other_status(status, lambda pid, start: alive, 1000, "/b", "/b/status.json")
    if refused:
        assert text.startswith("another build holds /b: module pid 42 (run r) is %s there by its status "
                               "/b/status.json and still runs" % status["state"]), text
    else:
        assert text is None


@pytest.mark.parametrize("text", ["[1]", '"x"', "42", "null"])
def test_state_files_of_the_wrong_shape_are_absent_by_name(tmp_path, text):
    """Finding 7: valid JSON that is not an object read as a stamp gave an AttributeError."""
    path = tmp_path / "stamp"
    path.write_text(text)
    data, problem = state.read_json_object(str(path), "stamp")
    assert data is None
    assert (problem is None) == (text == "null")
    if problem:
        assert "the stamp %s is not a JSON object" % path in problem


def test_a_fifo_in_the_tree_is_fingerprinted_without_opening_it(tmp_path):
    """Finding 6: a FIFO in the source tree blocked the fingerprint for ever."""
    (tmp_path / "a.c").write_text(u"int a;")
    os.mkfifo(str(tmp_path / "pipe"))
    revision = state.source_revision(str(tmp_path), None, None, set())  # no git: the tree walk
    assert revision["files"] == 2
    os.unlink(str(tmp_path / "pipe"))
    (tmp_path / "pipe").write_text(u"")
    assert state.source_revision(str(tmp_path), None, None, set())["revision"] != revision["revision"]


def _returns_within(func, seconds=10):
    """func() in a thread: (finished, value). A FIFO a blocked open waits on is released by the caller."""
    out = []
    worker = threading.Thread(target=lambda: out.append(func()))
    worker.daemon = True
    worker.start()
    worker.join(seconds)
    return not worker.is_alive(), (out[0] if out else None)


def _release(fifo):
    for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
        try:
            os.close(os.open(fifo, flags))
        except OSError:
            pass


def test_a_fifo_as_a_state_file_or_the_log_never_blocks(tmp_path):
    """A FIFO where the stamp, the status or the log is expected blocked the module for ever (a run's stamp read,
    state: stopped's status read, the log's open): read as absent, the log refused naming it."""
    fifo = str(tmp_path / "gpufleet-build.status.json")
    os.mkfifo(fifo)
    try:
        for func in (lambda: state.read_json_object(fifo, "status"), lambda: state.read_log_tail(fifo)):
            finished, value = _returns_within(func)
            assert finished
            assert value in ((None, None), "")
        with pytest.raises(state.StateError, match="is not a regular file"):
            state.open_log(fifo)
        with pytest.raises(state.StateError, match="/dev/zero is not a regular file"):
            state.open_log("/dev/zero")
    finally:
        _release(fifo)
