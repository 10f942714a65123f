# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health_check role on the fleet: slurmd itself running the installed program as HealthCheckProgram (drain on
turning not ready, resume on recovery), the node-problem-detector contract, cron, and custom checks without jmespath."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from conftest import PLAYBOOK, POLICY, STATE_DIR, wait_for_checks_in_flight
from fleetlib import REPO_ROOT, SBIN, TIMINGS, install_gpus, run_playbook


def test_slurmd_drains_and_resumes_through_the_health_check(installed, slurm_idle):
    cluster = slurm_idle
    slurm = cluster.slurm
    slurm.scontrol("update", "NodeName=node1", "State=DRAIN", "Reason=admin: bad fan")
    admin = slurm.node_info("node1")
    pid = cluster.fleet["node3"].spawn_orphan("ninja")
    started = time.monotonic()
    slurm.wait_states({"node3": "drained"}, 30)
    TIMINGS["health_check_drain_seconds"] = time.monotonic() - started
    info = slurm.node_info("node3")
    assert info["reason"].startswith("gpufleet: build_processes: 1 build process still running"), info
    cluster.fleet["node3"].run("kill -9 %d" % pid, check=True)
    slurm.wait_states({"node3": "idle"}, 30)
    time.sleep(3)  # a few more health checks: the admin's drain stays
    assert slurm.node_info("node1") == admin
    assert slurm.node_info("node2")["state"] == "idle"


def test_npd_contract_and_custom_checks_without_jmespath(installed, cluster):
    node = cluster.fleet["node2"]
    program = installed["health_check_program"]
    ready = node.run("%s --mode npd -v" % program)
    assert ready.rc == 0, ready
    lines = ready.stdout.splitlines()
    assert lines[0].startswith("ready:") and len(lines[0]) <= 80
    assert len(lines) == 1, ready  # the one line NPD keeps as the condition's message: no "took 0.05 s" line
    assert "few_processes: not applied: the jmespath Python library is not installed" in ready.stderr
    pid = node.spawn_orphan("ninja")
    try:
        bad = node.run("%s --mode npd" % program)
    finally:
        node.run("kill -9 %d" % pid)
    assert bad.rc == 1, bad
    first = bad.stdout.splitlines()[0]
    assert first == "not ready: build_processes: 1 build process still running" and len(first) <= 80
    assert bad.stdout == first + "\n" and "took " in bad.stderr
    # the same message as the playbook's readiness check (one implementation)
    assert "failed build_processes: 1 build process still running: ninja (pid %d, orphaned" % pid in bad.stderr
    # a hung nvidia-smi: unknown (2)
    gpu_config = os.path.join(installed["base"], "gpu.json")
    with open(gpu_config, "w") as handle:
        handle.write('{"policy": {"profiles": ["gpu"], "min_available_memory": "64MiB", "gpu_timeout": 1, '
                     '"max_memory_pressure": 100}, "slurm": {"state_dir": "%s"}}' % os.path.join(installed["base"], "state"))
    install_gpus(node, hang=True)
    hung = node.run("%s --mode npd --config %s" % (program, gpu_config))
    node.dirty = False
    assert hung.rc == 2, hung
    # what NPD shows agrees with the exit code: unknown, never "not ready" (issue 39)
    assert hung.stdout.splitlines()[0].startswith("unknown: ") and len(hung.stdout.splitlines()[0]) <= 80, hung


def test_cron_file(installed):
    with open(installed["health_check_cron_file"]) as handle:
        text = handle.read()
    assert "*/5 * * * * root %s --mode check" % installed["health_check_program"] in text
    with open(installed["health_check_program"]) as handle:
        assert "# #" not in handle.read()  # the managed header renders once


