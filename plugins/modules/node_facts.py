#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_facts
short_description: Memory, build-process, CPU, GPU, toolchain, disk and kernel-event facts of a CUDA build node
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Gathers what a person checks by hand before starting or resuming a heavy CUDA build, in one round trip,
    with the Python standard library only on the node.
  - Memory is reported the way C(free -h) shows it B(and) the way the node's memory cgroup (v1 or v2) limits it;
    the effective total and available memory are the tighter of the two, because C(free) inside a container shows
    the host's memory.
  - Build processes are matched by executable name, not by grepping command lines, and the module never counts
    its own process tree.
  - Facts are returned under C(ansible_facts.gpufleet_<subset>). The module changes nothing.
options:
  gather_subset:
    description:
      - Which subsets to gather, as in M(ansible.builtin.setup). V(all) gathers every subset;
        a name prefixed with C(!) excludes it (V(!gpus) alone means all but gpus).
      - Known subsets are V(memory), V(build_processes), V(cpus), V(node), V(gpus), V(toolchain), V(disks) and
        V(kernel_events).
    type: list
    elements: str
    default: [all]
  disk_paths:
    description:
      - Paths whose filesystem free space and inodes to report. Defaults to the temp dir and the user's cache dir.
      - Absolute paths (or starting with C(~)); a relative path is refused, naming this option.
    type: list
    elements: path
    default: []
  service_names:
    description:
      - Executable names of daemons whose running processes the V(node) subset counts (C(sshd), C(munged),
        C(nvidia-persistenced)); matched like build processes, by executable name.
    type: list
    elements: str
    default: []
  dcgm_result_path:
    description:
      - With the V(gpus) subset, read the result the DCGM active test (C(dcgmi diag -r 2 -j) or deeper) kept at this
        path (C(verified_at), C(valid_until), the tests) as C(gpufleet_gpus.dcgm_result); the diagnostic is not run.
    type: path
  bandwidth_result_paths:
    description:
      - With the V(gpus) subset, read the results the bandwidth active tests kept, by test (C(nvbandwidth),
        C(nccl_all_reduce)) -> path, as C(gpufleet_gpus.bandwidth_results); no test is run.
    type: dict
    default: {}
  ib_counters:
    description:
      - With the V(node) subset, read each InfiniBand port's error counters (C(symbol_error), C(link_downed),
        C(port_rcv_errors)...) and their growth since the previous run, whose counts are kept beside the probe cache
        (not written in check mode).
    type: bool
    default: false
  node_hardware:
    description:
      - With the V(node) subset, the node hardware parts to read, each within the run's deadline and said absent
        where the node cannot answer; none by default. V(d_state) (processes in D state in two C(/proc) scans 0.5 s
        apart), V(cpu_governor) (C(cpufreq/scaling_governor) of each CPU), V(nvme) (C(nvme smart-log -o json) per
        controller; absent without nvme-cli), V(ipmi_sel) (C(ipmitool sel elist), the entries since the previous run,
        whose last entry id is kept beside the probe cache), V(sensors) (C(ipmitool sensor), those past a threshold).
    type: list
    elements: str
    choices: [d_state, cpu_governor, nvme, ipmi_sel, sensors]
    default: []
  gpu_probes:
    description:
      - Extra nvidia-smi probes for the gpus subset, beyond its one C(--query-gpu) call, run side by side within
        O(gpu_probe_timeout) each and O(gpu_probe_budget) in all. A probe that times out is reported under
        C(gpufleet_gpus.probes) as C(timeout), naming its command.
      - V(nvlink_status) (C(nvidia-smi nvlink -s)), V(nvlink_errors) (C(nvidia-smi nvlink -e)), V(query)
        (C(nvidia-smi -q), for the Fabric state, GPU Reset Status and GPU Recovery Action), V(dcgm_diag) (C(dcgmi diag -r 1),
        after the others, within O(dcgm_diag_timeout), and never while a process uses the GPUs).
      - The readiness action asks for those its checks read (C(check_nvlink),
        C(check_fabric), C(check_gpu_recovery), C(check_dcgm_diag) of M(gpufleet.preflight.readiness)).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - gpufleet.preflight.node_facts_options
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.facts
attributes:
  check_mode:
    support: full
