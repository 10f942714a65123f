# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the admission launcher (plugins/module_utils/_build/_admission.py) reads and writes, and does to a compile: its
state files (regular files only, written atomically, under flock),
the memory limit of its cgroup and MemAvailable (re-read at every decision: the budget is live), the process table,
a process's identity (pid + start time), what a compile's process tree holds, the signals that freeze, thaw or
evict a compile's process group - only after its leader is checked to be the compile the ledger names - and the
doorbells that wake a waiting launcher the moment the decision starts its compile. Stdlib only:
the role copies this file (and _atomic.py, its one import) beside the launcher."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import select
import signal
import stat
import time

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
except ImportError:     # beside the build: _atomic.py is one of _admission_settings.LAUNCHER_FILES
    from _atomic import write_file  # pylint: disable=import-error

UNLIMITED = 1 << 60


def cgroup_limit(proc_self_cgroup="/proc/self/cgroup", cgroup_root="/sys/fs/cgroup"):
    """The smallest memory limit on the path of this process's memory cgroup - v2 ``memory.max`` or v1
    ``memory.limit_in_bytes`` - or None when unlimited / unknown."""
    try:
        with open(proc_self_cgroup) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            base, name = cgroup_root, "memory.max"
        elif "memory" in parts[1].split(","):
            base, name = os.path.join(cgroup_root, "memory"), "memory.limit_in_bytes"
        else:
            continue
        rel = [p for p in parts[2].split("/") if p]
        for depth in range(len(rel), -1, -1):
            try:
                with open(os.path.join(base, *(rel[:depth] + [name]))) as handle:
                    value = handle.read().strip()
            except (IOError, OSError):
                continue
            if value.isdigit() and int(value) < UNLIMITED:
                limits.append(int(value))
    return min(limits) if limits else None


def working_set(proc_self_cgroup="/proc/self/cgroup", cgroup_root="/sys/fs/cgroup"):
    """What this process's own memory cgroup holds now less its inactive page cache (the kubelet's working set: what
    the kernel cannot simply drop before it OOM-kills) - v2 ``memory.current``, v1 ``memory.usage_in_bytes`` - or
    None when unknown, or when that cgroup has no limit of its own (then it is not the build's: a session or a whole
    machine, whose other processes are not the build's overhead). It counts what no sampled process tree shows:
    ninja, the launchers, kernel memory."""
    path = memory_group(proc_self_cgroup)
    for base, usage, limit, inactive in ((os.path.join(cgroup_root, "memory"), "memory.usage_in_bytes", "memory.limit_in_bytes",
                                          "total_inactive_file"),
                                         (cgroup_root, "memory.current", "memory.max", "inactive_file")):
        folder = os.path.join(base, *[p for p in path.split("/") if p])
        try:
            with open(os.path.join(folder, limit)) as handle:
                bound = handle.read().strip()
            if not bound.isdigit() or int(bound) >= UNLIMITED:
                return None
            with open(os.path.join(folder, usage)) as handle:
                used = int(handle.read().strip())
            with open(os.path.join(folder, "memory.stat")) as handle:
                stat = dict(line.split()[:2] for line in handle if len(line.split()) >= 2)
        except (IOError, OSError, ValueError):
            continue
        return max(used - int(stat.get(inactive, "0") if stat.get(inactive, "0").isdigit() else 0), 0)
    return None


def mem_available(meminfo="/proc/meminfo"):
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (IOError, OSError):
        pass
    return None


def pid_alive(pid, proc="/proc"):
    """Whether ``pid`` runs: a zombie does not (a killed compile re-parented to a subreaper that has not reaped it yet
    holds no memory, and its entry must not hold the ledger)."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            return False
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (IOError, OSError, IndexError):
        return True     # no /proc to tell: signal 0 said it is there


def pid_start(pid, proc="/proc"):
    """The start time of ``pid`` (clock ticks after boot, /proc/<pid>/stat field 22), or None: with the pid, what
    names one process (a pid reused after its launcher was SIGKILLed is another one)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (IOError, OSError, IndexError, ValueError):
        return None


