# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory admitted per compile: a compiler launcher that schedules the node's compiles (issues 17, 28, 29, 35).

ninja runs wide; each compile's launcher (``CMAKE_<LANG>_COMPILER_LAUNCHER``, before a cache launcher) joins the
node's queue - a small JSON ledger under ``flock`` - and one decision, taken by whichever launcher holds the lock,
first relieves the memory of what runs (``_admission_pressure``: freeze the compile furthest from done before the
running set's growth crosses the budget, thaw when room comes back, evict and queue again when freezing cannot make
room), then starts what ``pick_next`` picks: the longest learned compile that fits the budget - the build cgroup's
limit less a reserve, re-read at every decision - within the CPUs (nvcc ``--threads`` counted), an unlearned one at
its default claim, wide. A running compile's reservation follows its process tree (``reservation``). Peaks, times
and phases are learned per source (``peaks.json``) and may be seeded from other nodes' files. A dead launcher's
entry is reclaimed and its frozen compile ended; its compiler dies with it (PR_SET_PDEATHSIG). Stdlib only: the role
copies the files of ``LAUNCHER_FILES`` beside the build (``python gpufleet_admit.py --config=F -- cc ...``).
``--check`` and ``--census`` read what the node learned. Pure functions: tests/unit; real processes: tests/build."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as settings_rule
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_pressure as pressure
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_node as node
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_census as census
except ImportError:     # beside the build: the role copies the files of settings_rule.LAUNCHER_FILES
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _admission_settings as settings_rule  # pylint: disable=import-error
    import _admission_policy as policy  # pylint: disable=import-error
    import _admission_pressure as pressure  # pylint: disable=import-error
    import _admission_threads as threads_rule  # pylint: disable=import-error
    import _admission_node as node  # pylint: disable=import-error
    import _admission_census as census  # pylint: disable=import-error

DEFAULTS = settings_rule.DEFAULTS


def load_config(path):
    """The launcher's config file; ValueError naming what is wrong in it."""
    settings = node.load_json(path)
    if not settings and not os.path.isfile(path):
        raise ValueError("%s is not a readable regular file" % path)
    return settings_rule.launcher_config(settings, os.path.dirname(os.path.abspath(path)))


# -- the launcher ---------------------------------------------------------------------------------------------------
class Stopped(Exception):
    """A signal asked this launcher to end while it waited (raised by the main path, never by a handler)."""


class Oversize(Exception):
    """A learned source waited ``oversize_wait_seconds`` for a budget that never came back to what it needs alone."""


def _files(config):
    state = config["state_dir"]
    return [os.path.join(state, name) for name in ("ledger.json", "ledger.lock", "ledger.log")]


