# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guarded build's state on disk: lock, stamp, status and log files, and the fingerprint.

The module runs as root in directories other users may reach, so every state file is opened with
``O_NOFOLLOW`` (a planted symlink fails the open instead of redirecting root's write), new files
with ``O_EXCL`` then renamed into place, all mode 0600, and a directory owned by another user or
writable by everyone is refused. The lock is an ``flock`` held by the module in a registry outside the build
directory (``/run/gpufleet-build`` for root), keyed by the build directory's parent (device and inode) and name: every
spelling of it is one build, removing and remaking it does not free the lock, and the build never inherits it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import glob
import hashlib
import json
import os
import stat
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils import _constants
from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file

REGISTRY_DIR = "/run/gpufleet-build"  # root's build locks: one per build directory
# the file names live in _constants: the roles ask the gpufleet.preflight.build_paths filter for them
STAMP_NAME = _constants.BUILD_STAMP_NAME
LOG_NAME = _constants.BUILD_LOG_NAME
STATUS_NAME = _constants.BUILD_STATUS_NAME
# tools whose identity goes into the fingerprint: a compiler replaced at the same path makes the build stale
TOOLCHAIN = (("cc", "CC"), ("c++", "CXX"), ("nvcc", "CUDACXX"), ("cmake", None), ("ninja", None))
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class StateError(Exception):
    """A state file or directory that cannot be used safely; the message names the path."""

    def __init__(self, message, details=None):
        super(StateError, self).__init__(message)
        self.details = details or {}


# ---------------------------------------------------------------- pure

def tree_fingerprint(entries):
    """sha256 over ``(relative path, content digest)`` entries of a source tree."""
    digest = hashlib.sha256()
    for rel, content in sorted(entries):
        digest.update(("%s\0%s\n" % (rel, content)).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def top_level_ignored(rel, ignore):
    """``rel`` (relative to the source) is an ignored top-level name or lies under an ignored relative path.
    Rules apply from the top only: a source folder ``csrc/build`` is read although ``build`` is ignored."""
    rel = rel.replace(os.sep, "/")
    return any(rel == entry or rel.startswith(entry + "/") for entry in ignore)


def porcelain_paths(text):
    """``git status --porcelain -z`` output -> the paths it names (both sides of a rename)."""
    paths = []
    fields = (text or "").split("\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename's source follows as its own field
            if index < len(fields) and fields[index]:
                paths.append(fields[index])
            index += 1
    return paths


def configuration_fingerprint(command, chdir, build_dir, variables, source, toolchain, job_variables):
    """sha256 over what decides the build's output; the job count is left out on purpose, and the
    environment enters as a hash only (its values may be secrets, the stamp is a file on the node)."""
    env = sorted((key, value) for key, value in variables.items() if key not in job_variables)
    config = {
        "command": command,
        "chdir": os.path.abspath(chdir),
        "build_dir": os.path.abspath(build_dir),
        "env_names": [key for key, dummy in env],
        "env_sha256": hashlib.sha256(json.dumps(env).encode("utf-8", "surrogateescape")).hexdigest(),
        "source": source,
        "toolchain": toolchain,
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode("utf-8")).hexdigest(), config


def unsafe_directory_reason(info, euid):
    """Why a directory (its ``os.stat``) may not hold root's state files, or None."""
    if info.st_uid != euid:
        return "it is owned by uid %d, not by the user running the build (uid %d)" % (info.st_uid, euid)
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        return "everyone may write to it"
    return None


# ---------------------------------------------------------------- I/O: files

def check_directory(path, option, euid=None):
    """StateError unless ``path`` is a real directory owned by us that others cannot plant files in."""
    euid = os.geteuid() if euid is None else euid
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise StateError("%s %s: %s" % (option, path, exc.strerror or exc))
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StateError("%s %s is not a directory (a symlink is refused: its target could be anywhere)"
                         % (option, path))
    why = unsafe_directory_reason(info, euid)
    if why:
        raise StateError("refusing %s %s: %s; the build's lock, log and status files there could be redirected "
                         "by planted symlinks. Use a directory of your own (not under /tmp)" % (option, path, why))


def make_directory(path, option):
    """mkdir -p with mode 0700 for what we create; StateError naming the option on failure."""
    try:
        os.makedirs(path, 0o700)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise StateError("cannot create %s %s: %s" % (option, path, exc.strerror or exc))


def open_private(path, flags):
    """``os.open`` without following a final symlink, mode 0600 for a new file; StateError naming the path."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateError("%s is a symlink: refusing to follow it as root" % path)
        raise StateError("%s: %s" % (path, exc.strerror or exc))


def write_json_atomic(path, data):
    """``data`` as JSON in a new 0600 file renamed over ``path`` (_atomic.write_file); StateError naming the path."""
    try:
        write_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    except (IOError, OSError) as exc:
        raise StateError("%s: %s" % (path, exc.strerror or exc))


def read_json(path):
    """A regular file's JSON, else None. Opened non-blocking and checked after the open: a FIFO planted as the
    stamp or status would otherwise block the module (a run, or state: stopped) for ever before any timeout."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd) as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def open_log(path):
    """The build log for appending (0600, never through a symlink, a regular file only: a FIFO would block the
    open, a device the tail's reads): a binary file object."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateError("%s is a symlink: refusing to follow it as root" % path)
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise StateError("%s is not a regular file (a FIFO)" % path)
        raise StateError("%s: %s" % (path, exc.strerror or exc))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StateError("%s is not a regular file (a FIFO, device or socket)" % path)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    # unbuffered: a full disk fails the write that meets it, not a later close
    return os.fdopen(fd, "ab", 0)


def read_log_tail(path, max_bytes=65536, start=0):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return ""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return ""
    with os.fdopen(fd, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(start, handle.tell() - max_bytes))
        return handle.read().decode("utf-8", "replace")


def find_artifacts(chdir, patterns):
    found = []
    for pattern in patterns:
        found.extend(glob.glob(os.path.join(chdir, pattern)))
    return sorted(set(os.path.abspath(path) for path in found))


def artifacts_present(chdir, patterns):
    return all(glob.glob(os.path.join(chdir, pattern)) for pattern in patterns)


# ---------------------------------------------------------------- I/O: the lock

def registry_directory(euid=None, environ=None):
    """Where build locks live: ``/run/gpufleet-build`` for root, else the user's runtime (or cache) directory.
    Never inside the build directory: ``rm -rf build`` under a running build must not free its lock."""
    euid = os.geteuid() if euid is None else euid
    environ = os.environ if environ is None else environ
    if euid == 0:
        return REGISTRY_DIR
    base = environ.get("XDG_RUNTIME_DIR") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpufleet-build")


def lock_key(build_dir):
    """The build directory's identity in the registry: its parent directory's device and inode, and its own name
    (the directory itself may be removed and made again under the same name: it stays the same build). Every
    spelling of one directory - symlinks, ``..``, a bind mount of the checkout - gives one key; the path (parent's
    symlinks resolved, returned too) only where the parent does not exist."""
    build_dir = os.path.abspath(build_dir)
    parent = os.path.realpath(os.path.dirname(build_dir))
    real = os.path.join(parent, os.path.basename(build_dir))
    try:
        info = os.stat(parent)
        identity = "%d:%d/%s" % (info.st_dev, info.st_ino, os.path.basename(build_dir))
    except OSError:
        identity = real
    return hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:24], real


def holder_text(record, path):
    """Who holds a lock, for the refusal: ``module pid P (run R, since T)``."""
    if not isinstance(record, dict):
        return "unknown holder (%s says nothing readable)" % path
    since = record.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return "module pid %s (run %s, since %s)" % (record.get("module_pid"), record.get("run_id"), when)


class BuildLock(object):
    """``flock`` on ``<registry>/<key of the build dir>.lock``, held by the module alone (never inherited by the
    build: a daemon the build left cannot keep later builds out). Its content says who holds it: module pid and
    start time, run id, build dir, since when. The holder's build dies with it (``_build_process``)."""

    def __init__(self, build_dir, directory=None):
        self.directory = directory or registry_directory()
        key, self.build_dir = lock_key(build_dir)
        self.path = os.path.join(self.directory, key + ".lock")
        self.fd = None
        self.record = None

    def acquire(self, record):
        make_directory(self.directory, "the lock directory")
        check_directory(self.directory, "the lock directory")
        for dummy in range(100):  # the file a holder unlinked on release: lock the one now at the path
            fd = self._lock_file()
            if fd is not None:
                break
        else:
            raise StateError("%s: replaced again and again while taking it" % self.path)
        self.record = dict(record, build_dir=self.build_dir, since=time.time())
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(self.record, sort_keys=True) + "\n").encode("utf-8"))
        except OSError as exc:
            os.close(fd)
            raise StateError("%s: %s" % (self.path, exc.strerror or exc))
        self.fd = fd
        return self

    def _lock_file(self):
        """The locked fd of the file at the path, or None when a releasing holder unlinked it meanwhile (then the
        lock taken was on a file nobody else will open: try again). StateError naming the holder while it holds."""
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as exc:
            held = read_json(self.path)
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise StateError("%s: %s" % (self.path, exc.strerror or exc))
            holder = held if isinstance(held, dict) else {}
            raise StateError("another build holds %s: %s (lock %s): two builds never run in one build directory at "
                             "once; wait for it, or stop it (state: stopped)" % (
                                 self.build_dir, holder_text(held, self.path), self.path),
                             {"lock": self.path, "lock_holder_pid": holder.get("module_pid"),
                              "lock_holder_run_id": holder.get("run_id")})
        try:
            same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if not same:
            os.close(fd)
            return None
        return fd

    def holder(self):
        """The lock's record as its last holder wrote it (whether it still runs: check its pid and start time)."""
        record = read_json(self.path)
        return record if isinstance(record, dict) else None

    def release(self):
        if self.fd is not None:
            try:  # unlinked while held: the registry keeps no file per build dir ever built (acquire re-checks)
                os.unlink(self.path)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


ACTIVE_STATES = ("starting", "running", "oom-backoff")


def read_json_object(path, what):
    """``(dict or None, problem or None)``: a state file that is valid JSON of another shape (a list, a string,
    a number) is treated as absent, and ``problem`` says so naming the file."""
    data = read_json(path)
    if data is None or isinstance(data, dict):
        return data, None
    return None, "the %s %s is not a JSON object (it holds a %s): ignored" % (what, path, type(data).__name__)


def stale_status(status, alive):
    """A status still saying ``running`` whose module no longer runs (``alive(pid, start_time)`` is False): its
    run was killed and is abandoned. The text names it; None when the status is not stale."""
    if isinstance(status, dict) and status.get("state") in ACTIVE_STATES and not alive(
            status.get("module_pid"), status.get("module_start_time")):
        return "the previous run (module pid %s, run %s) left its status at %r and no longer runs: abandoned, " \
               "its leftovers ended" % (status.get("module_pid"), status.get("run_id"), status.get("state"))
    return None


def live_other_status(status, alive, own_pid, build_dir, status_path):
    """A status still saying ``running`` whose module is another that still runs: a live owner the lock does not
    show (its module keyed the lock by the path, before an upgrade, or took it in another user's registry). The
    refusal names it; None when there is none."""
    if isinstance(status, dict) and status.get("state") in ACTIVE_STATES and status.get("module_pid") != own_pid \
            and alive(status.get("module_pid"), status.get("module_start_time")):
        return "another build holds %s: module pid %s (run %s) is %s there by its status %s and still runs: two " \
               "builds never run in one build directory at once; wait for it, or stop it (state: stopped)" % (
                   build_dir, status.get("module_pid"), status.get("run_id"), status.get("state"), status_path)
    return None


# ---------------------------------------------------------------- I/O: the fingerprint

def _file_digest(path):
    """sha256 of a regular file's content (a symlink: of its target text; a FIFO, socket or device: its kind, never
    opened - a FIFO would block the fingerprint for ever); ``-`` when it cannot be read."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + os.readlink(path)
        if not stat.S_ISREG(info.st_mode):
            return "special:%o" % stat.S_IFMT(info.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the look and the open
                return "special"
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except (IOError, OSError):
        return "-"


def source_revision(source, run, git, ignore):
    """What the build reads from ``source``: ``{'kind': 'git', 'revision': HEAD, 'dirty': hash}`` in a git work
    tree (the dirty hash covers the content of every modified and untracked file under ``source``), else
    ``{'kind': 'tree', ...}`` over the content of every file. ``git``: its path, or None where it is missing."""
    if git:
        rc, out, dummy = run([git, "-C", source, "rev-parse", "HEAD"], 30)
        if rc == 0 and out.strip():
            rc, status, err = run([git, "-C", source, "status", "--porcelain", "-z", "--untracked-files=all",
                                   "--", "."], 120)
            if rc != 0:
                raise StateError("git status in source %s: %s" % (source, "timed out" if rc is None else err.strip()))
            prefix_rc, prefix, dummy = run([git, "-C", source, "rev-parse", "--show-prefix"], 30)
            prefix = prefix.strip() if prefix_rc == 0 else ""
            entries = []
            for path in porcelain_paths(status):
                rel = path[len(prefix):] if prefix and path.startswith(prefix) else path
                if not top_level_ignored(rel, ignore):
                    entries.append((rel, _file_digest(os.path.join(source, rel))))
            return {"kind": "git", "revision": out.strip(), "dirty": tree_fingerprint(entries) if entries else None,
                    "dirty_files": len(entries)}
    entries = []
    for current, dirs, files in os.walk(source):
        rel_dir = os.path.relpath(current, source)
        dirs[:] = sorted(d for d in dirs if not top_level_ignored(os.path.normpath(os.path.join(rel_dir, d)), ignore))
        for name in files:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not top_level_ignored(rel, ignore):
                entries.append((rel, _file_digest(os.path.join(current, name))))
    return {"kind": "tree", "revision": tree_fingerprint(entries), "files": len(entries),
            "why": "no git on this node" if not git else "not a git work tree"}


def toolchain_identity(env, run, find):
    """``{tool: "path size mtime | first line of --version"}`` for the compilers and build tools the build's
    PATH resolves; a tool replaced in place (same path, new file) changes its entry."""
    identity = {}
    for tool, variable in TOOLCHAIN:
        name = env.get(variable) if variable and env.get(variable) else tool
        path = find(name, env)
        if not path:
            identity[tool] = None
            continue
        real = os.path.realpath(path)
        try:
            info = os.stat(real)
            file_id = "%d %d" % (info.st_size, info.st_mtime_ns)
        except OSError:
            file_id = "-"
        rc, out, dummy = run([path, "--version"], 30)
        version = (out or "").strip().splitlines()
        identity[tool] = "%s %s | %s" % (real, file_id, version[-1 if tool == "nvcc" else 0] if version else rc)
    return identity