def proc_table(proc="/proc"):
    """``{pid: (ppid, name, start)}`` of every process readable now (one that ends meanwhile is left out)."""
    table = {}
    for name in os.listdir(proc):
        if name.isdigit():
            try:
                with open(os.path.join(proc, name, "stat"), "rb") as handle:
                    text = handle.read()
                # the command name may hold spaces and parentheses: it ends at the last ")"
                head, tail = text.split(b"(", 1)[1].rsplit(b")", 1)[0], text.rsplit(b")", 1)[1].split()
                table[int(name)] = (int(tail[1]), head.decode("utf-8", "replace"), int(tail[19]) if len(tail) > 19 else 0)
            except (IOError, OSError, IndexError, ValueError):
                pass
    return table


def parent_pids(proc="/proc"):
    """``{pid: ppid}`` of every process readable now."""
    return dict((pid, row[0]) for pid, row in proc_table(proc).items())


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def resident_bytes(pids, proc="/proc"):
    """The summed resident size of ``pids`` (``statm``; a process that ends meanwhile counts nothing)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            with open(os.path.join(proc, str(pid), "statm")) as handle:
                total += int(handle.read().split()[1]) * page
        except (IOError, OSError, IndexError, ValueError):
            pass
    return total


def private_bytes(pid, proc="/proc"):
    """What ``pid`` holds that no other process shares (``statm`` resident less shared pages): what one more
    launcher costs the cgroup - its interpreter's shared text is charged once, however many run (0 when gone)."""
    try:
        with open(os.path.join(proc, str(pid), "statm")) as handle:
            fields = handle.read().split()
        return max(int(fields[1]) - int(fields[2]), 0) * os.sysconf("SC_PAGE_SIZE")
    except (IOError, OSError, IndexError, ValueError):
        return 0


def tree_sizes(root, table=None, proc="/proc"):
    """``{pid: (name, resident bytes)}`` of ``root``'s process tree now (a process that ends meanwhile is left out)."""
    table = proc_table(proc) if table is None else table
    children = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    sizes, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            sizes[pid] = (table[pid][1], resident_bytes([pid], proc))
        todo.extend(children.get(pid, ()))
    return sizes


def memory_group(proc_self_cgroup="/proc/self/cgroup"):
    """This process's memory cgroup path (v1 memory line, else the v2 line), or "": launchers of one cgroup share one
    live budget in the ledger."""
    try:
        with open(proc_self_cgroup) as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle]
    except (IOError, OSError):
        return ""
    for parts in lines:
        if len(parts) == 3 and "memory" in parts[1].split(","):
            return parts[2]
    return next((parts[2] for parts in lines if len(parts) == 3 and parts[0] == "0"), "")


SIGNALS = {"freeze": signal.SIGSTOP, "thaw": signal.SIGCONT, "evict": signal.SIGKILL}


def signal_compile(entry, action, proc="/proc"):
    """Send ``action``'s signal to the process group of the compile ``entry`` names (its ``child`` leads its own
    group), only while that leader is the process the ledger recorded (same start time) or gone (its group may live
    on: a frozen cicc after nvcc was killed with its launcher): a pid reused since is never signalled. An eviction
    also thaws (a stopped process dies of SIGKILL, but its group must not stay stopped). Whether it was sent."""
    child = entry.get("child")
    if not child or entry.get("child_start") is None:
        return False
    start = pid_start(int(child), proc)
    if start is not None and start != entry["child_start"]:
        return False    # another process has the pid now, so the group is gone (a pid is not reused while a group has it)
    try:
        os.killpg(int(child), SIGNALS[action])
        if action == "evict":
            os.killpg(int(child), signal.SIGCONT)
    except OSError:     # it ended meanwhile (ESRCH), or is not ours to signal (EPERM)
        return False
    return True


