# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher as the node's compile scheduler (issue 29 items 1, 2, 7), with real processes: what it
started, in which order and beside what, is read from the ledger's own log (ledger.log)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time

from conftest import PROJECTS, REPO

ADMISSION = os.path.join(REPO, "plugins", "module_utils", "_build", "_admission.py")
MIXED = os.path.join(PROJECTS, "standin_mixed_memory")
HOGCC = os.path.join(MIXED, "hogcc.py")
MIB = 1024 ** 2


def write_config(path, **settings):
    base = {"reserve_bytes": 0, "default_bytes": 100 * MIB, "poll_seconds": 0.05, "sample_seconds": 0.2}
    base.update(settings)
    path.write_text(json.dumps(base))
    return str(path)


def compile_(config, src, name, out, *wrapper):
    command = list(wrapper) or [sys.executable, HOGCC]
    return subprocess.Popen([sys.executable, ADMISSION, "--config=" + config, "--"] + command +
                            ["cc", "-c", str(src / name), "-o", str(out / (name + ".o"))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


def events(state, kind=None):
    with open(str(state / "ledger.log")) as handle:
        rows = [json.loads(line) for line in handle]
    return [row for row in rows if kind in (None, row["event"])]


def finish(*procs):
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outs
    return outs


def sources(src, **hogs):
    src.mkdir(exist_ok=True)
    for name, (mib, seconds) in hogs.items():
        (src / (name + ".c")).write_text("/* gpufleet-hog: %d %s */\nint %s(void) { return 1; }\n" % (mib, seconds, name))


def wait_running(state, pid):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if (json.loads((state / "ledger.json").read_text()).get(str(pid)) or {}).get("state") == "running":
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError("%d never ran" % pid)


def test_the_longest_fitting_compile_starts_first(tmp_path):
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, block=(20, 2), s_short=(20, 0.2), s_long=(20, 0.2), s_middle=(20, 0.2))
    learned = dict((name + ".c", {"peak_bytes": 80 * MIB, "seconds": seconds, "killed": False})
                   for name, seconds in (("block", 2), ("s_short", 10), ("s_long", 300), ("s_middle", 60)))
    (tmp_path / "peaks.json").write_text(json.dumps(learned))
    # one at a time (100 MiB): the blocker runs, the three queue in the order short, long, middle
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=100 * MIB, cpus=4)
    block = compile_(config, src, "block.c", tmp_path)
    wait_running(state, block.pid)
    queued = []
    for name in ("s_short.c", "s_long.c", "s_middle.c"):
        queued.append(compile_(config, src, name, tmp_path))
        time.sleep(0.3)
    finish(block, *queued)
    assert [row["source"] for row in events(state, "start")] == ["block.c", "s_long.c", "s_middle.c", "s_short.c"]
    assert all(row["running"] == 1 for row in events(state, "start"))


