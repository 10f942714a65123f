# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory admitted per compile: a compiler launcher that waits until the build's memory budget has room for this
source's expected peak (issue 17 item 2).

One global ``-j`` is sized either for the heaviest source (and wastes the node on the common ones) or for the common
ones (and OOMs on the heavy ones): sgl-kernel's SM120 GEMM sources peak at 6-15 GiB in cicc while the others stay
under 3 GiB. This launcher sits before the compiler (``CMAKE_CUDA_COMPILER_LAUNCHER`` / ``CMAKE_CXX_COMPILER_LAUNCHER``,
before a cache launcher when there is one) and:

- finds the source on the compiler's command line (``-c <file>``, else the last argument with a source suffix);
- expects the peak this source had the last time the node compiled it (``peaks.json``, keyed by the path relative to
  the project root), times a margin; a source never seen gets the default;
- waits, first come first served (a later, shorter compile may backfill without delaying the first), until the sum
  of what the running compiles reserved plus its own peak fits the budget (the build cgroup's memory limit less a
  reserve, or the configured budget) - alone it always runs, so a source bigger than the budget still gets its chance
  and an OOM backs the build off as before;
- runs the compiler and, while it runs, raises its reservation to what the compile really holds (the resident size
  of the launcher's process tree, times the margin) once that passes what was reserved: a source never seen, or one
  that grew since, holds the budget it uses, so the compiles that come after wait for it (the real tree's
  ``w4a8_grouped_mm_c3x.cu``, never seen, reserved the 5 GiB default and held 13.4);
- then records the largest resident size of any process it started (``RUSAGE_CHILDREN``) as the source's peak (a
  compile killed by a signal keeps the larger of its partial peak and the one known before).

The ledger is a small JSON file under ``flock``; entries of dead launchers are reclaimed. Stdlib only: the role copies
this file beside the build and runs it with the build venv's python (``python gpufleet_admit.py --config=F -- cc ...``).
The pure functions are tested in tests/unit; the launcher with real processes and a real cgroup in tests/build.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import re
import math
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++")
DEFAULTS = {
    "state_dir": None,          # ledger.json + ledger.lock (one per build)
    "peaks_path": None,         # peaks.json (node-local, shared by the builds of this node)
    "root": None,               # project source root: keys are paths relative to it
    "budget_bytes": None,       # None: the cgroup's memory.max (else MemAvailable at start)
    "reserve_bytes": 512 * 1024 ** 2,   # ninja, cmake, pip and the page cache inside the cgroup
    "default_bytes": 5 * 1024 ** 3,     # a source never seen: memory per nvcc thread ...
    "default_times": 1,                 # ... x nvcc threads
    "margin": 1.15,
    "poll_seconds": 0.5,
    # how often a running compile's process tree is measured: a scan of /proc (no children lists in every kernel)
    "sample_seconds": 2.0,
}


# -- pure functions -------------------------------------------------------------------------------------------------
def source_of(argv):
    """The source file a compiler command line compiles, or None (a link step, a version query)."""
    args = list(argv)
    for index, arg in enumerate(args[:-1]):
        if arg == "-c" and args[index + 1].endswith(SOURCE_SUFFIXES):
            return args[index + 1]
    for arg in reversed(args):
        if not arg.startswith("-") and arg.endswith(SOURCE_SUFFIXES):
            return arg
    return None


def source_key(source, root=None, cwd=None):
    """A stable key for the source: relative to the project root when under it, else its absolute path."""
    if source is None:
        return None
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), source))
    if root:
        root = os.path.normpath(root)
        if path == root or path.startswith(root + os.sep):
            return os.path.relpath(path, root)
    return path


