# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/preflight.yml with preflight_slurm against a real slurmctld, node_exporter scraping its metrics, and
the pipeline gate's exit codes and set_stats -- every Slurm state read back from sinfo."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from conftest import STATE_DIR
from fleetlib import REPO_ROOT, TIMINGS, run_playbook

PREFLIGHT = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
POLICY = {"preflight_profiles": [], "preflight_min_available_memory": "64MiB", "preflight_max_memory_pressure": 100}


def run(cluster, tmp_path, args=(), **extra):
    extra_vars = dict(POLICY, preflight_slurm=True, preflight_slurm_conf=cluster.slurm.conf,
                      preflight_slurm_state_dir=STATE_DIR(cluster), preflight_report_dir=str(tmp_path / "reports"),
                      preflight_drop_mode="end_host")
    extra_vars.update(extra)
    result = run_playbook(PREFLIGHT, cluster.fleet.inventory_path, extra_vars=extra_vars, args=args,
                          env={"ANSIBLE_SHOW_CUSTOM_STATS": "1"})
    TIMINGS.setdefault("preflight_with_slurm_seconds", result.duration)
    return result


def custom_stats(stdout):
    match = re.search(r"^\s*RUN: (\{.*\})\s*$", stdout, re.M)
    assert match, stdout[-3000:]
    return json.loads(match.group(1))["gpufleet_preflight"]


def orphan(cluster, name):
    return cluster.fleet[name].spawn_orphan("ninja")


def end_orphan(cluster, name, pid):
    cluster.fleet[name].run("kill -9 %d" % pid, check=True)