def test_ninja_runs_wide_and_the_launcher_caps_compiles_at_the_cpus(tmp_path):
    """ninja -j12 over the mixed stand-in (12 sources, all learned): at most 2 compiles run (cpus: 2), and 2 do; the
    launchers ninja starts together settle for a moment before the first decision, so the longest go first."""
    peaks = dict(("src/" + name, {"peak_bytes": (320 if "heavy" in name else 60) * MIB, "killed": False,
                                  "seconds": 3.0 if "heavy" in name else 1.5}) for name in os.listdir(os.path.join(MIXED, "src")))
    (tmp_path / "peaks.json").write_text(json.dumps(peaks))
    state = tmp_path / "state"
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"), root=MIXED,
                          budget_bytes=1024 * MIB, cpus=2, settle_seconds=3)
    build = str(tmp_path / "build")
    launcher = ";".join([sys.executable, ADMISSION, "--config=" + config, sys.executable, HOGCC])
    subprocess.run(["cmake", "-S", MIXED, "-B", build, "-G", "Ninja", "-DCMAKE_C_COMPILER_LAUNCHER=" + launcher],
                   check=True, stdout=subprocess.PIPE)
    proc = subprocess.run(["ninja", "-C", build, "-j12"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    starts = events(state, "start")
    assert len(starts) == 12 and len(events(state, "end")) == 12
    assert max(row["running_threads"] for row in starts) == 2, starts
    # the heavy (longest) ones go first - among those that had arrived (12 interpreters starting on a loaded 2-core
    # machine take seconds; the settling moment gathers most of them)
    assert starts[0]["source"].startswith("src/a_heavy_"), starts[:3]
    assert {"src/a_heavy_1.c", "src/a_heavy_2.c"} <= set(row["source"] for row in starts[:3]), starts[:3]


def test_two_builds_on_one_node_share_the_budget(tmp_path):
    state = tmp_path / "state"
    procs = []
    for build in ("one", "two"):
        src = tmp_path / build
        sources(src, heavy=(250, 1.5))
        (tmp_path / (build + ".json")).write_text(json.dumps({build + ":heavy.c": {"peak_bytes": 260 * MIB, "seconds": 2}}))
        config = write_config(tmp_path / (build + "-c.json"), state_dir=str(state), root=str(src), tree=build,
                              peaks_path=str(tmp_path / (build + ".json")), budget_bytes=400 * MIB)
        procs.append(compile_(config, src, "heavy.c", src))
        time.sleep(0.2)
    finish(*procs)
    rows = events(state)
    assert [(row["event"], row["source"]) for row in rows] == [
        ("start", "one:heavy.c"), ("end", "one:heavy.c"), ("start", "two:heavy.c"), ("end", "two:heavy.c")], rows


PHASES = r'''
import os, sys, time
big = open("/proc/self/comm").read().strip() == "bigphase"
block = bytearray((300 if big else 20) * 1024 * 1024)
for index in range(0, len(block), 4096):
    block[index] = 1
time.sleep(2 if big else 3)
if big:
    small = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "smallphase")
    os.execv(small, [small] + sys.argv)
'''


def test_a_reservation_follows_the_compiles_phase(tmp_path):
    """A compile of two phases (a 300 MiB "bigphase" process, then a 20 MiB "smallphase" one, as cicc then ptxas):
    learned once, the next time its reservation drops as the big phase ends and a 200 MiB compile waiting beside
    it in a 400 MiB budget starts before it ends."""
    tools = tmp_path / "tools"
    tools.mkdir()
    script = tools / "phases.py"
    script.write_text(PHASES)
    for name in ("bigphase", "smallphase"):
        os.symlink(sys.executable, str(tools / name))
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, twophase=(0, 0), other=(150, 1))
    (tmp_path / "peaks.json").write_text(json.dumps({"other.c": {"peak_bytes": 180 * MIB, "seconds": 1}}))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=400 * MIB, cpus=4)
    wrapper = (str(tools / "bigphase"), str(script))
    finish(compile_(config, src, "twophase.c", tmp_path, *wrapper))
    learned = json.loads((tmp_path / "peaks.json").read_text())["twophase.c"]
    assert [name for name, size in learned["phases"]][:2] == ["bigphase", "smallphase"], learned
    first = compile_(config, src, "twophase.c", tmp_path, *wrapper)
    wait_running(state, first.pid)
    second = compile_(config, src, "other.c", tmp_path)
    finish(first, second)
    rows = [(row["event"], row["source"]) for row in events(state)][2:]
    assert rows == [("start", "twophase.c"), ("start", "other.c"), ("end", "other.c"), ("end", "twophase.c")], rows


TWO_HOGS = r'''
import os, signal, sys, time
def hold(mib):
    block = bytearray(mib * 1024 * 1024)
    for index in range(0, len(block), 4096):
        block[index] = 1
    return block
child = os.fork()
if child == 0:
    block = hold(150)
    with open(sys.argv[1] + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(60)
    os._exit(0)
block = hold(150)
status = os.waitpid(child, 0)[1]
sys.exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0)
'''