notes:
  - Run as root to see every process's executable and the kernel log; without it those facts are reported as unreadable.
  - 'The toolchain''s version probes (C(cmake --version), C(gcc --version), C(nvcc --list-gpu-arch), ...) are
    remembered in C($XDG_CACHE_HOME/gpufleet-preflight/node-facts-probes.json) (default C(~/.cache)) by the binary''s
    resolved path, device, inode, size and modification time, so an upgrade or another tool on C(PATH) is probed
    again; only answers with exit status 0 are kept, never C(nvidia-smi)''s (it reads the loaded driver). In check
    mode the file is read, not written. A cache file that is not one this module wrote is ignored.'
  - The toolchain probes took about 45 ms of CPU per node (C(cmake --version) alone 15 ms); from the cache, none.
seealso:
  - module: gpufleet.preflight.readiness
  - module: gpufleet.preflight.build_processes
"""

EXAMPLES = r"""
- name: Gather memory and build-process facts only
  gpufleet.preflight.node_facts:
    gather_subset: [memory, build_processes]

- name: Everything but the GPUs
  gpufleet.preflight.node_facts:
    gather_subset: ['!gpus']

- name: Show the memory a build can really use
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpufleet_memory.effective.available_human }} of {{ ansible_facts.gpufleet_memory.effective.total_human }}"
"""

RETURN = r"""
ansible_facts:
  description: The gathered subsets, each under its own key.
  returned: always
  type: dict
  contains:
    gpufleet_memory:
      description:
        - Host view (every field of C(free -h)), cgroup view (limit, usage, reclaimable, OOM counter),
          effective total and available, PSI pressure, OOM-kill counters and NUMA nodes.
        - C(cgroup.limit_path) names the cgroup whose limit binds (the node's memory domain, whose OOM kills are
          its own); C(host_pid_namespace) is V(true) where the host's kernel threads are visible (the node is the
          whole machine, not a container on it).
      returned: when the memory subset is gathered
      type: dict
      sample:
        effective: {total_bytes: 2147483648, total_human: 2.0Gi, available_bytes: 2040000000, available_human: 1.9Gi, limited_by: cgroup}
    gpufleet_build_processes:
      description: Build processes by executable name, with pid, ppid, user, state, age, RSS, orphaned and zombie flags.
      returned: when the build_processes subset is gathered
      type: dict
      sample: {count: 1, by_name: {ninja: 1}, processes: [{pid: 115, name: ninja, orphaned: true, zombie: false}]}
    gpufleet_cpus:
      description: Online CPUs, the scheduler affinity and the cgroup CPU quota, and the usable count.
      returned: when the cpus subset is gathered
      type: dict
    gpufleet_node:
      description:
        - The node around the GPUs, as LBNL NHC checks it; C(services) (each of O(service_names) with C(running),
          C(count), C(pids)), C(cpu_topology) (C(sockets), C(cores), C(threads) online), C(infiniband) (C(present),
          C(ports) with C(device), C(port), C(state_name), C(phys_state_name), C(rate_gbps), C(link_layer)), C(clock)
          (C(synchronized), C(max_error_seconds), read with adjtimex), C(errors).
      returned: when the node subset is gathered
      type: dict
    gpufleet_gpus:
      description: Devices reported by nvidia-smi, or why there are none (C(present=false), C(state)).
      returned: when the gpus subset is gathered
      type: dict
    gpufleet_toolchain:
      description: cmake, ninja, nvcc and its GPU architectures, gcc, python, torch, scikit-build-core, numa.h, ccache, git.
      returned: when the toolchain subset is gathered
      type: dict
    gpufleet_disks:
      description: Free bytes and inodes, filesystem type, mount point and writability of each path asked for.
      returned: when the disks subset is gathered
      type: dict
    gpufleet_kernel_events:
      description: Recent OOM kills, GPU Xid and NVSwitch SXid errors from the kernel log, and which log was readable.
      returned: when the kernel_events subset is gathered
      type: dict
      contains:
        source:
          description: The log read (V(kmsg), V(dmesg) or V(journal)), or null when none was readable.
          type: str
        readable:
          description: Whether any kernel log could be read; V(false) makes the checks that need it C(unknown).
          type: bool
        message:
          description: What was read and found, or why no log was readable.
          type: str
        oom_kills:
          description: OOM kills within the window, oldest first.
          type: list
          elements: dict
          contains:
            pid:
              description: The killed process.
              type: int
            process:
              description: Its name.
              type: str
            age_seconds:
              description: Seconds since the kill.
              type: float
            global:
              description: V(true) for a whole-node OOM, V(false) for a memory cgroup's limit, null when the line does not say.
              type: bool
            cgroup:
              description: The victim's memory cgroup.
              type: str
            oom_cgroup:
              description: The memory cgroup whose limit was hit.
              type: str
            cgroup_inferred:
              description:
                - V(true) when the kernel logged this kill without its C(oom-kill:) header (it prints that at most
                  10 times per 5 s) and the cgroups were taken from the header of the same burst.
              type: bool
        xids:
          description: GPU Xid errors within the window, with their PCI device, code and whether the code is fatal.
          type: list
          elements: dict
        sxids:
          description:
            - NVSwitch SXid errors within the window (the kernel's C(nvidia-nvswitchN) C(SXid) lines), with the switch's
              device name, PCI address, code, C(fatal) (null when the line says neither Fatal nor Non-fatal) and message.
          type: list
          elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._node_facts import (
    SUBSETS,
    gather,
    validate_options,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._probe_cache import CachedRun, user_cache_path
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import relaxed_spec

ARGUMENT_SPEC = dict(
    gather_subset=dict(type="list", elements="str", default=["all"]),
    build_process_names=dict(type="list", elements="str", default=[]),
    build_process_patterns=dict(type="list", elements="str", default=[]),
    gpu_timeout=dict(type="float", default=10),
    gpu_probes=dict(type="list", elements="str", default=[]),
    gpu_probe_timeout=dict(type="float", default=5),
    gpu_probe_budget=dict(type="float", default=15),
    dcgm_diag_timeout=dict(type="float", default=20),
    disk_paths=dict(type="list", elements="path", default=[]),
    service_names=dict(type="list", elements="str", default=[]),
    ib_counters=dict(type="bool", default=False),
    dcgm_result_path=dict(type="path"),
    bandwidth_result_paths=dict(type="dict", default={}),
    node_hardware=dict(type="list", elements="str", default=[], choices=["d_state", "cpu_governor", "nvme", "ipmi_sel",
                                                                                    "sensors"]),
    toolchain_python=dict(type="path"),
    kernel_events_window=dict(type="int", default=86400),
)


def main():
    try:
        module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    except OverflowError:
        # kernel_events_window=inf: ansible-core's int check overflows; validate_options names the option
        module = AnsibleModule(argument_spec=relaxed_spec(ARGUMENT_SPEC), supports_check_mode=True)
    error = None
    try:
        options = validate_options(module.params, SUBSETS)
        options["check_mode"] = module.check_mode
        # A collector raises ValueError only for an option it was given (a pattern that never finishes matching).
        # cmake, gcc, nvcc --list-gpu-arch...: answered from the cache while the binary is the same one.
        probes = CachedRun(run_with_timeout, user_cache_path())
        facts = gather(options, probes)
    except ValueError as exc:
        error = str(exc)
    if error is not None:  # failed outside the except block: a handled error carries no traceback
        module.fail_json(msg=error)
    if not module.check_mode:
        probes.save(make_dir=True)
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
