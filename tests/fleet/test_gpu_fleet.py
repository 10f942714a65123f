# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu and build profiles on the fleet: per-node stub nvidia-smi replaying captured Blackwell output.

Most nodes: 8 healthy RTX PRO 6000 Blackwell (CC 12.0). node2: 7 GPUs. node3: uncorrected ECC errors.
node4: nvidia-smi hangs (a wedged driver). node5: the build path is a nearly full tmpfs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from fleetlib import REPO_ROOT, TIMINGS, blackwell_rows, flagged, install_gpus, report_hosts, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
GPU_TIMEOUT = 4


def flagged_after(result, tmp_path, expected):
    """The report's hosts of a run that flagged exactly ``expected`` (node -> its failed checks); every node's reason
    when it did not."""
    assert "Traceback" not in result.stdout + result.stderr
    hosts = report_hosts(tmp_path)
    assert flagged(hosts) == expected, json.dumps(dict((n, hosts[n]["reason"]) for n in hosts), indent=1)
    return hosts


def h100_pair_vars(tmp_path, textdir, **more):
    """The gpu profile's vars for nodes holding the captured HGX H100 pair: reports under ``tmp_path``, each node's
    metrics under ``textdir``; ``more``: the run's own vars."""
    return dict({
        "preflight_profiles": ["gpu"],
        "preflight_expected_gpus": 2,
        "preflight_compute_capability": "9.0",
        "preflight_min_available_memory": "1GiB",
        "preflight_min_pcie_gen": 5,
        "preflight_report_dir": str(tmp_path),
        "preflight_metrics_dir": os.path.join(textdir, "{{ inventory_hostname }}"),
    }, **more)


def with_ecc_errors(row, errors):
    cells = row.split(", ")
    cells[10] = str(errors)  # ecc.errors.uncorrected.volatile.total
    return ", ".join(cells)


def test_gpu_and_build_profiles_flag_exactly_the_broken_nodes(fresh_fleet, tmp_path):
    fleet = fresh_fleet(8)
    healthy = blackwell_rows()[1]
    build_path = os.path.join(fleet.dir, "build")
    os.makedirs(build_path)
    for node in fleet.nodes:
        if node.name == "node2":
            install_gpus(node, rows=healthy[:7])
        elif node.name == "node3":
            install_gpus(node, rows=[with_ecc_errors(healthy[0], 3)] + healthy[1:])
        elif node.name == "node4":
            install_gpus(node, hang=True)
        else:
            install_gpus(node)
    full = fleet["node5"]
    full.mount_tmpfs(build_path, "64m")
    full.run("dd if=/dev/zero of=%s/fill bs=1M count=60 2>/dev/null" % build_path, check=True)

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["build", "gpu"],
        "preflight_build_path": build_path,
        "preflight_min_free_disk": "1GiB",
        "preflight_min_available_memory": "1GiB",
        "preflight_gpu_timeout": GPU_TIMEOUT,
        "preflight_report_dir": str(tmp_path),
    })
    TIMINGS["gpu_preflight_8_nodes"] = result.duration
    assert "Traceback" not in result.stdout + result.stderr
    hosts = report_hosts(tmp_path)

    failed = flagged(hosts)
    assert failed == {"node2": ["gpu_count"], "node3": ["ecc_errors"], "node4": failed.get("node4"), "node5": ["disk_space"]}, \
        json.dumps(dict((n, hosts[n]["reason"]) for n in hosts), indent=1)
    # The hung driver: every GPU check that needs nvidia-smi is unknown, with why; nothing passes silently.
    node4 = dict((c["name"], c) for c in hosts["node4"]["checks"])
    assert "gpu_count" in hosts["node4"]["failed_checks"]
    gpu_checks = {"gpu_count", "compute_capability", "ecc_errors", "row_remaps", "gpu_compute_apps", "driver_version",
                  "pcie_link", "gpu_temperature", "clock_events", "persistence_mode", "mig_mode"}
    assert set(hosts["node4"]["failed_checks"]) <= gpu_checks, hosts["node4"]["failed_checks"]
    for name in ("gpu_count", "compute_capability", "ecc_errors", "row_remaps"):
        assert node4[name]["status"] == "unknown", (name, node4[name])
    assert "did not answer within %.1fs and was killed" % GPU_TIMEOUT in node4["gpu_count"]["message"]
    assert "7 GPUs" in hosts["node2"]["reason"] and "8" in hosts["node2"]["reason"]
    assert "ECC" in hosts["node3"]["reason"]
    assert "1.0Gi needed" in hosts["node5"]["reason"], hosts["node5"]["reason"]
    # The hang costs its timeout, not the run: the others finish, the playbook ends well within 3 timeouts + overhead.
    assert result.duration < 60, result.duration
    # The checks that passed on a healthy node include the GPU ones, so the stub was really read.
    node1 = dict((c["name"], c) for c in hosts["node1"]["checks"])
    for name in ("gpu_count", "compute_capability", "ecc_errors", "row_remaps", "gpu_compute_apps", "nvcc_arch", "disk_space"):
        assert node1[name]["status"] == "ok", (name, node1[name])
    assert node1["gpu_count"]["observed"] == 8