def test_an_oom_killed_compile_is_learned_at_what_its_tree_held_and_refused_when_that_cannot_fit(tmp_path):
    """Issue 29 item 7: a rerun started first the compile the ledger recorded as killed and it was killed again. A
    compile is two processes (nvcc + cicc here: 150 MiB each); the OOM killer takes one. What it is learned at is what
    the whole tree held (about 300 MiB, sampled), not the killed process's own peak (150: ru_maxrss), and --check then
    names it for a budget that 300 x the margin is over, before any build. Without the fix it is learned at about
    150 MiB, and --check says nothing."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, gemm=(0, 0))
    script, ready = tmp_path / "twohogs.py", tmp_path / "child.pid"
    script.write_text(TWO_HOGS)
    peaks = tmp_path / "peaks.json"
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(peaks), root=str(src),
                          budget_bytes=2048 * MIB, cpus=2, margin=1.15, tree="t")
    proc = compile_(config, src, "gemm.c", tmp_path, sys.executable, str(script), str(ready))
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)   # a few samples of the tree (sample_seconds 0.2) while both hold their 150 MiB
    os.kill(int(ready.read_text()), signal.SIGKILL)   # what the OOM killer does to the largest process
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 137, out
    entry = json.loads(peaks.read_text())["t:gemm.c"]
    assert entry["killed"] and entry["peak_bytes"] >= 280 * MIB, entry
    checked = subprocess.run([sys.executable, ADMISSION, "--config=" + config, "--check"], stdout=subprocess.PIPE,
                             universal_newlines=True, check=True)
    report = json.loads(checked.stdout)
    assert report["too_big"] == [], report          # 2 GiB: it fits alone, claiming what is left
    small = write_config(tmp_path / "small.json", state_dir=str(state), peaks_path=str(peaks), root=str(src),
                         budget_bytes=320 * MIB, cpus=2, margin=1.15, tree="t")
    report = json.loads(subprocess.run([sys.executable, ADMISSION, "--config=" + small, "--check"],
                                       stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout)
    assert [row["source"] for row in report["too_big"]] == ["t:gemm.c"] and report["too_big"][0]["oom_killed"], report
    assert "t:gemm.c (more than 0.3 GiB: OOM-killed holding that)" in report["message"], report


def test_what_a_node_learned_is_published_as_a_census_that_refuses_a_smaller_node_before_any_compile(tmp_path):
    """Issue 35 item 7, a census fleets publish: two real compiles (holding about 120 and 40 MiB) learned on one node;
    ``--census`` prints them as a census of the tree; a second node that learned nothing, given that file, names the
    heavy source and the smallest memory limit that builds it before any compile (``--check``)."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, heavy=(120, 0.5), light=(40, 0.3))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=1024 * MIB, cpus=2, tree="t@1/120")
    publish = [sys.executable, ADMISSION, "--config=" + config, "--census"]
    early = subprocess.run(publish, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert early.returncode == 1 and "nothing learned yet of t@1/120" in early.stderr and not early.stdout, early
    for wrong in ([publish[0], ADMISSION, "--census"], publish + ["cc", "-c", "x.c"]):   # no config; a compile as well
        refused = subprocess.run(wrong, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        assert refused.returncode == 2 and "usage: gpufleet_admit.py --config=FILE [--check | --census" in refused.stderr, refused
    finish(compile_(config, src, "heavy.c", tmp_path), compile_(config, src, "light.c", tmp_path))
    published = subprocess.run(publish, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    document = json.loads(published)
    assert document["format"] == "gpufleet-admission-census/1" and document["tree"] == "t@1/120", document
    assert sorted(document["sources"]) == ["heavy.c", "light.c"], document
    heavy, light = document["sources"]["heavy.c"], document["sources"]["light.c"]
    assert heavy["peak_bytes"] >= 120 * MIB > 100 * MIB > light["peak_bytes"] >= 40 * MIB and heavy["seconds"] >= 0.5, document
    (tmp_path / "census.json").write_text(published)
    other = write_config(tmp_path / "other.json", state_dir=str(tmp_path / "state2"), peaks_path=str(tmp_path / "other.peaks"),
                         root=str(src), budget_bytes=100 * MIB, cpus=2, tree="t@1/120", census=[str(tmp_path / "census.json")])
    report = json.loads(subprocess.run([sys.executable, ADMISSION, "--config=" + other, "--check"], stdout=subprocess.PIPE,
                                       universal_newlines=True, check=True).stdout)
    assert [row["source"] for row in report["too_big"]] == ["census:heavy.c"], report
    assert "heavy.c (0.1 GiB in the shipped census)" in report["message"], report
    assert report["smallest_limit_bytes"] >= heavy["peak_bytes"], report
    assert not (tmp_path / "state2" / "ledger.log").exists()    # refused before any compile: nothing ran there
