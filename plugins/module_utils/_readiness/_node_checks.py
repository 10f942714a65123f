# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Profile ``node``: the node checks LBNL NHC users rely on (``check_fs_mount_rw``, ``check_fs_free``,
``check_ps_service``, ``check_hw_cpuinfo``, ``check_hw_physmem``, ``check_hw_ib``), over the ``node``, ``disks`` and
``memory`` facts. Registered in ``_policy.CHECKS``; each returns None when its options ask for nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import printable, result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import option as _option

PROFILE = "node"
IB_ACTIVE = 4   # /sys/class/infiniband/*/ports/*/state "4: ACTIVE"
IB_LINK_UP = 5  # phys_state "5: LinkUp"


def _node(facts, name, expected):
    node = facts.get("node")
    if not node or "errors" not in node:
        return None, unknown(name, expected, "node facts were not gathered", PROFILE)
    return node, None


def _path_problems(path, entry, must_be_mount, min_free):
    """What is wrong with one path's disks facts (``[]``: nothing), and whether it could not be measured."""
    if entry is None:
        return ["%s was not measured" % path], True
    if entry.get("free_bytes") is None:
        return ["%s: %s" % (path, entry.get("error") or "statvfs failed")], True
    problems = []
    if must_be_mount and (not entry.get("exists") or entry.get("mount_point") != path):
        problems.append("%s is not mounted (it is %s on %s): mount it (check /etc/fstab, the automounter, the network "
                        "filesystem's client)" % (path, "part of the filesystem" if entry.get("exists") else "missing",
                                                  entry.get("mount_point")))
    if entry.get("read_only"):
        problems.append("%s is mounted read-only: remount it read-write, or find why the kernel made it read-only "
                        "(dmesg: filesystem errors)" % path)
    elif entry.get("writable") is False:
        problems.append("%s is not writable by the user the checks run as" % path)
    if min_free is not None and entry["free_bytes"] < min_free:
        problems.append("%s has %s free, %s needed: clean it (old jobs' files, caches)" % (
            path, human(entry["free_bytes"]), human(min_free)))
    return problems, False


def check_filesystems(facts, policy):
    name = "filesystems"
    mounts = list(_option(policy, "required_mounts") or ())
    scratch = [path for path in _option(policy, "scratch_paths") or () if path not in mounts]
    if not mounts and not scratch:
        return None
    min_free = parse_size(_option(policy, "min_free_scratch"))
    expected = "mounted read-write: %s; >= %s free: %s" % (
        ", ".join(mounts) or "-", human(min_free), ", ".join(mounts + scratch))
    disks = facts.get("disks")
    if not disks or "paths" not in disks:
        return unknown(name, expected, "disks facts were not gathered", PROFILE)
    problems, unknowns, observed = [], [], {}
    for path in mounts + scratch:
        entry = disks["paths"].get(path)
        found, unmeasured = _path_problems(path, entry, path in mounts, min_free)
        (unknowns if unmeasured else problems).extend(found)
        if entry and entry.get("free_bytes") is not None:
            observed[path] = {"free": human(entry["free_bytes"]), "mount_point": entry.get("mount_point"),
                              "read_only": entry.get("read_only")}
    if unknowns and not problems:
        return unknown(name, expected, "; ".join(unknowns), PROFILE)
    return result(name, not problems, observed, expected, "; ".join(problems + unknowns), PROFILE)


def check_services(facts, policy):
    name = "services"
    wanted = list(_option(policy, "required_services") or ())
    if not wanted:
        return None
    expected = "running: %s" % ", ".join(wanted)
    node, missing = _node(facts, name, expected)
    if missing:
        return missing
    services = node.get("services") or {}
    unread = [n for n in wanted if (services.get(n) or {}).get("running") is None]
    if unread:
        return unknown(name, expected, "the process table could not be read: %s" % "; ".join(node["errors"]), PROFILE)
    down = [n for n in wanted if not services[n]["running"]]
    observed = dict((n, services[n]["count"]) for n in wanted)
    message = ("not running: %s - start %s (systemctl start / the unit's logs say why it stopped)" % (
        ", ".join(printable(n) for n in down), "it" if len(down) == 1 else "them")) if down else ""
    return result(name, not down, observed, expected, message, PROFILE)


def check_cpu_topology(facts, policy):
    name = "cpu_topology"
    wanted = [(key, _option(policy, "expected_" + key)) for key in ("sockets", "cores", "threads")]
    wanted = [(key, value) for key, value in wanted if value]
    if not wanted:
        return None
    expected = ", ".join("%d %s" % (value, key) for key, value in wanted)
    node, missing = _node(facts, name, expected)
    if missing:
        return missing
    topology = node.get("cpu_topology")
    if not topology:
        return unknown(name, expected, "CPU topology could not be read: %s" % "; ".join(node["errors"]), PROFILE)
    wrong = ["%d %s online, %d expected" % (topology[key], key, value) for key, value in wanted if topology[key] != value]
    message = ("%s: a CPU offline (echo 1 > /sys/devices/system/cpu/cpuN/online), SMT switched in the BIOS, or a failed "
               "socket - compare with slurm.conf's Sockets/CoresPerSocket/ThreadsPerCore" % "; ".join(wrong)) if wrong else ""
    return result(name, not wrong, topology, expected, message, PROFILE)


def check_physical_memory(facts, policy):
    name = "physical_memory"
    wanted = _option(policy, "min_memory_total")
    if wanted is None:
        return None
    minimum = parse_size(wanted)
    expected = ">= %s installed" % human(minimum)
    host = (facts.get("memory") or {}).get("host") or {}
    total = host.get("total_bytes")
    if total is None:
        return unknown(name, expected, "the host's MemTotal could not be read", PROFILE)
    message = ("the node has %s of memory, %s expected: a DIMM failed or is not seated (dmidecode -t memory, the BMC's "
               "event log), or slurm.conf's RealMemory is wrong" % (human(total), human(minimum))) if total < minimum else ""
    return result(name, total >= minimum, human(total), expected, message, PROFILE)


