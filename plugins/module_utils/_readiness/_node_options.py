# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node profile's rows of the readiness option table (``_readiness_options.OPTIONS`` holds them in its order),
cut from that file at this seam for its size (issue 37): same shape, same rules, see ``_readiness_options``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CHECK = ("main", "check")


# Row builders for the two shapes most of the table repeats (a switch, a non-negative limit): the row is the
# same dict a literal would give, so everything derived from the table stays as it was.
def flag(name, default, description, **extra):
    """A bool option the preflight check takes; ``extra``: further keys of the row (``node``...)."""
    return dict(name=name, check=dict(form="bool"), type="bool", default=default, roles=CHECK, description=description, **extra)


def count(name, most, default, description, **extra):
    """An int option from 0 to ``most`` the preflight check takes."""
    return dict(name=name, check=dict(min=0, max=most), type="int", default=default, roles=CHECK, description=description, **extra)


NODE_OPTIONS = (
    # ---------------------------------------------------------------- profile node (issue 30 item 4)
    dict(name="required_mounts", check=dict(form="absolute_paths"), type="list", elements="path", default=[], roles=CHECK, description=[
        "Paths that must each be a mount point, mounted read-write, with O(min_free_scratch) free (node profile), "
        "for example a shared scratch or home filesystem.",
    ]),
    dict(name="scratch_paths", check=dict(form="absolute_paths"), type="list", elements="path", default=["/tmp"], roles=CHECK, description=[
        "Paths that must be writable with O(min_free_scratch) free (node profile).",
    ]),
    dict(name="min_free_scratch", check=dict(form="size"), type="raw", default="1GiB", roles=CHECK, description=[
        "Minimum free space on each of O(required_mounts) and O(scratch_paths) (node profile), a size in binary units.",
    ]),
    dict(name="required_services", check=dict(form="program_names"), type="list", elements="str", default=[], roles=CHECK, description=[
        "Executable names of daemons that must be running (node profile), for example C(sshd), C(munged), "
        "C(nvidia-persistenced), C(nv-fabricmanager), C(slurmd).",
    ]),
    count("expected_sockets", 64, 0, [
        "CPU sockets that must be online (node profile); V(0) does not check.",
    ]),
    count("expected_cores", 65536, 0, [
        "Physical CPU cores that must be online, all sockets together (node profile); V(0) does not check.",
    ]),
    count("expected_threads", 65536, 0, [
        "Online CPUs (hardware threads) that must be present (node profile), as slurm.conf's CPUs; V(0) does not check.",
    ]),
    dict(name="min_memory_total", check=dict(form="size"), type="raw", default=None, roles=CHECK, description=[
        "Installed memory the node must have (C(MemTotal), node profile), as slurm.conf's RealMemory; unset: not "
        "checked.",
    ]),
    flag("require_clock_sync", True, [
        "The kernel's clock must be synchronised by NTP or PTP (node profile; read with C(adjtimex)).",
    ]),
    count("expected_ib_ports", 256, 0, [
        "InfiniBand/RoCE ports that must be present (node profile); every port found must be ACTIVE and LinkUp. "
        "V(0): a node without any passes.",
    ]),
    dict(name="min_ib_rate", check=dict(min=0, max=3200, unit="Gb/s"), type="int", default=0, roles=CHECK, description=[
        "Lowest rate every InfiniBand/RoCE port must run at, in Gb/s (node profile; V(400) for NDR); V(0) does not check.",
    ]),
    flag("check_ib_counters", False, [
        "Whether to read each InfiniBand port's error counters (C(/sys/class/infiniband/<dev>/ports/<n>/counters)) and "
        "judge their growth since the previous run (node profile; the counts are kept on the node beside the probe "
        "cache). The first run records a baseline; a counter that went down (reboot, reset) starts a new one.",
    ]),
    count("max_ib_link_downed", 2 ** 31 - 1, 0, [
        "Most link flaps (growth of C(link_downed)) a port may show since the previous run (O(check_ib_counters)).",
    ]),
    count("max_ib_error_growth", 2 ** 31 - 1, 0, [
        "Most growth of any other error counter (C(symbol_error), C(port_rcv_errors), C(link_error_recovery), "
        "C(local_link_integrity_errors)...) a port may show since the previous run (O(check_ib_counters)).",
    ]),
    # issue 37 item 3: node hardware, each opt-in (the node-local check's default cost stays)
    flag("check_d_state", False, [
        "Whether processes stuck in uninterruptible sleep (D state in two C(/proc) scans 0.5 s apart) fail the node "
        "(node profile): more than O(max_d_state_processes) of them.",
    ]),
    count("max_d_state_processes", 100000, 0, [
        "Most processes that may stay in D state (O(check_d_state)).",
    ]),
    dict(name="expected_cpu_governor", check=dict(form="choices"), type="str", default="any", roles=CHECK,
         choices=["any", "performance", "powersave", "schedutil", "ondemand", "conservative", "userspace"], description=[
        "The CPU frequency governor every CPU must run (C(cpufreq/scaling_governor), node profile), V(performance) "
        "on build and GPU nodes; V(any) does not check. A node without a cpufreq driver (a VM) is not judged.",
    ]),
    flag("check_nvme", False, [
        "Whether NVMe health fails the node (node profile; C(nvme smart-log -o json), needs nvme-cli and root): a "
        "critical warning, spare below its threshold, 100% of rated life used, or more than O(max_nvme_media_errors) "
        "media errors. Without nvme-cli the check says so and passes.",
    ]),
    dict(name="max_nvme_media_errors", check=dict(min=0, max=2 ** 31 - 1), type="int", default=0, roles=CHECK,
         description=["Most media and data integrity errors an NVMe controller may report (O(check_nvme))."]),
    flag("check_ipmi_sel", False, [
        "Whether new entries in the BMC's System Event Log since the previous run fail the node (node profile; "
        "C(ipmitool sel elist), root; the last entry id is kept beside the probe cache, the first run records it): "
        "more than O(max_sel_new_entries). Without ipmitool or a BMC the check says so and passes.",
    ]),
    count("max_sel_new_entries", 100000, 0, [
        "Most new SEL entries allowed since the previous run (O(check_ipmi_sel)).",
    ]),
    flag("check_sensors", False, [
        "Whether a BMC sensor past its critical or non-recoverable threshold (C(ipmitool sensor) status C(cr), C(nr)) "
        "fails the node (node profile). Without ipmitool or a BMC the check says so and passes.",
    ]),
)