# -- files ----------------------------------------------------------------------------------------------------------
def open_regular(path, flags):
    """A descriptor of ``path`` only when it is a regular file: a FIFO planted there never blocks the open
    (O_NONBLOCK), a symlink is not followed (O_NOFOLLOW). OSError otherwise."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


MAX_JSON_BYTES = 64 * 1024 ** 2   # a peaks file of every source of a large tree is well under 1 MiB


def open_to_others(folder):
    """Why another user could plant ledger entries in ``folder`` (world-writable, or owned by someone else than this
    user or root), else None."""
    try:
        found = os.stat(folder)
    except OSError:
        return None   # not there: its use says why
    if found.st_uid not in (os.geteuid(), 0):
        return "owned by uid %d, not by this user (uid %d) or root" % (found.st_uid, os.geteuid())
    if found.st_mode & stat.S_IWOTH:
        return "writable by every user (mode %04o): a planted ledger entry would hold the node's budget" % (
            stat.S_IMODE(found.st_mode))
    return None


def load_json(path):
    """The JSON object in ``path``; {} when missing, unreadable, not a regular file, not an object, or larger than
    ``MAX_JSON_BYTES`` (a sparse 100 GiB seed file is never read into memory)."""
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY)) as handle:
            if os.fstat(handle.fileno()).st_size > MAX_JSON_BYTES:
                return {}
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (IOError, OSError, ValueError):
        return {}


def save_json(path, data):
    """Replace ``path`` atomically (_atomic.write_file: a fresh temp file beside it, never through a planted link)."""
    write_file(path, json.dumps(data, indent=0, sort_keys=True), mode=0o644)


class Locked(object):
    """flock on a lock file (a regular file; a FIFO or link there is refused) for the time of a with-block."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)   # closing the only descriptor releases the flock


# -- doorbells: a waiting launcher sleeps on a FIFO of its own that the launcher deciding for it writes a byte to, so a
# compile starts when the decision is taken, not at the next poll (up to poll_seconds on every start: 0.1-0.2 s of
# every 1 s compile on the duration stand-in). Without one (no FIFOs there) it polls, as before.
def doorbell_path(state_dir, pid):
    return os.path.join(state_dir, "wake", str(int(pid)))


def open_doorbell(state_dir, pid):
    """This launcher's doorbell: a FIFO opened for reading and writing (so it never reads as closed), or None."""
    path = doorbell_path(state_dir, pid)
    try:
        if not os.path.isdir(os.path.dirname(path)):
            os.mkdir(os.path.dirname(path), 0o755)
        try:
            os.unlink(path)   # a dead launcher's of the same pid
        except OSError:
            pass
        os.mkfifo(path, 0o600)
        return os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None


def close_doorbell(state_dir, pid, fd, gone=False):
    """Close this launcher's doorbell and remove it; ``gone``: only remove the one a dead launcher left."""
    if fd is None and not gone:
        return
    if fd is not None:
        os.close(fd)
    try:
        os.unlink(doorbell_path(state_dir, pid))
    except OSError:
        pass


def sleep_on(fd, seconds):
    """Sleep ``seconds`` or until the doorbell rings; whether it rang."""
    if fd is None:
        time.sleep(seconds)
        return False
    try:
        rang = bool(select.select([fd], [], [], seconds)[0])
        while rang and os.read(fd, 4096):
            pass
    except (OSError, select.error) as exc:
        if getattr(exc, "errno", None) != errno.EAGAIN:
            time.sleep(seconds)
            return False
    return rang


def ring(state_dir, pid):
    """Wake the launcher waiting as ``pid``: a byte to its doorbell, only when that is a FIFO someone reads (a planted
    file or link there is left alone); whether it rang."""
    try:
        fd = os.open(doorbell_path(state_dir, pid), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (OSError, ValueError):
        return False   # no reader (ENXIO), none there, or not a pid
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        os.write(fd, b"!")
        return True
    except OSError:
        return False   # full: it has been rung already
    finally:
        os.close(fd)