def test_reason_stable_over_three_failing_runs(installed, slurm_idle):
    """Issue 27.2, slurmd itself running the check every 2 s: the first failure's reason and sinfo's drain time are
    kept while the same check fails, although its numbers change (1 build process, then 2)."""
    cluster = slurm_idle
    slurm = cluster.slurm
    node = cluster.fleet["node3"]
    pids = [node.spawn_orphan("ninja")]
    lock = os.path.join(STATE_DIR(cluster), "health-check-node3.lock")
    try:
        slurm.wait_states({"node3": "drained"}, 30)
        first = slurm.node_info("node3")
        assert first["reason"] == "gpufleet: build_processes: 1 build process still running", first
        pids.append(node.spawn_orphan("ninja"))
        runs = set()
        for _attempt in range(3):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # one more run of slurmd's: the lock file names each run's pid
                with open(lock) as handle:
                    text = handle.read()
                if text and text not in runs:
                    break
                time.sleep(0.2)
            runs.add(text)
            time.sleep(0.5)
            assert slurm.node_info("node3") == first  # reason and drain time unchanged
        assert len(runs) == 3
        direct = node.run("%s --mode check -v" % installed["health_check_program"])
        assert "failed build_processes: 2 build processes still running" in direct.stdout, direct
    finally:
        for pid in pids:
            node.run("kill -9 %d" % pid)
    slurm.wait_states({"node3": "idle"}, 30)


@pytest.fixture
def slurmd_runs_nothing(installed, slurm_idle):
    """slurmd's wrapper runs nothing while a test runs the program by hand (it runs the target only when executable)."""
    target = installed["health_check_program"]
    os.chmod(target, 0o644)
    wait_for_checks_in_flight(STATE_DIR(slurm_idle))  # one slurmd started before the chmod would hold the lock
    try:
        yield slurm_idle
    finally:
        os.chmod(target, 0o755)


def write_config(installed, cluster, name, **given):
    config = dict(policy=POLICY, slurm=dict(state_dir=STATE_DIR(cluster), slurm_conf=cluster.slurm.conf))
    config.update(given)
    path = os.path.join(installed["base"], name)
    with open(path, "w") as handle:
        json.dump(config, handle)
    return path


def test_drain_only_never_resumes(installed, slurmd_runs_nothing):
    cluster = slurmd_runs_nothing
    node = cluster.fleet["node2"]
    config = write_config(installed, cluster, "drain-only.json", slurm=dict(
        state_dir=STATE_DIR(cluster), slurm_conf=cluster.slurm.conf, resume=False))
    program = "sh %s --mode slurm --config %s" % (installed["health_check_program"], config)
    pid = node.spawn_orphan("ninja")
    try:
        drained = node.run(program)
    finally:
        node.run("kill -9 %d" % pid)
    assert drained.rc == 1 and "draining: gpufleet: build_processes" in drained.stdout, drained
    for _attempt in range(2):
        kept = node.run(program)
        assert kept.rc == 0 and "drain-only mode" in kept.stdout, kept
        assert cluster.slurm.node_info("node2")["state"] == "drained"
    normal = node.run("sh %s --mode slurm --config %s" % (installed["health_check_program"],
                                                          write_config(installed, cluster, "normal.json")))
    assert "resuming our drain" in normal.stdout, normal  # still ours: a normal run resumes it
    cluster.slurm.wait_states({"node2": "idle"}, 20)