def _number(value, low=0):
    """``value`` when it is a finite real number >= ``low`` (not a bool, not a string), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        return None
    return value if value >= low else None


def valid_peak(entry):
    """A peaks.json entry as the launcher wrote it, or None (a number, a list, NaN, "4GiB", a string ``seconds``,
    a negative or zero peak: never seen - a negative peak would lift the budget of every other compile)."""
    if not isinstance(entry, dict) or not _number(entry.get("peak_bytes"), 1):
        return None
    if entry.get("seconds") is not None and _number(entry.get("seconds")) is None:
        return None
    return entry


def valid_entry(pid, entry):
    """Whether a ledger entry is one a launcher wrote (a bad one is dropped, never trusted)."""
    return (str(pid).isdigit() and isinstance(entry, dict) and entry.get("state") in ("waiting", "running")
            and _number(entry.get("bytes")) is not None and _number(entry.get("since")) is not None
            and (entry.get("seconds") is None or _number(entry.get("seconds")) is not None)
            and (entry.get("started") is None or _number(entry.get("started")) is not None)
            and (entry.get("child") is None or _number(entry.get("child"), 1) is not None))


def expected_seconds(peaks, key):
    """How long this source took the last time (None: never seen, or killed)."""
    entry = valid_peak((peaks or {}).get(key)) if key else None
    if entry and entry.get("seconds") and not entry.get("killed"):
        return float(entry["seconds"])
    return None


def expected_bytes(peaks, key, default_bytes, margin):
    """(bytes this compile is expected to need, whether it was learned)."""
    entry = valid_peak((peaks or {}).get(key)) if key else None
    if entry and entry.get("peak_bytes"):
        return int(entry["peak_bytes"] * margin), True
    return int(default_bytes), False


def reclaim(ledger, alive):
    """The ledger without bad entries and those whose launcher is gone - unless its compiler still runs (a SIGKILLed
    launcher's compiler gets SIGKILL too, by PR_SET_PDEATHSIG; until it is gone it holds its reservation)."""
    return dict((pid, entry) for pid, entry in (ledger or {}).items() if valid_entry(pid, entry)
                and (alive(int(pid)) or (entry.get("child") and alive(int(entry["child"])))))


def decide(ledger, pid, budget_bytes, now=None):
    """Whether the waiting entry ``pid`` may start now.

    The first waiter starts when its bytes fit beside the running ones, or when nothing runs (alone it always runs).
    A later waiter may overtake it only without delaying it (backfilling, as batch schedulers do): it must fit now, and
    either end - by the seconds it took last time - before the running compiles free enough room for the first waiter,
    or fit beside the first waiter even then. So a heavy source is never starved by light ones, and light ones still
    fill the room a heavy one leaves."""
    now = time.time() if now is None else now
    me = ledger[str(pid)]
    running = [e for e in ledger.values() if e.get("state") == "running"]
    used = sum(e["bytes"] for e in running)
    fits = used + me["bytes"] <= budget_bytes or not running
    earlier = sorted((e["since"], p) for p, e in ledger.items() if p != str(pid) and e.get("state") == "waiting"
                     and (e["since"], p) < (me["since"], str(pid)))
    if not earlier or not fits:
        return fits
    head = ledger[earlier[0][1]]
    # when will the head fit? the running compiles end at start + their learned seconds (unknown: never, as far as
    # planning goes)
    ends = sorted((e.get("started", now) + e["seconds"] if e.get("seconds") else float("inf"), e["bytes"]) for e in running)
    room = budget_bytes - used
    if room >= head["bytes"] or not running:     # the head starts at its next look
        shadow, spare = now, max(room - head["bytes"], 0)
    else:
        shadow, spare = float("inf"), 0
        for end, size in ends:
            room += size
            if room >= head["bytes"]:
                shadow, spare = end, room - head["bytes"]
                break
    if me.get("seconds") and now + me["seconds"] <= shadow:
        return True
    return me["bytes"] <= spare


def killed_by_signal(rc):
    """Whether a compile's exit status says it was killed: by a signal (negative), or - through nvcc or a cache
    launcher, which report a child's death as 128 + its signal (the real tree's OOM-killed cicc came back as 137) -
    by the OOM killer or a stop."""
    return rc < 0 or rc - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def grown(reserved_bytes, live_bytes, margin):
    """The reservation of a running compile that holds ``live_bytes``: what it reserved, or more once it uses more
    (times the margin, as a learned peak is; it may grow further)."""
    return max(int(reserved_bytes), int(live_bytes * margin))


def tree_members(stats, root):
    """The pids of ``root`` and its descendants, from ``{pid: ppid}``."""
    children = {}
    for pid, ppid in stats.items():
        children.setdefault(ppid, []).append(pid)
    members, todo = [], [root]
    while todo:
        pid = todo.pop()
        members.append(pid)
        todo.extend(children.get(pid, ()))
    return members


def record(peaks, key, peak_bytes, seconds, killed, now):
    """The peaks with this compile's measurement: the last measurement wins (sources change); a compile killed by a
    signal (the OOM killer, a back-off) did not finish its peak, so it keeps the larger of this and what was known;
    one far quicker and smaller than last time is a compiler cache's hit (the cache launcher runs after this one)
    and changes nothing learned."""
    peaks = dict(peaks or {})
    if not key:
        return peaks
    peak = int(peak_bytes)
    previous = valid_peak(peaks.get(key)) or {}
    if killed:
        peak = max(peak, int(previous.get("peak_bytes") or 0))
    elif previous.get("peak_bytes") and previous.get("seconds") and not previous.get("killed") \
            and float(seconds) < 0.25 * float(previous["seconds"]) and peak < int(previous["peak_bytes"]):
        # far quicker and smaller than last time: a compiler cache hit (ccache/sccache after this launcher), not
        # what the source costs to compile - keep what was learned
        entry = dict(previous, runs=_count(previous, "runs") + 1, cache_hits=_count(previous, "cache_hits") + 1)
        peaks[key] = entry
        return peaks
    peaks[key] = {"peak_bytes": peak, "seconds": round(float(seconds), 1), "killed": bool(killed), "at": int(now),
                  "runs": _count(previous, "runs") + 1}
    return peaks


def _count(entry, name):
    return int(_number(entry.get(name)) or 0)


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


def budget(config, limit=None, available=None):
    """The bytes compiles may reserve together: the configured budget and the cgroup limit (the smaller), less the
    reserve; without either, what is available now."""
    candidates = [b for b in (config.get("budget_bytes"), limit) if b]
    base = min(candidates) if candidates else (available or 0)
    return max(int(base) - int(config.get("reserve_bytes") or 0), 1)


# -- files ----------------------------------------------------------------------------------------------------------
def open_regular(path, flags):
    """A descriptor of ``path`` only when it is a regular file: a FIFO planted there never blocks the open
    (O_NONBLOCK), a symlink is not followed (O_NOFOLLOW). OSError otherwise."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def load_json(path):
    """The JSON object in ``path``; {} when missing, unreadable, not a regular file or not an object."""
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY)) as handle:
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


def parent_pids(proc="/proc"):
    """``{pid: ppid}`` of every process readable now (one that ends meanwhile is left out)."""
    parents = {}
    for name in os.listdir(proc):
        if name.isdigit():
            try:
                with open(os.path.join(proc, name, "stat"), "rb") as handle:
                    # the command name may hold spaces and parentheses: the fields after its last ")"
                    parents[int(name)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (IOError, OSError, IndexError, ValueError):
                pass
    return parents


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


# The project's one size rule (plugins/module_utils/_human.parse_size_option, held to the same answers by a table
# test; this file stays stdlib-only): binary units or whole bytes; 64GB (10^9 or 2^30?) and "5 GiB" are refused.
_DECIMAL_UNIT = re.compile(r"^\s*([0-9.]+)\s*([kKmMgGtTpPeE])[bB]\s*$")
_SIZE_FORM = re.compile(r"([0-9]+(\.[0-9]+)?)(([KMGTPEkmgtpe])|([KMGTPE])iB|[Bb])?\Z")
_POWERS = "BKMGTPE"


def parse_size(option, value):
    """A size the config holds -> bytes, or ValueError naming ``option``."""
    if isinstance(value, float) and not (math.isnan(value) or math.isinf(value)) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%s: %r is negative" % (option, value))
        return value
    decimal = _DECIMAL_UNIT.match(value)
    if decimal:
        raise ValueError("%s: %r is ambiguous (decimal GB = 10^9 bytes, or GiB = 2^30?): write %s%siB for powers of "
                         "1024, or the number of bytes" % (option, value, decimal.group(1), decimal.group(2).upper()))
    form = _SIZE_FORM.match(value.strip())
    if not form:
        raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    return int(round(float(form.group(1)) * 1024 ** _POWERS.index((form.group(4) or form.group(5) or "B").upper())))


SIZES = ("budget_bytes", "reserve_bytes", "default_bytes")
PATHS = ("state_dir", "peaks_path", "root")


def checked_config(settings):
    """``DEFAULTS`` updated by ``settings``: sizes in bytes, numbers checked; ValueError naming an unknown key or a
    bad value (the sgl_kernel role and guarded_build build the file with the admission_config filter, which calls
    this, so a value the launcher refuses is refused before the build)."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError("unknown admission setting(s) %s: the settings are %s" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    config = dict(DEFAULTS)
    config.update(settings)
    for name in SIZES:
        if config[name] is not None:
            config[name] = parse_size(name, config[name])
    for name, low in (("default_times", 1), ("margin", 1), ("poll_seconds", 0.01), ("sample_seconds", 0.01)):
        if _number(config[name], low) is None:
            raise ValueError("%s: %r is not a number >= %s" % (name, config[name], low))
    for name in PATHS:
        if config[name] is not None and not isinstance(config[name], str):
            raise ValueError("%s: %r is not a path" % (name, config[name]))
    return config


def load_config(path):
    """The launcher's config file; ValueError naming what is wrong in it."""
    settings = load_json(path)
    if not settings and not os.path.isfile(path):
        raise ValueError("%s is not a readable regular file" % path)
    config = checked_config(settings)
    config["default_bytes"] = (config["default_bytes"] or DEFAULTS["default_bytes"]) * int(config["default_times"])
    for name in PATHS:
        if config.get(name):
            config[name] = os.path.expanduser(config[name])
    if not config.get("state_dir"):
        config["state_dir"] = os.path.dirname(os.path.abspath(path))
    if not config.get("peaks_path"):
        config["peaks_path"] = os.path.join(config["state_dir"], "peaks.json")
    return config


# -- the launcher ---------------------------------------------------------------------------------------------------
class Stopped(Exception):
    """A signal asked this launcher to end while it waited (raised by the main path, never by a handler)."""


def wait_for_room(config, key, need, pid, log, seconds=None, stopped=lambda: None):
    """Queue in the ledger, wait until admitted; returns (seconds waited, budget). Stopped when ``stopped()`` names
    a signal (checked outside the lock: a handler only sets a flag, so nothing ever waits on a lock it holds)."""
    state = config["state_dir"]
    ledger_path = os.path.join(state, "ledger.json")
    lock_path = os.path.join(state, "ledger.lock")
    room = budget(config, cgroup_limit(), mem_available())
    start = time.time()
    mine = {"state": "waiting", "bytes": need, "source": key, "since": start, "seconds": seconds}
    said = False
    while True:
        if stopped():
            raise Stopped()
        with Locked(lock_path):
            ledger = reclaim(load_json(ledger_path), pid_alive)
            ledger.setdefault(str(pid), dict(mine))
            if decide(ledger, pid, room):
                ledger[str(pid)]["state"] = "running"
                ledger[str(pid)]["started"] = time.time()
                save_json(ledger_path, ledger)
                return time.time() - start, room
            save_json(ledger_path, ledger)
        if not said:
            log("gpufleet-admit: %s waits for %.1f GiB of the %.1f GiB budget" % (key, need / 1024.0 ** 3, room / 1024.0 ** 3))
            said = True
        time.sleep(float(config["poll_seconds"]))


def update(config, pid, change):
    """Apply ``change(entry)`` to this launcher's running entry under the lock (it returns whether to save)."""
    state = config["state_dir"]
    with Locked(os.path.join(state, "ledger.lock")):
        ledger = load_json(os.path.join(state, "ledger.json"))
        entry = ledger.get(str(pid))
        if valid_entry(pid, entry) and entry["state"] == "running" and change(entry):
            save_json(os.path.join(state, "ledger.json"), ledger)


def hold(config, pid, live_bytes):
    """Raise this launcher's running reservation to what its compile holds (``grown``), when that is more."""
    def grow(entry):
        wanted = grown(entry["bytes"], live_bytes, float(config["margin"]))
        if wanted > entry["bytes"]:
            entry["bytes"], entry["grown"] = wanted, True
            return True
        return False
    update(config, pid, grow)


def wait_holding(config, pid, child, stopped=lambda: None):
    """Wait for the compiler; while it runs, hold in the ledger what its process tree really uses. Its return code.
    A signal the handler could not forward (it came before the compiler existed) is forwarded here."""
    forwarded = None
    while True:
        if stopped() and forwarded is None:
            forwarded = stopped()
            child.send_signal(forwarded)
        try:
            return child.wait(timeout=float(config["sample_seconds"]))   # returns as the compiler ends, not later
        except subprocess.TimeoutExpired:
            hold(config, pid, resident_bytes(tree_members(parent_pids(), child.pid)))


def leave(config, pid):
    state = config["state_dir"]
    with Locked(os.path.join(state, "ledger.lock")):
        ledger = reclaim(load_json(os.path.join(state, "ledger.json")), pid_alive)
        ledger.pop(str(pid), None)
        save_json(os.path.join(state, "ledger.json"), ledger)


def learn(config, key, peak, seconds, killed):
    peaks_path = config["peaks_path"]
    with Locked(peaks_path + ".lock"):
        save_json(peaks_path, record(load_json(peaks_path), key, peak, seconds, killed, time.time()))


def die_with_parent():
    """preexec of the compiler: SIGKILL it when this launcher dies (PR_SET_PDEATHSIG), so a SIGKILLed launcher
    never leaves a compile running outside the ledger. Linux only; elsewhere the ledger keeps its entry while the
    compiler's pid lives."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError, ImportError):
        pass


def run_admitted(config, key, argv, peaks, stop):
    """Wait for room, run the compiler, leave the ledger, learn its peak. The compiler's exit status."""
    need, _learned = expected_bytes(peaks, key, config["default_bytes"], float(config["margin"]))
    pid = os.getpid()
    stopped = lambda: stop["signal"]   # noqa: E731
    try:
        wait_for_room(config, key, need, pid, lambda text: sys.stderr.write(text + "\n"),
                      expected_seconds(peaks, key), stopped)
        if stopped():
            raise Stopped()
        start = time.time()
        child = subprocess.Popen(argv, preexec_fn=die_with_parent)
        stop["child"] = child
        update(config, pid, lambda entry: entry.update(child=child.pid) or True)
        rc = wait_holding(config, pid, child, stopped)
        seconds = time.time() - start
    except Stopped:
        return 128 + stop["signal"]
    finally:
        leave(config, pid)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    learn(config, key, peak, seconds, killed_by_signal(rc))
    return 128 - rc if rc < 0 else rc


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path = None
    while argv and argv[0].startswith("--config="):
        config_path = argv.pop(0).split("=", 1)[1]
    if argv and argv[0] == "--":
        argv.pop(0)
    if not argv:
        sys.stderr.write("gpufleet-admit: usage: gpufleet_admit.py --config=FILE [--] COMPILER ARGS...\n")
        return 2
    key = None
    config = None
    if config_path:
        try:
            config = load_config(config_path)
        except ValueError as exc:
            sys.stderr.write("gpufleet-admit: %s: %s\n" % (config_path, exc))
            return 2
        key = source_key(source_of(argv[1:]), config.get("root"))
    if config is None or key is None:   # not a compile of a source: run it as is
        os.execvp(argv[0], argv)
    for folder in (config["state_dir"], os.path.dirname(config["peaks_path"])):
        try:
            os.makedirs(folder)
        except OSError:
            pass
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
        return run_admitted(config, key, argv, load_json(config["peaks_path"]), stop)
    except (IOError, OSError) as exc:   # a lock that is a FIFO or a link, a folder not writable: say which
        sys.stderr.write("gpufleet-admit: cannot use the admission state %s (%s): make it a regular file this user "
                         "can write, or point state_dir/peaks_path elsewhere\n" % (exc.filename, exc.strerror))
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