H100 = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "h100_x2_nvswitch")


def h100_file(name):
    with open(os.path.join(H100, name)) as handle:
        return handle.read()


def test_gpu_health_faults_flag_only_their_node_and_a_hung_probe_drains_nothing(fresh_fleet, tmp_path):
    """Issue 30 on the fleet: every node an HGX H100 pair (captured -q and nvlink output through the stand-in).
    node2: GPU 1's fabric still In Progress. node3: GPU 0's NVLink link 5 down. node4: `nvidia-smi -q` hangs.
    node5: `dcgmi diag -r 1` fails its Persistence Mode test."""
    fleet = fresh_fleet(5)
    q = h100_file("q.txt")
    second = q.index("GPU 00000000:2A:00.0")
    stuck = q[:second] + q[second:].replace("State                             : Completed",
                                            "State                             : In Progress", 1)
    down = h100_file("nvlink-s.txt").replace("Link 5: 26.562 GB/s", "Link 5: <inactive>", 1)
    with open(os.path.join(os.path.dirname(H100), "dcgm", "diag-r1-persistence-fail.txt")) as handle:
        diag_fail = handle.read()
    textdir = os.path.join(str(tmp_path), "metrics")
    for node in fleet.nodes:
        files = {"node2": {"q.txt": stuck}, "node3": {"nvlink-s.txt": down}, "node4": {"sleep-q": "120"},
                 "node5": {"dcgm-diag.txt": diag_fail}}.get(node.name)
        install_gpus(node, scenario="h100_x2_nvswitch", files=files)
        os.makedirs(os.path.join(textdir, node.name))

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars=h100_pair_vars(
        tmp_path, textdir, preflight_check_nvlink=True, preflight_check_fabric=True, preflight_check_gpu_recovery=True,
        preflight_check_dcgm_diag=True, preflight_gpu_probe_timeout=2))
    TIMINGS["gpu_health_5_nodes"] = result.duration
    hosts = flagged_after(result, tmp_path, {"node2": ["fabric"], "node3": ["nvlink"], "node5": ["dcgm_diag"]})
    assert "GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial 1654123038646" in hosts["node2"]["reason"]
    assert "In Progress" in hosts["node2"]["reason"] and "Fabric Manager" in hosts["node2"]["reason"]
    assert "GPU 0 (00000000:18:00.0" in hosts["node3"]["reason"] and "link 5 down" in hosts["node3"]["reason"]
    assert "Persistence Mode failed" in hosts["node5"]["reason"]
    assert "fabric" in result.stdout and "nvlink" in result.stdout  # the console table names them too
    # node_exporter metrics: the failed check by name on its node only.
    failed_sample = 'gpufleet_preflight_check_status{check="%s",profile="gpu",source="playbook",status="failed"} 1'
    for name, check in (("node2", "fabric"), ("node3", "nvlink"), ("node5", "dcgm_diag")):
        with open(os.path.join(textdir, name, "gpufleet_preflight_playbook.prom")) as handle:
            assert failed_sample % check in handle.read(), name
    with open(os.path.join(textdir, "node1", "gpufleet_preflight_playbook.prom")) as handle:
        assert 'status="failed"} 1' not in handle.read()
    # The hung probe: named, not counted, the node stays ready; its other probes still answered.
    node4 = dict((c["name"], c) for c in hosts["node4"]["checks"])
    for name in ("fabric", "gpu_recovery"):
        assert node4[name]["status"] == "skipped", node4[name]
        assert "nvidia-smi -q did not answer within 2.0s" in node4[name]["message"], node4[name]
    assert node4["nvlink"]["status"] == "ok"
    node1 = dict((c["name"], c) for c in hosts["node1"]["checks"])
    for name in ("pcie_link", "gpu_temperature", "clock_events", "persistence_mode", "mig_mode", "nvlink", "fabric",
                 "gpu_recovery", "dcgm_diag"):
        assert node1[name]["status"] == "ok", (name, node1[name])
    assert result.duration < 60, result.duration


