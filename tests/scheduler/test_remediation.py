# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder (issue 38 item 2) on the real slurmctld with 8 slurmd, each running the installed health
check every 2 s: a GPU reset never while a process uses the GPU, never twice for one kernel line, a recurring Xid
escalated to the ticket command instead of another reset; a reboot-class Xid rebooted through Slurm
(``scontrol reboot ASAP nextstate=RESUME``: a stand-in RebootProgram restarts the node's slurmd with a new boot time
and a clean kernel log) and the node back in service, healthy. Every step is in the node's history file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import time

from conftest import STATE_DIR
from fleetlib import SBIN, TIMINGS, FleetError, blackwell_rows, install_gpus

GPU0_PCI = "0000:1b:00"  # GPU 0 of the Blackwell fixture (00000000:1B:00.0)


def kmsg_xids(*events):
    """Kernel records of NVIDIA Xids ``(code, age seconds)`` on GPU 0, as /dev/kmsg gives them."""
    with open("/proc/uptime") as handle:
        uptime = float(handle.read().split()[0])
    return "".join("3,%d,%d,-;NVRM: Xid (PCI:%s): %d, pid=1234, name=python3, Ch 00000008\n"
                   % (990000 + index, int((uptime - age) * 1e6), GPU0_PCI, code, )
                   for index, (code, age) in enumerate(sorted(events, key=lambda e: -e[1])))


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out after %d s waiting for %s" % (seconds, what))


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def history(cluster, node):
    text = read(os.path.join(STATE_DIR(cluster), "remediation-%s.json" % node))
    return json.loads(text) if text else []


@contextlib.contextmanager
def ladder(installed, cluster, tmp_path, remediation):
    """Every node with 8 healthy GPUs (the stand-in nvidia-smi), the gpu profile and the ladder in the installed config
    that slurmd's runs read; the config, the kernel logs and the compute processes put back after."""
    with open(installed["health_check_config"]) as handle:
        original = handle.read()
    config = json.loads(original)
    config["policy"] = dict(config["policy"], profiles=["gpu"])
    config["remediation"] = dict(config.get("remediation") or {}, enabled=True, **remediation)
    mounted = []
    try:
        for node in cluster.fleet.nodes:
            install_gpus(node)
        with open(installed["health_check_config"], "w") as handle:
            json.dump(config, handle)
        yield mounted
    finally:
        with open(installed["health_check_config"], "w") as handle:
            handle.write(original)
        for node in mounted:
            node.run("umount /dev/kmsg")
            node.run("rm -f %s/nvidia-smi.d/resets.log; : > %s/nvidia-smi.d/compute-apps.csv" % (SBIN, SBIN))


def log_xids(node, mounted, path, *events):
    """The node's own /dev/kmsg: a file bind-mounted inside it, rewritten in place for later records."""
    with open(path, "w") as handle:
        handle.write(kmsg_xids(*events))
    if node not in mounted:
        node.run("mount --bind %s /dev/kmsg" % path, check=True)
        mounted.append(node)


def test_a_gpu_reset_waits_for_an_idle_gpu_and_a_recurring_xid_escalates(installed, slurm_idle, tmp_path):
    cluster = slurm_idle
    node = cluster.fleet["node4"]
    ticket = tmp_path / "ticket.sh"
    ticket.write_text("#!/bin/sh\ncat >> %s\necho >> %s\necho TICKET-1\n" % (tmp_path / "tickets.log", tmp_path / "tickets.log"))
    ticket.chmod(0o755)
    header, rows = blackwell_rows()
    uuid0 = rows[0].split(", ")[header.split(": ", 1)[1].split(",").index("uuid")]

    def resets():  # the stand-in nvidia-smi's record of its -r calls, on the node's private /usr/local/sbin
        return node.run("cat %s/nvidia-smi.d/resets.log 2>/dev/null" % SBIN).stdout
    with ladder(installed, cluster, tmp_path, dict(reset_classes=["reset_gpu"], escalate_after=3,
                                                   ticket_command=[str(ticket)])) as mounted:
        node.put_stub(SBIN + "/nvidia-smi.d/compute-apps.csv", "%s, 4242, python3, 1024\n" % uuid0, 0o644)
        started = time.monotonic()
        log_xids(node, mounted, str(tmp_path / "kmsg-node4"), (48, 60))
        # Drained for the Xid, and no reset while pid 4242 uses GPU 0: the history says why.
        wait_for(lambda: any("in use by pid 4242 (python3)" in h["why"] for h in history(cluster, "node4")), 30,
                 "the refused reset in node4's history")
        TIMINGS["remediation_refusal_seconds"] = time.monotonic() - started
        assert cluster.slurm.node_info("node4")["reason"].startswith("gpufleet: fatal_xid"), cluster.slurm.node_info("node4")
        assert resets() == ""
        # The job ends: the next run resets GPU 0, once.
        node.put_stub(SBIN + "/nvidia-smi.d/compute-apps.csv", "", 0o644)
        wait_for(resets, 30, "the GPU reset")
        time.sleep(5)  # two more runs read the same kernel line: already acted on
        assert resets().splitlines() == ["-r -i 0"], resets()
        done = [h for h in history(cluster, "node4") if h["step"] == "reset_gpu" and h["state"] == "done"]
        assert len(done) == 1 and "GPU 0 reset" in done[0]["outcome"], history(cluster, "node4")
        # Two more Xid 48 on GPU 0 within the week: the second is reset, the third is a ticket, not a reset.
        log_xids(node, mounted, str(tmp_path / "kmsg-node4"), (48, 60), (48, 600), (48, 300))
        wait_for(lambda: read(str(tmp_path / "tickets.log")), 30, "the ticket command")
        time.sleep(5)
        assert resets().splitlines() == ["-r -i 0", "-r -i 0"], resets()
        tickets = [json.loads(line) for line in read(str(tmp_path / "tickets.log")).splitlines() if line.strip()]
        assert len(tickets) == 1 and tickets[0]["node"] == "node4" and tickets[0]["kind"] == "xid 48 on %s" % GPU0_PCI
        assert "3 times within 7 days" in tickets[0]["why"], tickets
        steps = [(h["step"], h["state"]) for h in history(cluster, "node4")]
        assert steps.count(("reset_gpu", "done")) == 2 and steps.count(("escalate", "done")) == 1, steps
        escalated = [h for h in history(cluster, "node4") if h["step"] == "escalate"][0]
        assert "ticket raised by %s: TICKET-1" % ticket in escalated["outcome"], escalated
        # --check, with a history of its own: says what each step would do, does none, writes no history.
        state = tmp_path / "check-state"
        state.mkdir()
        config = json.loads(read(installed["health_check_config"]))
        config["slurm"] = dict(config["slurm"], state_dir=str(state), enabled=False)
        (tmp_path / "check.json").write_text(json.dumps(config))
        said = node.run("%s --mode check --check --config %s" % (installed["health_check_program"], tmp_path / "check.json"))
        assert said.rc == 1, said
        assert "remediation: Xid 48" in said.stdout and "would reset GPU 0 (nvidia-smi -r -i 0)" in said.stdout, said.stdout
        assert "would run the ticket command %s" % ticket in said.stdout, said.stdout
        assert resets().splitlines() == ["-r -i 0", "-r -i 0"]
        assert len([line for line in read(str(tmp_path / "tickets.log")).splitlines() if line.strip()]) == 1
        assert not [name for name in os.listdir(str(state)) if name.startswith("remediation-")]


