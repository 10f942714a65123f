# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory admitted per compile (plugins/module_utils/_build/_admission.py, issue 17 item 2) with real processes and a real
memory cgroup: the stand-in tests/projects/standin_mixed_memory (two heavy sources first, ten light ones), built by
guarded_build under a cap the two heavy ones together exceed.

- at a fixed -j the two heavy compiles overlap and the cgroup OOM-kills one (guarded_build backs off);
- with the admission launcher before the compiler and the peaks it learned from a build it has seen, the same -j
  finishes with no OOM kill: the heavy compiles never overlap while the light ones run beside them;
- the launcher reads the cgroup's own limit as its budget and a ledger entry of a dead launcher is reclaimed.
Measured (makespan, OOM kills): bench/admission.py, docs/benchmarks.md."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import time

from conftest import PROJECTS, REPO, own_memory_cgroup, run_module
from proctools import rmdir_retrying

ADMISSION = os.path.join(REPO, "plugins", "module_utils", "_build", "_admission.py")
MIXED = os.path.join(PROJECTS, "standin_mixed_memory")
HOGCC = os.path.join(MIXED, "hogcc.py")
MIB = 1024 ** 2


def configure_mix(build, config=None, project=MIXED, admission=ADMISSION):
    """cmake -G Ninja of the stand-in with hogcc.py as the compiler wrapper, after the admission launcher if a config
    is given."""
    launcher = [sys.executable, HOGCC]
    if config:
        launcher = [sys.executable, admission, "--config=" + config] + launcher
    proc = subprocess.run(["cmake", "-S", project, "-B", build, "-G", "Ninja", "-DCMAKE_C_COMPILER_LAUNCHER=" + ";".join(launcher)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]


def admission_config(directory, peaks_path, default_mib=100, reserve_mib=16, root=MIXED, **more):
    config = os.path.join(directory, "admission.json")
    settings = {"state_dir": os.path.join(directory, "admission"), "peaks_path": peaks_path, "root": root,
                "reserve_bytes": reserve_mib * MIB, "default_bytes": default_mib * MIB, "poll_seconds": 0.2,
                "sample_seconds": 0.2}
    settings.update(more)
    with open(config, "w") as handle:
        json.dump(settings, handle)
    return config


def build_mix(build, name, jobs, limit_mib, max_attempts=4):
    """guarded_build of the configured stand-in in a memory cgroup of limit_mib, at jobs."""
    return run_module({"argv": ["cmake", "--build", build], "chdir": build, "build_dir": os.path.join(build, "guarded"),
                       "name": name, "jobs": jobs, "memory_limit": "%dMiB" % limit_mib, "memory_per_thread": "32MiB",
                       "reserve": "0", "max_attempts": max_attempts, "force": True})


def oom_kills(result):
    return sum(attempt.get("oom_kills") or 0 for attempt in result.get("attempts") or [])


def learned_peaks(tmp_path):
    """peaks.json as the launcher learns it: one build of the stand-in at -j1 under admission."""
    peaks = str(tmp_path / "peaks.json")
    build = str(tmp_path / "learn")
    configure_mix(build, admission_config(str(tmp_path), peaks))
    result = build_mix(build, "admit-learn", 1, 900)
    assert not result["failed"], result["_output"][-3000:]
    with open(peaks) as handle:
        return peaks, json.load(handle)


def test_learns_each_source_peak_from_its_compiler(tmp_path):
    dummy, peaks = learned_peaks(tmp_path)
    assert sorted(peaks) == sorted("src/" + name for name in os.listdir(os.path.join(MIXED, "src")))
    heavy = peaks["src/a_heavy_1.c"]["peak_bytes"]
    light = peaks["src/b_light_01.c"]["peak_bytes"]
    # hogcc holds 300 / 40 MiB (+ the interpreter); the compiler's own peak is small beside them
    assert 300 * MIB <= heavy < 400 * MIB, heavy
    assert 40 * MIB <= light < 120 * MIB, light
    assert peaks["src/a_heavy_1.c"]["seconds"] >= 3


def test_fixed_jobs_oom_while_admission_fits(tmp_path):
    peaks, dummy = learned_peaks(tmp_path)
    # 500 MiB: one heavy (300) + light ones fit, two heavy ones (600) do not
    fixed = str(tmp_path / "fixed")
    configure_mix(fixed)
    result = build_mix(fixed, "admit-fixed", 4, 500)
    assert oom_kills(result) >= 1, result["_output"][-3000:]
    assert result["attempts"][0]["oom"], result["attempts"]

    admitted = str(tmp_path / "admitted")
    config = admission_config(str(tmp_path), peaks)
    configure_mix(admitted, config)
    result = build_mix(admitted, "admit-mixed", 4, 500, max_attempts=1)
    assert not result["failed"], result["_output"][-3000:]
    assert oom_kills(result) == 0 and len(result["attempts"]) == 1, result["attempts"]
    # the ledger is empty afterwards: every launcher left it
    with open(os.path.join(str(tmp_path), "admission", "ledger.json")) as handle:
        assert json.load(handle) == {}


def test_launcher_reads_its_cgroup_limit_and_reclaims_dead_entries(tmp_path):
    base = own_memory_cgroup()
    group = os.path.join(base, "gpufleet-test-admit-%d" % os.getpid())
    os.mkdir(group)
    try:
        with open(os.path.join(group, "memory.limit_in_bytes"), "w") as handle:
            handle.write(str(256 * MIB))
        state = tmp_path / "state"
        state.mkdir()
        # a launcher that died without leaving (SIGKILL) holds 200 MiB in the ledger
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(str(state / "ledger.json"), "w") as handle:
            json.dump({str(dead.pid): {"state": "running", "bytes": 200 * MIB, "source": "x.c", "since": time.time()}}, handle)
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"state_dir": str(state), "peaks_path": str(tmp_path / "peaks.json"),
                                      "reserve_bytes": 0, "default_bytes": 100 * MIB}))
        source = tmp_path / "one.c"
        source.write_text("int one(void) { return 1; }\n")
        probe = ("import sys; sys.path.insert(0, %r); import _admission as a; "
                 "print(a.settings_rule.budget({'reserve_bytes': 0}, a.node.cgroup_limit(), a.node.mem_available()))" % os.path.dirname(ADMISSION))

        def in_group():
            with open(os.path.join(group, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        out = subprocess.check_output([sys.executable, "-c", probe], preexec_fn=in_group, universal_newlines=True)
        assert int(out) == 256 * MIB
        started = time.time()
        proc = subprocess.run([sys.executable, ADMISSION, "--config=" + str(config), "--", "cc", "-c", str(source), "-o",
                               str(tmp_path / "one.o")], preexec_fn=in_group, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout
        assert time.time() - started < 30 and "waits" not in proc.stdout, proc.stdout
        assert os.path.exists(str(tmp_path / "one.o"))
        with open(str(state / "ledger.json")) as handle:
            assert json.load(handle) == {}
    finally:
        rmdir_retrying(group)
    assert not os.path.exists(group)


def test_compiler_exit_status_passes_through(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"state_dir": str(tmp_path / "s"), "peaks_path": str(tmp_path / "p.json"), "budget_bytes": "1GiB"}))
    source = tmp_path / "bad.c"
    source.write_text("int broken( {\n")
    proc = subprocess.run([sys.executable, ADMISSION, "--config=" + str(config), "cc", "-c", str(source), "-o", str(tmp_path / "bad.o")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 1 and "error" in proc.stdout
    # a command without a source (a version query) runs as it is, outside the ledger
    out = subprocess.check_output([sys.executable, ADMISSION, "--config=" + str(config), "cc", "--version"], universal_newlines=True)
    assert out.startswith("cc") or "gcc" in out or "clang" in out
    with open(str(tmp_path / "s" / "ledger.json")) as handle:
        assert json.load(handle) == {}
    assert shutil.which("cc")


def test_a_compile_that_grows_past_its_reservation_holds_what_it_uses(tmp_path):
    """A source never seen (default 100 MiB here) holds 300: its reservation grows to what it holds x the margin, so
    the next compile - learned at 200 MiB, which would fit beside the 100 of the default in a 500 MiB budget - waits
    until it ends (the real tree's w4a8_grouped_mm_c3x.cu reserved the 5 GiB default and held 13.4 GiB while light
    compiles were admitted)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "unseen.c").write_text("/* gpufleet-hog: 300 4 */\nint unseen(void) { return 1; }\n")
    (src / "known.c").write_text("/* gpufleet-hog: 20 0 */\nint known(void) { return 2; }\n")
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"known.c": {"peak_bytes": 200 * MIB, "seconds": 1.0, "killed": False}}))
    config = tmp_path / "config.json"
    state = tmp_path / "state"
    config.write_text(json.dumps({"state_dir": str(state), "peaks_path": str(peaks), "root": str(src),
                                  "budget_bytes": 500 * MIB, "reserve_bytes": 0, "default_bytes": 100 * MIB,
                                  "poll_seconds": 0.2, "sample_seconds": 0.2}))

    def compile_(name):
        return subprocess.Popen([sys.executable, ADMISSION, "--config=" + str(config), "--", sys.executable, HOGCC, "cc",
                                 "-c", str(src / name), "-o", str(tmp_path / (name + ".o"))],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)

    unseen = compile_("unseen.c")
    deadline, held = time.time() + 30, 0
    while time.time() < deadline and held < 300 * MIB:
        time.sleep(0.1)
        try:
            entry = json.loads((state / "ledger.json").read_text()).get(str(unseen.pid)) or {}
        except (OSError, ValueError):
            entry = {}
        held = entry.get("bytes", 0)
    assert held >= 300 * MIB and entry.get("state") == "running", entry   # what it holds x the margin, not its 100 MiB claim
    known = compile_("known.c")
    known_out, unseen_out = known.communicate(timeout=60)[0], unseen.communicate(timeout=60)[0]
    assert unseen.returncode == 0 and known.returncode == 0, (unseen_out, known_out)
    assert "known.c waits for 0.2 GiB of the 0.5 GiB budget" in known_out, known_out
    # it compiled after the unseen one (which holds its 300 MiB for 4 s), not beside it
    assert os.path.getmtime(str(tmp_path / "known.c.o")) >= os.path.getmtime(str(tmp_path / "unseen.c.o"))
    assert json.loads((state / "ledger.json").read_text()) == {}
    learned = json.loads(peaks.read_text())
    assert learned["unseen.c"]["peak_bytes"] >= 300 * MIB, learned


def test_cold_and_seeded_builds_have_no_oom_kill(tmp_path):
    """Issue 29 item 2: a node that never saw the tree (cold) does not OOM - an unknown source claims what is left
    of the budget until it ends - and one seeded with another node's peaks (node A's peaks.json, read only) builds
    warm at once: 0 OOM kills both, under the 500 MiB cap at -j4 that OOM-kills a fixed -j4."""
    seed, dummy = learned_peaks(tmp_path)      # "node A"
    for name, seeds in (("cold", None), ("seeded", [seed])):
        folder = tmp_path / name
        folder.mkdir()
        # a lull of 2 s before the first decision: on a loaded 2-core machine the launchers join seconds apart
        config = admission_config(str(folder), str(folder / "peaks.json"), seed_peaks=seeds, settle_seconds=2)
        build = str(folder / "build")
        configure_mix(build, config)
        result = build_mix(build, "admit-" + name, 4, 500, max_attempts=1)
        assert not result["failed"] and oom_kills(result) == 0, (name, result["_output"][-3000:])
        with open(os.path.join(str(folder), "admission", "ledger.log")) as handle:
            starts = [json.loads(line) for line in handle if '"start"' in line]
        learned = [row["learned"] for row in starts]
        assert len(set(row["source"] for row in starts)) == 12, starts
        assert set(learned) == ({False} if seeds is None else {True}), starts
        if seeds is None:   # cold runs wide: two compiles at once, stopped (frozen or evicted) before the limit
            assert max(row["running"] for row in starts) == 2, starts
        if seeds:   # a heavy, long one first (two do not fit together), light ones beside it
            assert starts[0]["source"].startswith("src/a_heavy_") and not starts[1]["source"].startswith("src/a_heavy_")


def seed_file(tmp_path, heavy_mib):
    """A peaks file for the mixed stand-in: its heavy sources at ``heavy_mib``, the light ones at 60 MiB."""
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(dict(("src/" + name, {"peak_bytes": (heavy_mib if "heavy" in name else 60) * MIB,
                                                     "killed": False, "seconds": 3.0 if "heavy" in name else 1.5})
                                    for name in os.listdir(os.path.join(MIXED, "src")))))
    return seed


def configure_and_build(tmp_path):
    """argv configuring and building the mixed stand-in with Ninja in tmp_path/b, its compiler the memory hog."""
    wrapper = tmp_path / "cc-hog"
    wrapper.write_text("#!/bin/sh\nexec %s %s cc \"$@\"\n" % (sys.executable, HOGCC))
    wrapper.chmod(0o755)
    build = tmp_path / "b"
    return ["sh", "-c", "cmake -S %s -B %s -G Ninja -DCMAKE_C_COMPILER=%s && cmake --build %s" % (MIXED, build, wrapper, build)]


def test_any_cmake_project_builds_under_admission_through_guarded_build_alone(tmp_path):
    """Issue 29 item 4: guarded_build's admission option, no role: the mixed stand-in (a plain CMake C project)
    configured and built inside the module at -j8 under a 500 MiB cgroup; the launcher comes in through the
    environment's CMAKE_C_COMPILER_LAUNCHER, seeded peaks schedule it: 0 OOM kills, every compile through the
    ledger."""
    seed = seed_file(tmp_path, heavy_mib=320)
    guarded = str(tmp_path / "guarded")
    result = run_module({"argv": configure_and_build(tmp_path),
                         "chdir": MIXED, "build_dir": guarded, "name": "admit-any-cmake", "jobs": 8,
                         "memory_limit": "500MiB", "memory_per_thread": "32MiB", "reserve": "0", "max_attempts": 1,
                         "force": True, "admission": {"reserve_bytes": "16MiB", "default_bytes": "100MiB",
                                                      "seed_peaks": [str(seed)], "peaks_path": str(tmp_path / "peaks.json"),
                                                      "poll_seconds": 0.2, "settle_seconds": 2}})
    assert not result["failed"] and oom_kills(result) == 0, result["_output"][-3000:]
    with open(os.path.join(guarded, "gpufleet-admission", "ledger.log")) as handle:
        rows = [json.loads(line) for line in handle]
    # CMake's own compiler checks go through the launcher too (unknown: they ran alone); the 12 sources, seeded
    starts = [row for row in rows if row["event"] == "start" and row["source"].startswith("src/")]
    assert len(starts) == 12 and all(row["learned"] for row in starts), rows
    assert starts[0]["source"].startswith("src/a_heavy_"), starts
    assert json.loads(open(str(tmp_path / "peaks.json")).read()).get("src/b_light_01.c")


def test_an_oom_the_scheduler_learns_from_keeps_the_jobs_and_the_source_is_not_killed_again(tmp_path):
    """Issue 29 item 7 (the field rerun): seeded peaks that are wrong for this node (the heavy sources said 60 MiB,
    they hold 300) let both heavy ones start together under a 500 MiB cgroup at -j4: one is OOM-killed. The kill
    is learned over the seed (what it held, not the seed's 60), so attempt 2 runs at the same -j4 - not halved - and
    the killed source is started only where it fits: the build finishes with that one OOM kill and no second.
    Without the fix: the seed's 60 MiB wins the merge, jobs 4 -> 2, and the source may be killed again. The freeze is
    off: it may stop the wrong seed's growth before the kernel does (tests/build/test_admission_freeze.py), and this
    is the path after a kill."""
    seed = seed_file(tmp_path, heavy_mib=60)
    own = tmp_path / "peaks.json"
    guarded = str(tmp_path / "guarded")
    result = run_module({"argv": configure_and_build(tmp_path),
                         "chdir": MIXED, "build_dir": guarded, "name": "admit-learns-oom", "jobs": 4,
                         "memory_limit": "500MiB", "memory_per_thread": "32MiB", "reserve": "0", "max_attempts": 3,
                         "force": True, "admission": {"reserve_bytes": "16MiB", "default_bytes": "100MiB", "cpus": 4,
                                                      "seed_peaks": [str(seed)], "peaks_path": str(own),
                                                      "poll_seconds": 0.2, "freeze": False}})
    assert not result["failed"], result["_output"][-3000:]
    attempts = result["attempts"]
    assert oom_kills(result) == 1 and [attempt["jobs"] for attempt in attempts] == [4, 4], attempts
    killed = attempts[0]["admission_learned"]
    assert len(killed) == 1 and killed[0].startswith("src/a_heavy_"), attempts
    assert attempts[1]["admission_learned"] == []
    # the status counts the whole build across the attempts, not attempt 2's own [N/M] of what was left
    with open(result["status"]) as handle:
        progress = json.load(handle)["progress"]
    assert progress["done"] == progress["total"] == attempts[0]["progress"]["total"] > attempts[1]["progress"]["total"], (
        progress, attempts)
    peaks = json.loads(own.read_text())
    # it finished in attempt 2 (learned now), after it had been killed holding far more than the seed's 60 MiB
    assert peaks[killed[0]]["runs"] == 2 and not peaks[killed[0]]["killed"] and peaks[killed[0]]["peak_bytes"] >= 250 * MIB