def h100_rows(index, **cells):
    """The captured H100 query-gpu.csv with GPU ``index``'s cells changed (by field name), as one node's driver."""
    lines = h100_file("query-gpu.csv").splitlines()
    fields = lines[0][len("#fields: "):].split(",")
    rows = [line.split(", ") for line in lines[1:] if line.strip()]
    for field, value in cells.items():
        rows[index][fields.index(field)] = str(value)
    return "\n".join([lines[0]] + [", ".join(row) for row in rows]) + "\n"


def test_each_query_fault_flags_only_its_node_in_reports_console_and_metrics(fresh_fleet, tmp_path):
    """Issue 30's checks fed by the one --query-gpu call and by -q, on the fleet: each node's stand-in replays the
    captured HGX H100 pair with one fault on GPU 1; node1 is as captured. Only the faulty nodes are flagged, each by
    its own check, with the GPU and the fault named in the report, the console and the node's metrics."""
    fleet = fresh_fleet(7)
    reset = h100_file("q.txt")
    second = reset.index("GPU 00000000:2A:00.0")
    reset = reset[:second] + reset[second:].replace("Reset Required                    : No",
                                                    "Reset Required                    : Yes", 1)
    faults = {
        "node2": ("gpu_temperature", {"query-gpu.csv": h100_rows(1, **{"temperature.gpu": 92})}, "is at 92 C"),
        "node3": ("clock_events", {"query-gpu.csv": h100_rows(1, **{"clocks_event_reasons.active": "0x0000000000000008"})},
                  "is slowed by hw_slowdown"),
        "node4": ("persistence_mode", {"query-gpu.csv": h100_rows(1, persistence_mode="Disabled")}, "persistence mode off"),
        "node5": ("mig_mode", {"query-gpu.csv": h100_rows(1, **{"mig.mode.current": "Enabled"})}, "MIG enabled"),
        "node6": ("pcie_link", {"query-gpu.csv": h100_rows(1, **{
            "pcie.link.gen.current": 3, "utilization.gpu": 90, "clocks_event_reasons.active": "0x0000000000000000"})},
            "runs at gen 3 under load, below its max gen 5"),
        "node7": ("gpu_recovery", {"q.txt": reset}, "says reset required"),
    }
    textdir = os.path.join(str(tmp_path), "metrics")
    for node in fleet.nodes:
        install_gpus(node, scenario="h100_x2_nvswitch", files=faults.get(node.name, (None, None))[1])
        os.makedirs(os.path.join(textdir, node.name))

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars=h100_pair_vars(
        tmp_path, textdir, preflight_check_gpu_recovery=True))
    TIMINGS["gpu_query_faults_7_nodes"] = result.duration
    hosts = flagged_after(result, tmp_path, dict((name, [check]) for name, (check, _files, _words) in faults.items()))
    failed_sample = 'gpufleet_preflight_check_status{check="%s",profile="gpu",source="playbook",status="failed"} 1'
    for name, (check, _files, words) in faults.items():
        assert "GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial 1654123038646" in hosts[name]["reason"], name
        assert words in hosts[name]["reason"], (name, hosts[name]["reason"])
        assert check in result.stdout and words in result.stdout, (name, check)  # the console says it too
        with open(os.path.join(textdir, name, "gpufleet_preflight_playbook.prom")) as handle:
            assert failed_sample % check in handle.read(), name
    with open(os.path.join(textdir, "node1", "gpufleet_preflight_playbook.prom")) as handle:
        assert 'status="failed"} 1' not in handle.read()
    node1 = dict((c["name"], c) for c in hosts["node1"]["checks"])
    for name in ("pcie_link", "gpu_temperature", "clock_events", "persistence_mode", "mig_mode", "gpu_recovery"):
        assert node1[name]["status"] == "ok", (name, node1[name])


def kmsg_with_xid(code, text):
    """The host's kernel ring buffer as /dev/kmsg gives it, plus one NVIDIA Xid record a minute old on GPU 0."""
    with open("/proc/uptime") as handle:
        usec = int((float(handle.read().split()[0]) - 60) * 1e6)
    return "3,999999,%d,-;NVRM: Xid (PCI:0000:1b:00): %d, pid=1234, name=python3, %s\n" % (usec, code, text)


def give_kmsg(fleet, node, records):
    """Bind-mount a file holding ``records`` over the node's /dev/kmsg: the node reads its own kernel log."""
    path = os.path.join(fleet.dir, "kmsg-%s" % node.name)
    with open(path, "w") as handle:
        handle.write(records)
    node.dirty = True
    node.run("mount --bind %s /dev/kmsg" % path, check=True)