def stub_pids(node, pidfile, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = node.run("cat %s 2>/dev/null" % pidfile).stdout.split()
        if len(text) == 2:
            return [int(pid) for pid in text]
        time.sleep(0.1)
    raise AssertionError("the hung nvidia-smi stub never started")


def alive(node, pids):
    return [pid for pid in pids if node.run("test -d /proc/%d && ! grep -q '^State:.*Z' /proc/%d/status" % (pid, pid)).rc == 0]


@pytest.mark.parametrize("kill", ["-KILL -- -%d", "-TERM %d"], ids=["slurmd-kills-the-group", "sigterm-to-the-check"])
def test_one_run_at_a_time_and_no_orphan_after_a_killed_run(installed, slurmd_runs_nothing, kill):
    """A hung nvidia-smi: a second run is refused while the first lives; the first killed as slurmd kills it (SIGKILL
    to its process group) or by SIGTERM leaves no nvidia-smi (nor the stub's own child) behind."""
    cluster = slurmd_runs_nothing
    node = cluster.fleet["node2"]
    install_gpus(node, hang=True)
    pidfile = "/tmp/gpufleet-stub-%s.pids" % kill.split()[0].strip("-")
    node.run("rm -f %s" % pidfile)
    config = write_config(installed, cluster, "gpu-hung.json", policy=dict(POLICY, profiles=["gpu"], gpu_timeout=30))
    program = "sh %s --mode check --config %s" % (installed["health_check_program"], config)
    # setpgrp as slurmd does: the run leads its own process group
    first = int(node.run("GPUFLEET_STUB_PIDFILE=%s setsid %s >/tmp/gpufleet-first.out 2>&1 </dev/null & echo $!"
                         % (pidfile, program), check=True).stdout.strip())
    try:
        smi = stub_pids(node, pidfile)
        second = node.run(program)
        assert second.rc == 2, second
        assert second.stdout.startswith("unknown: a previous run is still running (pid %d" % first), second
        node.run("kill %s" % (kill % first), check=True)
        deadline = time.monotonic() + 5
        while alive(node, smi + [first]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(node, smi + [first]), node.run("ps -ef").stdout
        if "TERM" in kill:
            said = node.run("cat /tmp/gpufleet-first.out").stdout
            assert "unknown: stopped by signal 15; its children were killed" in said, said
    finally:
        node.run("kill -9 -- -%d 2>/dev/null; rm -f %s" % (first, pidfile))
        node.dirty = False


def timed_check(installed, node, config, timing):
    """Run the installed program once on ``node`` with ``config``; ``(its result, the seconds it took)``, kept in
    TIMINGS under ``timing``."""
    started = time.monotonic()
    ran = node.run("sh %s --mode check --config %s" % (installed["health_check_program"], config), timeout=40)
    took = time.monotonic() - started
    node.dirty = False
    TIMINGS[timing] = took
    return ran, took


def test_one_deadline_for_the_run(installed, slurmd_runs_nothing):
    """Issue 28.6: gpu_timeout 30 against a 12 s deadline (a config the role would refuse): the run still ends
    within its deadline, saying nvidia-smi did not answer."""
    cluster = slurmd_runs_nothing
    node = cluster.fleet["node2"]
    install_gpus(node, hang=True)
    config = write_config(installed, cluster, "gpu-deadline.json", deadline_seconds=12,
                          policy=dict(POLICY, profiles=["gpu"], gpu_timeout=30))
    ran, took = timed_check(installed, node, config, "health_check_deadline_12s_took_seconds")
    assert ran.rc == 2 and took < 12, (took, ran)
    assert "nvidia-smi" in ran.stdout, ran


def test_a_policy_that_cannot_fit_is_refused_at_install(cluster, tmp_path):
    result = run_playbook(PLAYBOOK, cluster.fleet.inventory_path, args=["--limit", "node1"], extra_vars=dict(
        health_check_policy=dict(POLICY, profiles=["gpu"], gpu_timeout=61), health_check_schedule="slurm",
        health_check_install_dir=str(tmp_path / "lib"), health_check_config=str(tmp_path / "etc" / "c.json"),
        health_check_program=str(tmp_path / "bin" / "hc")))
    assert result.rc != 0
    assert "gpu_timeout: 61.0 s cannot fit the health check's 50.0 s deadline (schedule slurm)" in result.stdout, \
        result.stdout[-3000:]
    assert not os.path.exists(str(tmp_path / "lib"))


def test_a_metrics_dir_the_node_lacks_is_refused_at_install(cluster, tmp_path):
    """Issue 39: a health_check_metrics_dir that is not there was installed, and every run failed to write there
    with a line only -v showed; now the install stops, naming the node and what to set, and installs nothing."""
    missing = str(tmp_path / "textfile_collector")
    result = run_playbook(PLAYBOOK, cluster.fleet.inventory_path, args=["--limit", "node1"], extra_vars=dict(
        health_check_policy=POLICY, health_check_schedule="cron", health_check_metrics_dir=missing,
        health_check_install_dir=str(tmp_path / "lib"), health_check_config=str(tmp_path / "etc" / "c.json"),
        health_check_program=str(tmp_path / "bin" / "hc"), health_check_cron_file=str(tmp_path / "hc.cron")))
    assert result.rc != 0
    assert "health_check_metrics_dir %s is not a directory on node1 (it is not there)" % missing in result.stdout, \
        result.stdout[-3000:]
    assert "--collector.textfile.directory" in result.stdout
    assert not os.path.exists(str(tmp_path / "lib")) and not os.path.exists(str(tmp_path / "hc.cron"))


def install_gpus_alone(node, **given):
    """install_gpus, without the fault files an earlier test left (the nodes here are kept between tests)."""
    install_gpus(node, **given)  # the stub's folder is this node's own from here on
    left = sorted({"hang", "sleep-q", "sleep-nvlink", "sleep-dcgm"} - set(given.get("files") or {}))
    node.run("rm -f " + " ".join("%s/nvidia-smi.d/%s" % (SBIN, name) for name in left), check=True)


def test_a_hung_gpu_probe_is_named_within_the_deadline_and_drains_nothing(installed, slurmd_runs_nothing):
    """Issue 30: the program as installed, on an HGX H100 pair whose `nvidia-smi -q` hangs (the stand-in sleeps
    120 s) under a 2 s probe timeout and a 12 s deadline: the run ends in time, ready (exit 0, so slurmd drains
    nothing), and names the probe that did not answer."""
    cluster = slurmd_runs_nothing
    node = cluster.fleet["node2"]
    install_gpus_alone(node, scenario="h100_x2_nvswitch", files={"sleep-q": "120"})
    config = write_config(installed, cluster, "gpu-hung-probe.json", deadline_seconds=12, policy=dict(
        POLICY, profiles=["gpu"], expected_gpus=2, compute_capability="9.0", check_fabric=True,
        check_gpu_recovery=True, gpu_probe_timeout=2))
    ran, took = timed_check(installed, node, config, "health_check_hung_probe_took_seconds")
    assert ran.rc == 0 and took < 12, (took, ran)
    assert ran.stdout.startswith("ready"), ran
    assert "nvidia-smi -q did not answer within 2.0s" in ran.stdout, ran


def test_a_gpu_fault_drains_with_the_gpu_and_the_fault_in_the_reason(installed, slurmd_runs_nothing):
    """Issue 30 through slurmctld: node2's GPU 1 has its fabric In Progress (the captured H100 pair, changed): the
    drain reason names the check, the GPU by bus id and the fault, within Slurm's reason; a healthy run resumes it."""
    cluster = slurmd_runs_nothing
    node = cluster.fleet["node2"]
    fixtures = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "h100_x2_nvswitch")
    with open(os.path.join(fixtures, "q.txt")) as handle:
        q = handle.read()
    second = q.index("GPU 00000000:2A:00.0")
    stuck = q[:second] + q[second:].replace("State                             : Completed",
                                            "State                             : In Progress", 1)
    policy = dict(POLICY, profiles=["gpu"], expected_gpus=2, compute_capability="9.0", check_fabric=True)
    config = write_config(installed, cluster, "gpu-fabric.json", policy=policy)
    program = "sh %s --mode slurm --config %s" % (installed["health_check_program"], config)
    install_gpus_alone(node, scenario="h100_x2_nvswitch", files={"q.txt": stuck})
    drained = node.run(program)
    assert drained.rc == 1, drained
    reason = "gpufleet: fabric: GPU 1 (00000000:2A:00.0) has fabric state In Progress"
    assert cluster.slurm.node_info("node2")["reason"] == reason, (cluster.slurm.node_info("node2"), drained)
    install_gpus_alone(node, scenario="h100_x2_nvswitch")
    resumed = node.run(program)
    node.dirty = False
    assert resumed.rc == 0 and "resuming our drain" in resumed.stdout, resumed
    cluster.slurm.wait_states({"node2": "idle"}, 20)


def ours_drained(cluster):
    """The nodes drained with our reason prefix now, from one sinfo listing."""
    out = cluster.slurm.command(["sinfo", "-h", "-N", "-o", "%N|%T|%E"]).stdout
    return sorted(set(line.split("|")[0] for line in out.splitlines()
                      if line.count("|") >= 2 and "drain" in line.split("|")[1] and line.split("|", 2)[2].startswith("gpufleet: ")))


def over_cap_stretches(samples, cap):
    """[(start, seconds)] of each stretch of polls that saw more than ``cap`` of our drains; samples: [(t, count)]."""
    stretches, start = [], None
    for when, count in samples:
        if count > cap and start is None:
            start = when
        elif count <= cap and start is not None:
            stretches.append((start, when - start))
            start = None
    if start is not None:
        stretches.append((start, float("inf")))
    return stretches


def test_drain_circuit_breaker_holds_across_every_node_and_the_playbook(installed, slurm_idle, tmp_path):
    """Issue 38.1 on the real slurmctld with 8 slurmd: a policy that fails on every node (1024 TiB available memory
    wanted), cap 3. slurmd runs the check on all 8 nodes every 2 s at once, then the playbook runs over all 8 with
    the same cap: 3 stay drained by us, the 5 others are reported and counted as held back. Nodes deciding at the
    same moment may hold a drain over the cap only until their own read back resumes it: every such stretch is
    measured and must be short."""
    cluster = slurm_idle
    assert len(cluster.fleet.nodes) == 8
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    prom = metrics / "gpufleet_preflight_health_check.prom"
    with open(installed["health_check_config"]) as handle:
        original = handle.read()
    config = json.loads(original)
    config["policy"].update(min_available_memory="1024TiB", drain_cap_nodes=3, drain_cap_percent=None,
                            drain_cap_window=3600)
    config["metrics_dir"] = str(metrics)
    samples, held = [], False
    started = time.monotonic()
    try:
        with open(installed["health_check_config"], "w") as handle:
            json.dump(config, handle)
        while time.monotonic() - started < 30:
            samples.append((time.monotonic() - started, len(ours_drained(cluster))))
            held = held or 'gpufleet_preflight_drain_held_back{source="health_check"} 1' in (
                prom.read_text() if prom.exists() else "")
            if samples[-1][1] == 3 and held and samples[-1][0] > 10:
                break
        stretches = over_cap_stretches(samples, 3)
        # TIMINGS holds seconds only: the polls and stretches are counted in the assertion messages below
        TIMINGS["drain_cap_longest_over_cap_seconds"] = max([s for _t, s in stretches] or [0])
        TIMINGS["drain_cap_settled_at_seconds"] = next(t for t, count in reversed(samples) if count != 3) if any(
            count != 3 for _t, count in samples) else 0
        assert samples[-1][1] == 3 and held, (len(samples), samples[-20:], held)
        assert all(seconds < 2 for _start, seconds in stretches), (len(samples), stretches)
        book = run_playbook(os.path.join(REPO_ROOT, "playbooks", "preflight.yml"), cluster.fleet.inventory_path,
                            extra_vars=dict(preflight_profiles=[], preflight_min_available_memory="1024TiB",
                                            preflight_max_memory_pressure=100, preflight_slurm=True,
                                            preflight_slurm_conf=cluster.slurm.conf,
                                            preflight_slurm_state_dir=STATE_DIR(cluster),
                                            preflight_drain_cap_nodes=3, preflight_drain_cap_percent=None,
                                            preflight_report_dir=str(tmp_path / "reports"),
                                            preflight_drop_mode="end_host"))
        TIMINGS["drain_cap_playbook_seconds"] = book.duration
        drained = ours_drained(cluster)
        assert len(drained) == 3, (drained, book.stdout[-4000:])
        assert book.stdout.count("the drain circuit breaker holds") >= 5, book.stdout[-6000:]
        time.sleep(3)  # more of slurmd's runs beside it: still 3
        assert len(ours_drained(cluster)) == 3
    finally:
        with open(installed["health_check_config"], "w") as handle:
            handle.write(original)


def test_a_node_not_ready_at_slurmd_start_registers_drained_and_never_runs_a_job(installed, slurm_idle):
    """Issue 38.2: node5's slurmd stops until slurmctld marks it down* (not responding); a build process is left on it
    (not ready) and slurmd starts again. slurmd runs the check once before it registers: the node registers drained
    with our reason, and of 8 one-CPU jobs submitted at once none ever runs there -- they go elsewhere."""
    cluster = slurm_idle
    slurm = cluster.slurm
    node = cluster.fleet["node5"]
    slurm.stop_slurmd(node)
    slurm.wait_states({"node5": "down*"}, 60)
    pid = node.spawn_orphan("ninja")
    jobs = []
    try:
        started = time.monotonic()
        slurm.start_slurmd(node)
        for _index in range(8):
            jobs.append(slurm.command(["sbatch", "--parsable", "-p", "build", "--chdir=/tmp", "-o", "/dev/null",
                                       "--wrap", "sleep 30"]).stdout.strip())
        slurm.wait_states({"node5": "drained"}, 30)
        TIMINGS["registration_drain_seconds"] = time.monotonic() - started
        info = slurm.node_info("node5")
        assert info["reason"].startswith("gpufleet: build_processes: 1 build process still running"), info
        where = set()
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            out = slurm.command(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i|%T|%N"]).stdout
            where.update(line.split("|")[2] for line in out.splitlines() if line.split("|")[1] == "RUNNING")
            time.sleep(0.3)
        assert "node5" not in where and len(where) == 7, where   # the 7 others run one each, the 8th waits
    finally:
        node.run("kill -9 %d" % pid)
        if jobs:
            slurm.command(["scancel"] + jobs)