def check_clock_sync(facts, policy):
    name = "clock_sync"
    if not _option(policy, "require_clock_sync"):
        return None
    expected = "synchronized (NTP/PTP)"
    node, missing = _node(facts, name, expected)
    if missing:
        return missing
    clock = node.get("clock") or {}
    if clock.get("synchronized") is None:
        return unknown(name, expected, "the clock state could not be read: %s" % "; ".join(node["errors"]), PROFILE)
    observed = "synchronized" if clock["synchronized"] else "not synchronized (max error %s s)" % clock.get("max_error_seconds")
    message = "" if clock["synchronized"] else (
        "the kernel's clock is not synchronized (adjtimex: max error %s s): start chronyd/ntpd/systemd-timesyncd "
        "(chronyc tracking says why); munge credentials and job timestamps need it" % clock.get("max_error_seconds"))
    return result(name, clock["synchronized"], observed, expected, message, PROFILE)


def check_ib_ports(facts, policy):
    name = "ib_ports"
    expected_ports = _option(policy, "expected_ib_ports")
    min_rate = _option(policy, "min_ib_rate")
    expected = "every port ACTIVE and LinkUp%s%s" % (
        ", >= %g Gb/s" % min_rate if min_rate else "", ", >= %d ports" % expected_ports if expected_ports else "")
    node, missing = _node(facts, name, expected)
    if missing:
        return missing
    infiniband = node.get("infiniband") or {}
    ports = infiniband.get("ports") or []
    if not infiniband.get("present") and not expected_ports:
        return skipped(name, "no InfiniBand/RoCE devices on this node (/sys/class/infiniband): nothing to check", PROFILE)
    problems = []
    for port in ports:
        where = "%s port %s" % (printable(str(port["device"])), port["port"])
        if port.get("state_code") != IB_ACTIVE or port.get("phys_state_code") != IB_LINK_UP:
            problems.append("%s is %s / %s: check the cable and the switch port, then the subnet manager (ibstat)" % (
                where, port.get("state_name"), port.get("phys_state_name")))
        elif min_rate and (port.get("rate_gbps") or 0) < min_rate:
            problems.append("%s runs at %s, %g Gb/s expected: a degraded link (reseat or replace the cable)" % (
                where, port.get("rate"), min_rate))
    if len(ports) < (expected_ports or 0):
        problems.append("%d InfiniBand/RoCE ports found, %d expected: a missing HCA or driver (lspci, ibstat)" % (
            len(ports), expected_ports))
    observed = ["%s/%s %s %s" % (p["device"], p["port"], p.get("state_name"), p.get("rate")) for p in ports]
    return result(name, not problems, observed, expected, "; ".join(problems), PROFILE)


def _port_counter_problems(port, max_downed, max_growth):
    """What one port's counter growth since the previous run says is wrong (``[]``: nothing)."""
    growth = port.get("counter_growth") or {}
    where = "%s port %s" % (printable(str(port["device"])), port["port"])
    problems = []
    if growth.get("link_downed", 0) > max_downed:
        problems.append("%s flapped: link_downed grew by %d (link down and up again): reseat or replace the cable and "
                        "check the switch port's counters (`perfquery`, the switch's log)" % (where, growth["link_downed"]))
    noisy = sorted((name, value) for name, value in growth.items() if name != "link_downed" and value > max_growth)
    if noisy:
        problems.append("%s error counters grew: %s: a marginal link (cable, transceiver, switch port); `ibqueryerrors`, "
                        "then reseat or replace the cable" % (where, ", ".join("%s +%d" % item for item in noisy)))
    return problems


def check_ib_counters(facts, policy):
    """InfiniBand error counters' growth since the previous run (link flaps: ``link_downed``), issue 37 item 2."""
    name = "ib_counters"
    if not _option(policy, "check_ib_counters"):
        return None
    max_downed, max_growth = _option(policy, "max_ib_link_downed"), _option(policy, "max_ib_error_growth")
    expected = "since the previous run: link_downed +<= %d, other error counters +<= %d per port" % (max_downed, max_growth)
    node, missing = _node(facts, name, expected)
    if missing:
        return missing
    infiniband = node.get("infiniband") or {}
    ports = [port for port in infiniband.get("ports") or [] if port.get("counters") is not None]
    if not infiniband.get("present"):
        return skipped(name, "no InfiniBand/RoCE devices on this node (/sys/class/infiniband): nothing to check", PROFILE)
    if not ports:
        return skipped(name, "no port exposes error counters (ports/<n>/counters)%s" % (
            ": " + "; ".join(node["errors"]) if node.get("errors") else ""), PROFILE)
    since = infiniband.get("counters_since_seconds")
    judged = [port for port in ports if port.get("counter_growth") is not None]
    if not judged:
        why = "a counter went down (reboot or reset)" if any(p.get("counters_reset") for p in ports) else "first run"
        return skipped(name, "%s: the counts are recorded (%s) as the baseline for the next run" % (
            why, infiniband.get("counters_state") or "no state file: growth cannot be judged"), PROFILE)
    problems = []
    for port in judged:
        problems.extend(_port_counter_problems(port, max_downed, max_growth))
    observed = dict(("%s/%s" % (p["device"], p["port"]), dict((k, v) for k, v in p["counter_growth"].items() if v))
                    for p in judged)
    message = "; ".join(problems)
    if message and since is not None:
        message += " (over the last %ds)" % since
    return result(name, not problems, observed, expected, message, PROFILE)