def test_xid_by_class_flags_only_the_node_whose_gpu_needs_a_reset(fresh_fleet, tmp_path):
    """Xid by class (issue 30) on the fleet: each node's /dev/kmsg is its own (a file bind-mounted inside the node).
    node2: Xid 79 (fallen off the bus: reset or reboot); node3: Xid 13 (an application's error: the job's business,
    not the node's). Only node2 is flagged, with the class's words, the GPU and the action."""
    fleet = fresh_fleet(3)
    logs = {"node2": kmsg_with_xid(79, "GPU has fallen off the bus."),
            "node3": kmsg_with_xid(13, "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address")}
    for node in fleet.nodes:
        install_gpus(node)
        if node.name in logs:
            give_kmsg(fleet, node, logs[node.name])
            seen = node.run("timeout 5 head -c 65536 /dev/kmsg").stdout
            assert "Xid (PCI:0000:1b:00)" in seen, seen  # the node reads its own log, not the host's

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["gpu"],
        "preflight_min_available_memory": "1GiB",
        "preflight_report_dir": str(tmp_path),
    })
    hosts = flagged_after(result, tmp_path, {"node2": ["fatal_xid"]})
    reason = hosts["node2"]["reason"]
    assert "Xid 79" in reason and "GPU has fallen off the bus" in reason and "reboot the node" in reason, reason
    assert "GPU 0 (00000000:1B:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition" in reason, reason
    assert "fatal_xid" in result.stdout
    node3 = dict((c["name"], c) for c in hosts["node3"]["checks"])
    assert node3["fatal_xid"]["status"] == "ok", node3["fatal_xid"]
    # The same Xid 13 fails where the policy counts application errors too: the record was read, and judged by class.
    strict = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["gpu"], "preflight_min_available_memory": "1GiB", "preflight_report_dir": str(tmp_path),
        "preflight_xid_fail_actions": ["restart_app", "reset_gpu", "reboot", "contact_support"]}, args=["--limit", "node3"])
    node3 = report_hosts(tmp_path)["node3"]
    assert node3["failed_checks"] == ["fatal_xid"] and "Xid 13" in node3["reason"], (node3["reason"], strict.stdout[-2000:])


def kmsg_records(*messages):
    """Kernel records (facility 0) a minute old, as /dev/kmsg gives them."""
    with open("/proc/uptime") as handle:
        usec = int((float(handle.read().split()[0]) - 60) * 1e6)
    return "".join("3,%d,%d,-;%s\n" % (999000 + index, usec + index, message) for index, message in enumerate(messages))


def test_blackwell_xid_and_sxid_flag_only_their_node(fresh_fleet, tmp_path):
    """Issue 37 item 1 on the fleet: node2 logs a fatal NVLink5 Xid 149 with the driver's Xid 154 (GPU Reset Required)
    and a fatal NVSwitch SXid; node3 the non-fatal kinds of both (Xid 144 Nonfatal, a non-fatal SXid). Only node2 is
    flagged, by fatal_xid (the driver's action as the hint) and sxid (the switch, its code, what to do)."""
    fleet = fresh_fleet(3)
    logs = {
        "node2": kmsg_records(
            "NVRM: Xid (PCI:0000:1b:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x0 0x0 0x0 0x0 0x0)",
            "NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
            "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 24007, Fatal, Link 44 sourcetrack TCEN0 crumbstore ECC DBE Error"),
        "node3": kmsg_records(
            "NVRM: Xid (PCI:0000:1b:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x0 0x0 0x0 0x0)",
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"),
    }
    for node in fleet.nodes:
        install_gpus(node)
        if node.name in logs:
            give_kmsg(fleet, node, logs[node.name])
    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["gpu"], "preflight_min_available_memory": "1GiB", "preflight_report_dir": str(tmp_path)})
    hosts = flagged_after(result, tmp_path, {"node2": ["fatal_xid", "sxid"]})
    checks = dict((c["name"], c) for c in hosts["node2"]["checks"])
    assert "the driver asks for a GPU reset" in checks["fatal_xid"]["message"], checks["fatal_xid"]
    assert "SXid 24007 on nvidia-nvswitch1" in checks["sxid"]["message"] and "Fabric Manager" in checks["sxid"]["message"]
    node3 = dict((c["name"], c) for c in hosts["node3"]["checks"])
    assert node3["fatal_xid"]["status"] == "ok" and node3["sxid"]["status"] == "ok", (node3["fatal_xid"], node3["sxid"])