@pytest.fixture(scope="module")
def node_exporter(cluster, tmp_path_factory):
    """Debian's prometheus-node-exporter, textfile collector only, on a loopback address of the private namespace."""
    textdir = str(tmp_path_factory.mktemp("textfile"))
    address = "127.0.0.1:19100"
    proc = subprocess.Popen(["prometheus-node-exporter", "--collector.disable-defaults", "--collector.textfile",
                             "--collector.textfile.directory=%s" % textdir, "--web.listen-address=%s" % address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = "http://%s/metrics" % address
    deadline = time.monotonic() + 10
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("node_exporter did not answer on %s" % url)
            time.sleep(0.1)
    yield textdir, url
    proc.terminate()
    proc.wait(10)


def scrape(url):
    samples = {}
    for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_drain_resume_and_other_peoples_drains(slurm_idle, tmp_path, node_exporter):
    cluster = slurm_idle
    slurm = cluster.slurm
    textdir, url = node_exporter
    for node in cluster.fleet.nodes:
        os.makedirs(os.path.join(textdir, node.name))
    slurm.scontrol("update", "NodeName=node1", "State=DRAIN", "Reason=admin: bad fan")
    slurm.scontrol("update", "NodeName=node3", "State=DRAIN", "Reason=gpufleet: held by a person")
    before = dict((n, slurm.node_info(n)) for n in ("node1", "node3"))
    pid = orphan(cluster, "node2")

    # node2 not ready: drained with our reason; the admin's and the person's drains untouched; metrics written
    result = run(cluster, tmp_path, preflight_metrics_dir=os.path.join(textdir, "{{ inventory_hostname }}"))
    # end_host: a gate that passed exits 0, and node2 is left out of the group the later plays target (meta end_host
    # ends only this play: tests/fleet/test_gate_modes_fleet.py runs the later plays)
    # (shown as a failed-and-ignored task, issue 39: the recap counts node2 as ignored, not ok)
    left_out = r'fatal: \[node2\]: FAILED! => \{[^\n]*"msg": "not ready: [^\n]* - left out of gpufleet_preflight_ready[^\n]*\n\.\.\.ignoring'
    assert result.rc == 0 and re.search(left_out, result.stdout), result.stdout[-4000:]
    node2 = slurm.node_info("node2")
    assert node2["state"] == "drained", node2
    assert node2["reason"].startswith("gpufleet: build_processes: 1 build process still running"), node2
    assert slurm.node_info("node1") == before["node1"] and slurm.node_info("node3") == before["node3"]
    assert "drained by someone else" in result.stdout and "not a drain this collection recorded" in result.stdout
    assert slurm.node_info("node4")["state"] == "idle"
    stats = custom_stats(result.stdout)
    assert stats["not_ready"] == ["node2"] and stats["gate"]["decision"] == "continue"
    assert stats["nodes"]["node2"]["failed_checks"] == ["build_processes"]
    os.rename(os.path.join(textdir, "node2", "gpufleet_preflight_playbook.prom"), os.path.join(textdir, "gpufleet_preflight_playbook.prom"))
    samples = scrape(url)
    assert samples["node_textfile_scrape_error"] == 0
    assert samples['gpufleet_preflight_ready{source="playbook"}'] == 0
    assert samples['gpufleet_preflight_build_processes{source="playbook"}'] == 1
    assert samples['gpufleet_preflight_check_status{check="build_processes",profile="always",source="playbook",status="failed"}'] == 1
    assert samples['gpufleet_preflight_effective_available_memory_bytes{source="playbook"}'] > 0

    # node2 ready again: resumed; the person's drain that starts with our prefix is still not resumed
    end_orphan(cluster, "node2", pid)
    result = run(cluster, tmp_path, preflight_metrics_dir=os.path.join(textdir, "{{ inventory_hostname }}"))
    assert result.rc == 0, result.stdout[-4000:]
    slurm.wait_states({"node2": "idle"}, 10)
    assert slurm.node_info("node1") == before["node1"] and slurm.node_info("node3") == before["node3"]
    os.rename(os.path.join(textdir, "node2", "gpufleet_preflight_playbook.prom"), os.path.join(textdir, "gpufleet_preflight_playbook.prom"))
    assert scrape(url)['gpufleet_preflight_ready{source="playbook"}'] == 1
    assert not os.listdir(STATE_DIR(cluster))


def test_draining_with_a_running_job_and_a_down_node(slurm_idle, tmp_path):
    cluster = slurm_idle
    slurm = cluster.slurm
    job = slurm.command(["sbatch", "--parsable", "-w", "node1", "--chdir=/tmp", "-o", "/dev/null", "--wrap", "sleep 300"])
    assert job.rc == 0, job.stderr
    slurm.wait_states({"node1": "allocated"}, 20)
    pids = dict((name, orphan(cluster, name)) for name in ("node1", "node3"))
    slurm.stop_slurmd(cluster.fleet["node3"])
    try:
        slurm.wait_states({"node3": "down*"}, 40)
        down = slurm.node_info("node3")
        result = run(cluster, tmp_path)
        assert result.rc == 0, result.stdout[-4000:]
        node1 = slurm.node_info("node1")
        assert node1["state"] == "draining" and node1["reason"].startswith("gpufleet: build_processes"), node1
        assert slurm.node_info("node3") == down
        assert "state down*" in result.stdout
        end_orphan(cluster, "node1", pids.pop("node1"))
        result = run(cluster, tmp_path)
        assert result.rc == 0, result.stdout[-4000:]
        # a node's state may carry slurmd's "not responding" (*) for a moment on a loaded machine: wait it out
        slurm.wait_states({"node1": "allocated"}, 30)
    finally:
        # whatever failed, the next tests get the cluster back: the job, the orphans, node3's slurmd
        slurm.command(["scancel", job.stdout.strip()])
        for name, pid in pids.items():
            cluster.fleet[name].run("kill -9 %d 2>/dev/null; true" % pid, check=False)
        slurm.ensure_running([cluster.fleet["node3"]])


def test_slurmctld_stopped(slurm_idle, tmp_path):
    cluster = slurm_idle
    slurm = cluster.slurm
    pid = orphan(cluster, "node2")
    slurm.stop_slurmctld()
    try:
        result = run(cluster, tmp_path)
    finally:
        slurm.start_slurmctld()
        end_orphan(cluster, "node2", pid)
    assert result.rc == 0, result.stdout[-4000:]
    assert "node2: slurmctld is unreachable" in result.stdout + result.stderr
    assert os.path.exists(str(tmp_path / "reports" / "preflight.json"))
    assert slurm.node_info("node2")["reason"] in ("none", ""), slurm.node_info("node2")
    assert custom_stats(result.stdout)["not_ready"] == ["node2"]


def test_gate_exit_codes(slurm_idle, tmp_path):
    cluster = slurm_idle
    pid = orphan(cluster, "node4")
    try:
        passing = run(cluster, tmp_path, preflight_slurm=False, preflight_max_not_ready=1)
        stopping = run(cluster, tmp_path, preflight_slurm=False, preflight_max_not_ready=0)
    finally:
        end_orphan(cluster, "node4", pid)
    assert passing.rc == 0, passing.stdout[-3000:]
    assert "node4" in passing.stdout and "build_processes" in passing.stdout
    assert custom_stats(passing.stdout)["gate"]["decision"] == "continue"
    assert stopping.rc == 2, stopping.stdout[-3000:]
    stats = custom_stats(stopping.stdout)
    assert stats["gate"]["decision"] == "stop" and stats["gate"]["abort"] is True and stats["not_ready"] == ["node4"]


def test_check_mode_and_scontrol_on_one_host(slurm_idle, tmp_path):
    """--check reports what it would drain and changes nothing; preflight_slurm_host runs sinfo/scontrol on one host
    for every node (named by its inventory short name)."""
    cluster = slurm_idle
    pid = orphan(cluster, "node2")
    try:
        checked = run(cluster, tmp_path, args=["--check"], preflight_slurm_host="node4", preflight_write_reports=False)
        assert cluster.slurm.node_info("node2")["state"] == "idle"
    finally:
        end_orphan(cluster, "node2", pid)
    assert checked.rc == 0, checked.stdout[-3000:]
    assert "node2 -> node4" in checked.stdout
    assert "Slurm: (check mode, nothing done) node2: not ready; draining: gpufleet: build_processes" in checked.stdout


def test_metrics_of_both_sources_side_by_side(cluster, tmp_path, node_exporter):
    """Issue 27.3: the playbook and the node-local check each write their own file into one textfile directory; a
    real node_exporter serves both sources, and the playbook's next run does not take the check's series away."""
    from ansible_collections.gpufleet.preflight.plugins.action import health_check_bundle  # pylint: disable=import-outside-toplevel
    textdir, url = node_exporter
    for name in os.listdir(textdir):
        path = os.path.join(textdir, name)
        if os.path.isfile(path):
            os.unlink(path)
    pyz = tmp_path / "hc.pyz"
    pyz.write_bytes(health_check_bundle.bundle_bytes()[0])
    config = tmp_path / "hc.json"
    config.write_text(json.dumps({"policy": {"profiles": [], "min_available_memory": "64MiB", "max_memory_pressure": 100},
                                  "metrics_dir": textdir, "slurm": {"state_dir": str(tmp_path / "state")}}))
    checked = cluster.fleet["node2"].run("/usr/bin/python3 -I %s --mode check --config %s" % (pyz, config))
    assert checked.rc == 0, checked
    result = run(cluster, tmp_path, args=["--limit", "node2"], preflight_slurm=False, preflight_metrics_dir=textdir)
    assert result.rc == 0, result.stdout[-4000:]
    assert sorted(n for n in os.listdir(textdir) if n.endswith(".prom")) == [
        "gpufleet_preflight_health_check.prom", "gpufleet_preflight_playbook.prom"]
    for _attempt in range(2):  # and again after the playbook's second run: neither overwrites the other
        samples = scrape(url)
        assert samples["node_textfile_scrape_error"] == 0
        assert samples['gpufleet_preflight_ready{source="playbook"}'] == 1
        assert samples['gpufleet_preflight_ready{source="health_check"}'] == 1
        assert samples['gpufleet_preflight_check_status{check="available_memory",profile="always",source="health_check",'
                       'status="ok"}'] == 1
        result = run(cluster, tmp_path, args=["--limit", "node2"], preflight_slurm=False, preflight_metrics_dir=textdir)
        assert result.rc == 0, result.stdout[-4000:]