def log_event(config, **event):
    """One JSON line in the ledger's log (under the ledger's lock): what the scheduler started and what ended."""
    event["t"] = round(time.time(), 3)
    fd = node.open_regular(_files(config)[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def read_ledger(config):
    """The ledger without bad entries and those whose launcher is gone; a gone launcher's frozen compile is ended,
    its group thawed (a SIGKILLed launcher's nvcc dies with it, a stopped cicc under it must not stay behind)."""
    raw = node.load_json(_files(config)[0])
    kept = policy.reclaim(raw, node.pid_alive, node.pid_start)
    for pid, entry in raw.items():
        if pid not in kept and policy.valid_entry(pid, entry) and entry.get("frozen"):
            node.signal_compile(entry, "evict")
        if pid not in kept and policy.valid_entry(pid, entry) and not node.pid_alive(int(pid)):
            node.close_doorbell(config["state_dir"], pid, None, gone=True)   # a SIGKILLed waiter's (its pid not reused)
    return kept


def horizon_of(config, ledger):
    """How far ahead the freeze looks: two samples and a poll (a decision may wait that long for the next), longer
    while the launchers' samples come further apart than asked (``_admission_pressure.horizon``)."""
    poll = float(config["poll_seconds"])
    return pressure.horizon(2 * float(config["sample_seconds"]) + poll, ledger.values(), poll)


def live_budget(config, ledger, group):
    """This build's budget, re-read now (issue 35 item 2: a limit lowered mid-build), written into the entries of its
    cgroup; what the launchers of the node hold themselves (item 5), and what this build holds beyond its compiles."""
    held = sum(e.get("live") or 0 for e in ledger.values() if e.get("state") == "running")
    limit, available = node.cgroup_limit(), node.mem_available()
    room = settings_rule.budget(config, limit, available, held)
    top = settings_rule.ceiling(config, limit, available, held)
    for entry in ledger.values():
        if entry.get("group") == group:
            entry.update(budget=room, ceiling=top)
    # what the cgroup holds beyond its compiles' trees (ninja, the launchers, kernel memory), when it can be read
    used, now, horizon = node.working_set(), time.time(), horizon_of(config, ledger)
    beyond = used - sum(pressure.held_now(e, now, horizon) for e in ledger.values()
                        if e.get("group") == group and e.get("state") == "running") if used is not None else 0
    launchers = sum(e.get("self_bytes") or 0 for e in ledger.values())
    own = sum(e.get("self_bytes") or 0 for e in ledger.values() if e.get("group") == group)
    # admission counts every build's launchers (the node's memory is shared), the freeze this build's own overhead;
    # the reserve already keeps room for what runs beside the compiles, so each counts only what outgrows it
    reserve = settings_rule.base_bytes(config, limit, available, held) - room
    return room, settings_rule.beyond_reserve(max(launchers, beyond), reserve), settings_rule.beyond_reserve(max(own, beyond), reserve)


def relieve(config, ledger, room, overhead, group):
    """Freeze, thaw or evict what runs as ``_admission_pressure.decide`` says (issue 35 item 1), build by build: the
    compiles of each memory cgroup against that cgroup's budget (the kernel kills within the cgroup whose limit is
    crossed; one build near its limit must not freeze another's compiles - fair between builds on one ledger, item 3);
    this build's overhead as measured, another's as its launchers' own memory. Each action logged."""
    horizon = horizon_of(config, ledger)
    builds = {}
    for pid, e in ledger.items():
        if e["state"] == "running" and not e.get("evicted") and e.get("live") is not None:
            builds.setdefault(e.get("group"), []).append(dict(e, pid=pid))
    for build_group, running in sorted(builds.items(), key=lambda item: str(item[0])):
        mine = build_group == group
        budget = min([e.get("budget", room) for e in running] + ([room] if mine else []))
        spent = overhead if mine else sum(e.get("self_bytes") or 0 for e in ledger.values() if e.get("group") == build_group)
        relieve_build(config, ledger, running, budget, horizon, spent)


def relieve_build(config, ledger, running, budget, horizon, overhead):
    """``relieve`` for the running compiles of one build."""
    for action, pid in pressure.decide(running, budget, horizon, time.time(), overhead, float(config["margin"])):
        entry = ledger[pid]
        if not node.signal_compile(entry, action):
            continue
        now = time.time()
        if action == "freeze":
            entry["frozen"] = now
        else:
            entry["frozen_seconds"] = (entry.get("frozen_seconds") or 0) + now - (entry.pop("frozen", None) or now)
        if action == "evict":
            entry.update(evicted=True, live=0, rate=0, bytes=0)
        log_event(config, event=action, pid=int(pid), source=entry.get("source"), live_bytes=entry.get("live"),
                  budget=budget, held=sum(e["live"] for e in running), overhead=overhead,
                  rates=[int(e.get("rate") or 0) for e in running])


def schedule(config, ledger, cpus, group):
    """The one decision, taken under the lock by whichever launcher holds it: relieve the memory of what runs, then
    start what ``pick_next`` picks until nothing more fits (its launcher sees ``running`` and runs it)."""
    room, overhead, own_overhead = live_budget(config, ledger, group)
    margin = float(config["margin"])
    if config.get("freeze"):
        relieve(config, ledger, room, own_overhead, group)
    while True:
        entries = [dict(entry, pid=pid) for pid, entry in ledger.items() if not entry.get("evicted")]
        running = [e for e in entries if e["state"] == "running"]
        waiting = [e for e in entries if e["state"] == "waiting"]
        now, settle = time.time(), float(config["settle_seconds"])
        if policy.still_arriving(waiting, now, settle) or not pressure.admitting(running):
            return
        pick = policy.pick_next([e for e in waiting if e["since"] <= now - settle], running, room, cpus, margin, now, overhead)
        if pick is None:
            return
        entry = ledger[pick["pid"]]
        entry.update(threads=pick.get("threads") or 1, bytes=pick["bytes"], state="running", started=time.time())
        node.ring(config["state_dir"], pick["pid"])   # it reads the ledger once this lock is released
        log_event(config, event="start", pid=int(pick["pid"]), source=entry.get("source"), bytes=entry["bytes"], options=entry.get("options"),
                  seconds=entry.get("seconds"), threads=entry.get("threads") or 1, learned=bool(entry.get("learned")),
                  running=len(running) + 1, running_threads=sum(e.get("threads") or 1 for e in running) +
                  (entry.get("threads") or 1), used_bytes=int(policy.load(running + [entry], margin)), budget=room)


def _inode(path):
    try:
        found = os.stat(path)
        return found.st_ino, found.st_mtime, found.st_size
    except OSError:
        return None


def oversize(config, entry):
    """Why a learned waiting entry cannot start on the live budget (its peak alone is over its build's ceiling)."""
    peak = entry["bytes"] / float(config["margin"])
    if entry.get("learned") and peak > entry.get("ceiling", entry["budget"]):
        return "%s needs %.1f GiB alone; the build's memory now allows %.1f GiB" % (
            entry.get("source"), peak / 1024.0 ** 3, entry.get("ceiling", entry["budget"]) / 1024.0 ** 3)
    return None


def wait_for_room(config, mine, pid, log, stopped=lambda: None):
    """Queue ``mine`` in the ledger and wait until the decision starts it; its entry then. A waiting compile
    only stats the ledger between decisions (a change of inode: something started, grew or ended); a signal only
    sets a flag, checked here outside the lock, so nothing ever waits on a lock it holds."""
    bell = node.open_doorbell(config["state_dir"], pid)
    try:
        return _wait(config, mine, pid, log, stopped, bell)
    finally:
        node.close_doorbell(config["state_dir"], pid, bell)


def _wait(config, mine, pid, log, stopped, bell):
    """``wait_for_room``'s loop, asleep on this launcher's doorbell between looks."""
    ledger_path, lock_path = _files(config)[:2]
    poll, seen, decided, said, too_big_since = float(config["poll_seconds"]), None, 0.0, None, None
    settle = float(config["settle_seconds"])
    while True:
        if stopped():
            raise Stopped()
        now = time.time()
        if seen is None or _inode(ledger_path) != seen or now - decided >= 4 * poll or now - mine["since"] < settle + poll:
            with node.Locked(lock_path):
                ledger = read_ledger(config)
                ledger.setdefault(str(pid), dict(mine))
                schedule(config, ledger, mine["cpus"], mine["group"])
                node.save_json(ledger_path, ledger)
                seen, decided, entry = _inode(ledger_path), time.time(), dict(ledger[str(pid)])
            if entry["state"] == "running":
                return entry
            why = oversize(config, entry)
            too_big_since = (too_big_since or now) if why else None
            if why and now - too_big_since >= float(config["oversize_wait_seconds"]):
                raise Oversize(why)
            if why and said != "oversize":
                log("gpufleet-admit: %s: it waits for the budget to come back (at most %d s)" % (why, config["oversize_wait_seconds"]))
                said = "oversize"
        if not said and now - mine["since"] >= settle + poll:   # not the settling moment every compile has
            log("gpufleet-admit: %s waits for %.1f GiB of the %.1f GiB budget" % (
                mine["source"], mine["bytes"] / 1024.0 ** 3, entry.get("budget", mine["budget"]) / 1024.0 ** 3))
            said = "room"
        if node.sleep_on(bell, poll):
            seen = None   # rung: decided for it - look under the lock, which the ringer holds until the ledger is saved


def update(config, mine, change):
    """Apply ``change(entry)`` to this launcher's running entry under the lock, and decide again (a reservation that
    went down frees room at once; a growth may freeze another). The entry as it is then ({} when gone)."""
    ledger_path, lock_path = _files(config)[:2]
    with node.Locked(lock_path):
        ledger = read_ledger(config)
        entry = ledger.get(str(mine["pid"]))
        if entry and entry["state"] == "running":
            change(entry)
            schedule(config, ledger, mine["cpus"], mine["group"])
            node.save_json(ledger_path, ledger)
        return dict(ledger.get(str(mine["pid"])) or {})


def leave(config, mine, **event):
    """Take this launcher's entry out of the ledger and decide again; the entry as it was ({} when already gone)."""
    ledger_path, lock_path = _files(config)[:2]
    with node.Locked(lock_path):
        ledger = read_ledger(config)
        gone = ledger.pop(str(mine["pid"]), None)
        if gone and event:
            log_event(config, event="end", pid=mine["pid"], evicted=bool(gone.get("evicted")), **event)
        schedule(config, ledger, mine["cpus"], mine["group"])
        node.save_json(ledger_path, ledger)
    return gone or {}


def signal_group(child, signum):
    """``signum`` to the compile's process group, then SIGCONT: a frozen compile must see a stop, never stay stopped."""
    for number in (signum, signal.SIGCONT):
        try:
            os.killpg(child.pid, number)
        except OSError:
            pass


def wait_holding(config, mine, held, child, known, stopped=lambda: None):
    """Wait for the compiler; while it runs, hold in the ledger what its process tree needs now (``reservation``), what
    it holds (``live``) and how fast it grows (``rate``): the freeze decision reads them. Its return code and the
    phases it went through ``[[name of the process holding most, bytes the tree held]]``. A signal the handler could
    not forward (it came before the compiler existed) is forwarded here."""
    margin, position, seen, forwarded = float(config["margin"]), 0, [], None
    phases, peak = policy.phases_of(known), int((known or {}).get("peak_bytes") or 0)
    history = [(time.time(), 0)]
    while True:
        if stopped() and forwarded is None:
            forwarded = stopped()
            signal_group(child, forwarded)
        try:
            return child.wait(timeout=float(config["sample_seconds"])), seen   # returns as the compiler ends
        except subprocess.TimeoutExpired:
            sizes = node.tree_sizes(child.pid)
            live, now = sum(size for _name, size in sizes.values()), time.time()
            # the phase is named by the process that holds most (nvcc's sh holds little while its cicc grows)
            name = max((size, name) for name, size in sizes.values())[1] if sizes else "?"
            if seen and seen[-1][0] == name:
                seen[-1][1] = max(seen[-1][1], live)
            elif len(seen) < 64:
                seen.append([name, live])
            position = policy.advance(phases, position, name)
            held = policy.reservation({"bytes": held}, live, margin, phases, position, peak)
            # growth over the last second or so, not one sample: a compile descheduled on a busy machine catches up
            # in a burst that says nothing of how fast it grows; and one that stopped growing grows no more (the lower of
            # the window's rate and the last interval's). The last sample stays however old: a launcher starved past
            # the window (CI, 2026-12-05) had no previous sample and died of it, its compile with it
            window = max(1.0, 3 * float(config["sample_seconds"]))
            history = [point for point in history[:-1] if now - point[0] <= window] + history[-1:] + [(now, live)]
            rate = min(policy.growth_rate(history[0], history[-1], float(config["sample_seconds"])),
                       policy.growth_rate(history[-2], history[-1], float(config["sample_seconds"])))
            # a frozen compile keeps the rate it grew at: what it may grow by once thawed
            # how far apart the samples really came (the freeze's horizon grows with it on a starved machine)
            entry = update(config, mine, lambda e, h=held, now_live=live, r=rate, at=now, gap=now - history[-2][0]: e.update(
                bytes=h, live=now_live, rate=e.get("rate", 0) if e.get("frozen") else r, sampled=at, fresh=False,
                gap=round(gap, 3), self_bytes=node.private_bytes(os.getpid())))
            if entry.get("frozen"):
                history = [(now, live)]


def learn(config, key, peak, seconds, killed, phases, threads=None, stopped=False, known_before=None, cache_hit=False):
    peaks_path = config["peaks_path"]
    with node.Locked(peaks_path + ".lock"):
        node.save_json(peaks_path, policy.record(node.load_json(peaks_path), key, peak, seconds, killed, time.time(), phases,
                                                 threads, stopped=stopped, known_before=known_before, cache_hit=cache_hit))


def start_compile():
    """preexec of the compiler: its own process group (what a freeze stops and a thaw continues, its children with
    it), and SIGKILL when this launcher dies (PR_SET_PDEATHSIG), so a SIGKILLed launcher never leaves a compile running
    outside the ledger. Linux only; elsewhere the ledger keeps its entry while the compiler's pid lives."""
    os.setpgid(0, 0)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError, ImportError):
        pass


def node_peaks(config):
    """This node's peaks over the seeds (other nodes' files) over the census of its tree, merged."""
    shipped = [census.census_peaks(node.load_json(path), config.get("tree")) for path in (config.get("census") or [])]
    return policy.merge_peaks(*shipped + [node.load_json(path) for path in (config.get("seed_peaks") or [])] +
                              [node.load_json(config["peaks_path"])])


def waiting_entry(config, key, argv, peaks):
    """This compile's ledger entry while it waits: what it needs, its learned time, its threads or thread options."""
    need, learned = policy.expected_bytes(peaks, key, config["default_bytes"], float(config["margin"]))
    cpus = int(config.get("cpus") or node.cpu_count())
    room = settings_rule.budget(config, node.cgroup_limit(), node.mem_available())
    mine = {"state": "waiting", "bytes": need, "source": key, "since": time.time(), "seconds": policy.expected_seconds(peaks, key),
            "threads": threads_rule.threads_of(argv[1:], cpus), "learned": learned, "budget": room, "cpus": cpus,
            "pid": os.getpid(), "pid_start": node.pid_start(os.getpid()), "group": node.memory_group(),
            "self_bytes": node.private_bytes(os.getpid())}
    archs = threads_rule.arch_count(argv) if config.get("threads_per_source") and threads_rule.is_nvcc(argv) else 0
    if archs > 1:   # the scheduler picks its nvcc threads: what each count needs, up to the archs and the CPUs
        mine.update(threads=1, options=policy.thread_options(peaks, key, min(archs, cpus, int(config.get("max_threads") or archs)),
                                                             archs, config["per_thread_bytes"], float(config["margin"])))
        mine["bytes"] = mine["options"][0]
    return mine, archs


def run_admitted(config, key, argv, stop):
    """Wait for the decision, run the compiler, leave the ledger, learn its peak; evicted (killed to make room for
    another), queue again. The compiler's exit status."""
    peaks = node_peaks(config)
    mine, archs = waiting_entry(config, key, argv, peaks)
    evictions = 0

    def stopped():
        return stop["signal"]

    def say(text):
        sys.stderr.write(text + "\n")

    while True:
        rc, seconds, seen, gone = None, 0.0, [], None
        try:
            started = wait_for_room(config, dict((k, v) for k, v in mine.items() if k != "pid"), mine["pid"], say, stopped)
            held, threads = started["bytes"], started.get("threads") if archs > 1 else None
            if stopped():
                raise Stopped()
            start = time.time()
            child = subprocess.Popen(threads_rule.with_threads(argv, threads) if threads else argv, preexec_fn=start_compile)
            stop["child"] = child
            update(config, mine, lambda entry: entry.update(child=child.pid, child_start=node.pid_start(child.pid), live=0, fresh=True))
            rc, seen = wait_holding(config, mine, held, child, policy.known(peaks, key), stopped)
            seconds = time.time() - start
        except Stopped:
            return 128 + stop["signal"]
        except Oversize as exc:
            say("gpufleet-admit: %s: not started (raise the build's memory limit, or let this source build elsewhere)" % exc)
            return 1
        finally:
            gone = leave(config, mine, source=key, rc=rc, seconds=round(seconds, 2))
        if not gone.get("evicted") or stopped():
            break
        evictions += 1
        say("gpufleet-admit: %s was stopped to make room for a compile that needed it; it runs again, first%s" % (
            key, " and alone" if evictions > 1 else ""))
        # it goes first claiming what it held x the margin; evicted twice, the whole budget (never a third time)
        mine.update(since=time.time(), first=True, alone=evictions > 1, learned=False, options=None, threads=1,
                    bytes=max([mine["bytes"]] + [int(size * float(config["margin"])) for _name, size in seen]))
    seconds = max(seconds - float(gone.get("frozen_seconds") or 0), 0.0)   # time frozen is not the compile's
    # nvcc --threads runs cicc/ptxas side by side, and a killed compile needs at least what its whole tree held: the
    # tree's sampled sum can pass the largest one process held
    peak = max([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024] + [size for _name, size in seen])
    learn(config, key, peak, seconds, policy.killed_by_signal(rc), seen, threads, stopped=bool(stop["signal"]),
          known_before=peaks, cache_hit=policy.cache_hit(argv, seen, seconds))
    return 128 - rc if rc < 0 else rc


def check(config, out=sys.stdout):
    """``--check``: the sources of this tree that need more than this node's memory can give one compile alone (its
    ceiling: the limit less what ninja needs beside it), before any build: learned ones over it, and ones OOM-killed
    holding a peak that times the margin is over it; and the smallest memory limit that builds them."""
    limit, available = node.cgroup_limit(), node.mem_available()
    room, top = settings_rule.budget(config, limit, available), settings_rule.ceiling(config, limit, available)
    peaks = node_peaks(config)
    big, smallest, message = census.refusal(peaks, top, config.get("tree"), float(config["margin"]))
    out.write(json.dumps({"budget_bytes": room, "ceiling_bytes": top, "smallest_limit_bytes": smallest,
                          "safe_max_jobs": census.safe_fixed_jobs(peaks, room, config.get("cpus") or node.cpu_count(), config.get("tree")),
                          "too_big": [{"source": k, "peak_bytes": p, "oom_killed": o} for k, p, o in big],
                          "message": message}) + "\n")
    return 0


def publish(config, out=sys.stdout):
    """``--census``: what this node learned of the config's tree as a census (docs/build.md, "The census"), the file a
    fleet ships or seeds its next nodes with (``census: [paths]``)."""
    tree, where = config.get("tree"), config["peaks_path"]
    document = census.census_of(node_peaks(config), tree, "learned by the admission launcher on %s, %s (%s)" % (
        socket.gethostname(), time.strftime("%Y-%m-%d", time.gmtime()), where)) if tree else {"sources": {}}
    if not document["sources"]:
        sys.stderr.write("gpufleet-admit: nothing learned yet of %s in %s\n" % (tree or "a tree (the config names none)", where))
        return 1
    out.write(json.dumps(document, indent=1, sort_keys=True) + "\n")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path, checking = None, False
    while argv and (argv[0].startswith("--config=") or argv[0] in ("--check", "--census")):
        option = argv.pop(0)
        checking = option if option in ("--check", "--census") else checking
        config_path = option.split("=", 1)[1] if "=" in option else config_path
    if argv and argv[0] == "--":
        argv.pop(0)
    if not argv and not (checking and config_path) or checking and argv:
        sys.stderr.write("gpufleet-admit: usage: gpufleet_admit.py --config=FILE [--check | --census | [--] COMPILER ARGS...]\n")
        return 2
    config = key = None
    if config_path:
        try:
            config = load_config(config_path)
        except ValueError as exc:
            sys.stderr.write("gpufleet-admit: %s: %s\n" % (config_path, exc))
            return 2
        if checking:
            return (check if checking == "--check" else publish)(config)
        key = policy.source_key(policy.source_of(argv[1:]), config.get("root"), tree=config.get("tree"), flags=policy.flags_id(argv[1:]),
                                offline=config.get("offline_dir"))
    if config is None or key is None:   # not a compile of a source: run it as is
        os.execvp(argv[0], argv)
    for folder in (config["state_dir"], os.path.dirname(config["peaks_path"])):
        try:
            os.makedirs(folder)
        except OSError:
            pass
        problem = node.open_to_others(folder)
        if problem:
            sys.stderr.write("gpufleet-admit: refusing the admission state %s: %s\n" % (folder, problem))
            return 2
    stop = {"signal": None, "child": None}

    def forward(signum, _frame):
        # never block here (no lock, no file): note the signal, pass it to the compile's group (thawed); the main
        # path leaves
        stop["signal"] = stop["signal"] or signum
        child = stop["child"]
        if child is not None and child.returncode is None:
            signal_group(child, signum)

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
