# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory admitted per compile: a compiler launcher that schedules the node's compiles (issues 17, 28, 29).

ninja runs wide; each compile's launcher (``CMAKE_<LANG>_COMPILER_LAUNCHER``, before a cache launcher) joins the
node's queue - a small JSON ledger under ``flock`` - and one decision (``pick_next``, taken by whichever launcher holds
the lock) starts, among the waiting compiles, the one with the longest learned time that fits the memory budget (the
build cgroup's limit less a reserve), with no more running than the CPUs allow (counting nvcc ``--threads``). Alone a
compile always runs. A source never seen (or last killed) starts alone or within what is left beside known ones and
holds all of it until it ends: it has not shown how it grows. A running compile's reservation follows its process
tree: what it holds now times the margin, with a floor of the largest phase (cicc, ptxas, the host compiler) still
ahead of it as learned, so the room a finished cicc frees is used at once. Peaks, times and phases are learned per
source (``peaks.json``, keyed by the tree's identity, the path in the tree and the compile's arch flags) and may be
seeded from other nodes' files. A dead launcher's entry is reclaimed; its compiler dies with it (PR_SET_PDEATHSIG).
Stdlib only: the role copies this file beside the build (``python gpufleet_admit.py --config=F -- cc ...``). Pure
functions: tests/unit; the launcher with real processes and cgroups: tests/build.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as settings_rule
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
except ImportError:     # beside the build: the role copies the three files
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _admission_settings as settings_rule  # pylint: disable=import-error
    import _admission_policy as policy  # pylint: disable=import-error

DEFAULTS = settings_rule.DEFAULTS


# -- the node -------------------------------------------------------------------------------------------------------
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


def mem_available(meminfo="/proc/meminfo"):
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (IOError, OSError):
        pass
    return None


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
    """Replace ``path`` atomically by a temp file made fresh in its folder (mkstemp: never through a planted link)."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o644)
            json.dump(data, handle, indent=0, sort_keys=True)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


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


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


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


def load_config(path):
    """The launcher's config file; ValueError naming what is wrong in it."""
    settings = load_json(path)
    if not settings and not os.path.isfile(path):
        raise ValueError("%s is not a readable regular file" % path)
    return settings_rule.launcher_config(settings, os.path.dirname(os.path.abspath(path)))


# -- the launcher ---------------------------------------------------------------------------------------------------
class Stopped(Exception):
    """A signal asked this launcher to end while it waited (raised by the main path, never by a handler)."""


def _files(config):
    state = config["state_dir"]
    return [os.path.join(state, name) for name in ("ledger.json", "ledger.lock", "ledger.log")]


def log_event(config, **event):
    """One JSON line in the ledger's log (under the ledger's lock): what the scheduler started and what ended."""
    event["t"] = round(time.time(), 3)
    fd = open_regular(_files(config)[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def schedule(config, ledger, room, cpus):
    """The one decision, taken under the lock by whichever launcher holds it: start what ``pick_next`` picks until
    nothing more fits (its launcher sees ``running`` and runs it). An unlearned compile claims what is left."""
    while True:
        entries = [dict(entry, pid=pid) for pid, entry in ledger.items()]
        running = [e for e in entries if e["state"] == "running"]
        waiting = [e for e in entries if e["state"] == "waiting"]
        now, settle = time.time(), float(config["settle_seconds"])
        if policy.still_arriving(waiting, now, settle):
            return
        pick = policy.pick_next([e for e in waiting if e["since"] <= now - settle], running, room, cpus, float(config["margin"]))
        if pick is None:
            return
        entry = ledger[pick["pid"]]
        entry.update(threads=pick.get("threads") or 1, bytes=pick["bytes"])   # nvcc threads chosen for it, if any
        used = policy.load(running, float(config["margin"]))
        if not entry.get("learned"):
            entry["bytes"] = max(entry["bytes"], int(entry.get("budget", room) - used))
        entry.update(state="running", started=time.time())
        log_event(config, event="start", pid=int(pick["pid"]), source=entry.get("source"), bytes=entry["bytes"], options=entry.get("options"),
                  seconds=entry.get("seconds"), threads=entry.get("threads") or 1, learned=bool(entry.get("learned")),
                  running=len(running) + 1, running_threads=sum(e.get("threads") or 1 for e in running) +
                  (entry.get("threads") or 1), used_bytes=int(policy.load(running + [entry], float(config["margin"]))))


def _inode(path):
    try:
        found = os.stat(path)
        return found.st_ino, found.st_mtime, found.st_size
    except OSError:
        return None


def wait_for_room(config, mine, pid, log, stopped=lambda: None):
    """Queue ``mine`` in the ledger and wait until the decision starts it; its entry then. A waiting compile
    only stats the ledger between decisions (a change of inode: something started, grew or ended); a signal only
    sets a flag, checked here outside the lock, so nothing ever waits on a lock it holds."""
    ledger_path, lock_path = _files(config)[:2]
    poll, seen, decided, said = float(config["poll_seconds"]), None, 0.0, False
    settle = float(config["settle_seconds"])
    while True:
        if stopped():
            raise Stopped()
        now = time.time()
        if seen is None or _inode(ledger_path) != seen or now - decided >= 4 * poll or now - mine["since"] < settle + poll:
            with Locked(lock_path):
                ledger = policy.reclaim(load_json(ledger_path), pid_alive, pid_start)
                ledger.setdefault(str(pid), dict(mine))
                schedule(config, ledger, mine["budget"], mine["cpus"])
                save_json(ledger_path, ledger)
                seen, decided = _inode(ledger_path), time.time()
                if ledger[str(pid)]["state"] == "running":
                    return ledger[str(pid)]
        if not said and now - mine["since"] >= settle + poll:   # not the settling moment every compile has
            log("gpufleet-admit: %s waits for %.1f GiB of the %.1f GiB budget" % (
                mine["source"], mine["bytes"] / 1024.0 ** 3, mine["budget"] / 1024.0 ** 3))
            said = True
        time.sleep(poll)


def update(config, pid, change, room=None, cpus=None):
    """Apply ``change(entry)`` to this launcher's running entry under the lock (it returns whether to save); with
    ``room``, decide again (a reservation that went down frees room at once)."""
    ledger_path, lock_path = _files(config)[:2]
    with Locked(lock_path):
        ledger = policy.reclaim(load_json(ledger_path), pid_alive, pid_start)
        entry = ledger.get(str(pid))
        if entry and entry["state"] == "running" and change(entry):
            if room is not None:
                schedule(config, ledger, room, cpus)
            save_json(ledger_path, ledger)


def leave(config, pid, room, cpus, **event):
    ledger_path, lock_path = _files(config)[:2]
    with Locked(lock_path):
        ledger = policy.reclaim(load_json(ledger_path), pid_alive, pid_start)
        if ledger.pop(str(pid), None) and event:
            log_event(config, event="end", pid=pid, **event)
        schedule(config, ledger, room, cpus)
        save_json(ledger_path, ledger)


def wait_holding(config, mine, held, child, phases, stopped=lambda: None):
    """Wait for the compiler; while it runs, hold in the ledger what its process tree needs now (``reservation``).
    Its return code and the phases it went through ``[[youngest process's name, bytes the tree held]]``. A signal
    the handler could not forward (it came before the compiler existed) is forwarded here."""
    margin, position, seen, forwarded = float(config["margin"]), 0, [], None
    while True:
        if stopped() and forwarded is None:
            forwarded = stopped()
            child.send_signal(forwarded)
        try:
            return child.wait(timeout=float(config["sample_seconds"])), seen   # returns as the compiler ends
        except subprocess.TimeoutExpired:
            table = proc_table()
            members = [pid for pid in policy.tree_members(dict((p, r[0]) for p, r in table.items()), child.pid) if pid in table]
            live = resident_bytes(members)
            name = max((table[pid][2], table[pid][1]) for pid in members)[1] if members else "?"
            if seen and seen[-1][0] == name:
                seen[-1][1] = max(seen[-1][1], live)
            elif len(seen) < 64:
                seen.append([name, live])
            position = policy.advance(phases, position, name)
            wanted = policy.reservation({"bytes": held}, live, margin, phases, position)
            if wanted != held:
                held = wanted
                update(config, mine["pid"], lambda entry: entry.update(bytes=wanted, grown=True) or True,
                       mine["budget"], mine["cpus"])


def learn(config, key, peak, seconds, killed, phases, threads=None, stopped=False):
    peaks_path = config["peaks_path"]
    with Locked(peaks_path + ".lock"):
        save_json(peaks_path, policy.record(load_json(peaks_path), key, peak, seconds, killed, time.time(), phases,
                                            threads, stopped=stopped))


def die_with_parent():
    """preexec of the compiler: SIGKILL it when this launcher dies (PR_SET_PDEATHSIG), so a SIGKILLed launcher
    never leaves a compile running outside the ledger. Linux only; elsewhere the ledger keeps its entry while the
    compiler's pid lives."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError, ImportError):
        pass


def node_peaks(config):
    """This node's peaks over the seeds (other nodes' files), merged."""
    return policy.merge_peaks(*[load_json(path) for path in (config.get("seed_peaks") or [])] + [load_json(config["peaks_path"])])


def run_admitted(config, key, argv, stop):
    """Wait for the decision, run the compiler, leave the ledger, learn its peak. The compiler's exit status."""
    peaks = node_peaks(config)
    need, learned = policy.expected_bytes(peaks, key, config["default_bytes"], float(config["margin"]))
    cpus = int(config.get("cpus") or cpu_count())
    room = settings_rule.budget(config, cgroup_limit(), mem_available())
    mine = {"state": "waiting", "bytes": need, "source": key, "since": time.time(), "seconds": policy.expected_seconds(peaks, key),
            "threads": policy.threads_of(argv[1:], cpus), "learned": learned, "budget": room, "cpus": cpus, "pid": os.getpid(),
            "pid_start": pid_start(os.getpid())}

    def stopped():
        return stop["signal"]

    archs = policy.arch_count(argv) if config.get("threads_per_source") and policy.is_nvcc(argv) else 0
    if archs > 1:   # the scheduler picks its nvcc threads: what each count needs, up to the archs and the CPUs
        mine.update(threads=1, options=policy.thread_options(peaks, key, min(archs, cpus, int(config.get("max_threads") or archs)),
                                                             archs, config["per_thread_bytes"], float(config["margin"])))
        mine["bytes"] = mine["options"][0]
    rc, seconds, seen = None, 0.0, []
    try:
        started = wait_for_room(config, dict((k, v) for k, v in mine.items() if k != "pid"), mine["pid"],
                                lambda text: sys.stderr.write(text + "\n"), stopped)
        held, threads = started["bytes"], started.get("threads") if archs > 1 else None
        if stopped():
            raise Stopped()
        start = time.time()
        child = subprocess.Popen(policy.with_threads(argv, threads) if threads else argv, preexec_fn=die_with_parent)
        stop["child"] = child
        update(config, mine["pid"], lambda entry: entry.update(child=child.pid, child_start=pid_start(child.pid)) or True)
        rc, seen = wait_holding(config, mine, held, child, policy.phases_of(policy.known(peaks, key)), stopped)
        seconds = time.time() - start
    except Stopped:
        return 128 + stop["signal"]
    finally:
        leave(config, mine["pid"], room, cpus, source=key, rc=rc, seconds=round(seconds, 2))
    # nvcc --threads runs cicc/ptxas side by side, and a killed compile needs at least what its whole tree held: the
    # tree's sampled sum can pass the largest one process held
    peak = max([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024] + [size for _name, size in seen])
    learn(config, key, peak, seconds, policy.killed_by_signal(rc), seen, threads, stopped=bool(stop["signal"]))
    return 128 - rc if rc < 0 else rc


def check(config, out=sys.stdout):
    """``--check``: the sources of this tree that need more than this node's budget, before any build: learned ones
    over it, and ones OOM-killed holding a peak that times the margin is over it."""
    room = settings_rule.budget(config, cgroup_limit(), mem_available())
    big = policy.too_big(node_peaks(config), room, config.get("tree"), float(config["margin"]))
    out.write(json.dumps({"budget_bytes": room, "too_big": [{"source": k, "peak_bytes": p, "oom_killed": o} for k, p, o in big],
                          "message": policy.too_big_message(big, room)}) + "\n")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path, checking = None, False
    while argv and (argv[0].startswith("--config=") or argv[0] == "--check"):
        option = argv.pop(0)
        checking = checking or option == "--check"
        config_path = option.split("=", 1)[1] if "=" in option else config_path
    if argv and argv[0] == "--":
        argv.pop(0)
    if not argv and not (checking and config_path):
        sys.stderr.write("gpufleet-admit: usage: gpufleet_admit.py --config=FILE [--check | [--] COMPILER ARGS...]\n")
        return 2
    config = key = None
    if config_path:
        try:
            config = load_config(config_path)
        except ValueError as exc:
            sys.stderr.write("gpufleet-admit: %s: %s\n" % (config_path, exc))
            return 2
        if checking:
            return check(config)
        key = policy.source_key(policy.source_of(argv[1:]), config.get("root"), tree=config.get("tree"), flags=policy.flags_id(argv[1:]))
    if config is None or key is None:   # not a compile of a source: run it as is
        os.execvp(argv[0], argv)
    for folder in (config["state_dir"], os.path.dirname(config["peaks_path"])):
        try:
            os.makedirs(folder)
        except OSError:
            pass
        problem = open_to_others(folder)
        if problem:
            sys.stderr.write("gpufleet-admit: refusing the admission state %s: %s\n" % (folder, problem))
            return 2
    stop = {"signal": None, "child": None}

    def forward(signum, _frame):
        # never block here (no lock, no file): note the signal, pass it to the compiler; the main path leaves
        stop["signal"] = stop["signal"] or signum
        child = stop["child"]
        if child is not None and child.returncode is None:
            try:
                os.kill(child.pid, signum)
            except OSError:
                pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        return run_admitted(config, key, argv, stop)
    except (IOError, OSError) as exc:   # a lock that is a FIFO or a link, a folder not writable: say which
        sys.stderr.write("gpufleet-admit: cannot use the admission state %s (%s): make it a regular file this user "
                         "can write, or point state_dir/peaks_path elsewhere\n" % (exc.filename, exc.strerror))
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