def test_a_reboot_class_xid_reboots_through_slurm_and_the_node_comes_back(installed, slurm_idle, tmp_path):
    cluster = slurm_idle
    slurm = cluster.slurm
    node = cluster.fleet["node6"]
    clean = tmp_path / "kmsg-clean"
    clean.write_text("")
    reboots = tmp_path / "reboots.log"
    # The stand-in RebootProgram (run by slurmd inside the node): a fresh kernel log, and slurmd started again in a
    # new time namespace whose boot time is now (after the request: slurmctld compares the two) -- a node rebooted.
    with open(slurm.reboot_target, "w") as handle:
        handle.write("""#!/bin/sh
node=$(hostname)
echo "$(date +%%s) $node" >> %(reboots)s
setsid sh -c '
  sleep 2
  mount --bind %(clean)s /dev/kmsg
  pid=$(cat %(dir)s/slurmd-'"$node"'.pid)
  kill $pid; while kill -0 $pid 2>/dev/null; do sleep 0.1; done
  up=$(cut -d. -f1 /proc/uptime)
  SLURM_CONF=%(conf)s exec unshare --time --boottime -$up --fork slurmd -D -N '"$node"' -f %(conf)s
' </dev/null >>%(dir)s/slurmd-$node.out 2>&1 &
exit 0
""" % dict(reboots=reboots, clean=clean, dir=slurm.dir, conf=slurm.conf))
    os.chmod(slurm.reboot_target, 0o755)
    try:
        with ladder(installed, cluster, tmp_path, dict(reboot_classes=["reboot"])) as mounted:
            started = time.monotonic()
            log_xids(node, mounted, str(tmp_path / "kmsg-node6"), (79, 60))
            wait_for(lambda: read(str(reboots)), 60, "slurmd to run the RebootProgram")
            TIMINGS["remediation_reboot_issued_seconds"] = time.monotonic() - started
            requested = [h for h in history(cluster, "node6") if h["step"] == "reboot"]
            assert len(requested) == 1 and requested[0]["state"] == "done", history(cluster, "node6")
            assert "gpufleet: reboot: Xid 79" in requested[0]["outcome"], requested
            slurm.adopt_slurmd(node)
            try:
                slurm.wait_states({"node6": "idle"}, 60)
            except FleetError as exc:  # what slurmd said across the reboot, for whoever reads the failure
                raise AssertionError("%s\nslurmd of node6:\n%s" % (exc, read(os.path.join(slurm.dir, "slurmd-node6.out"))[-3000:]))
            TIMINGS["remediation_reboot_back_seconds"] = time.monotonic() - started
            time.sleep(4)  # the health checks after the reboot: healthy, so it stays in service
            info = slurm.node_info("node6")
            assert info["state"] == "idle" and info["reason"] in ("", "none"), info
            assert len(read(str(reboots)).splitlines()) == 1
            show = slurm.scontrol("show", "node", "node6").stdout
            assert "BootTime=" in show, show
    finally:
        os.unlink(slurm.reboot_target)
