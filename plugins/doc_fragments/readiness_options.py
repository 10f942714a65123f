# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED from plugins/module_utils/_readiness/_readiness_options.py by tests/tools/gen_preflight_options.py: edit there.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The readiness policy's options (those that node_facts does not share)."""

    DOCUMENTATION = r"""
options:
  min_available_memory:
    description:
      - Minimum B(effective) available memory (the tighter of the host's and the memory cgroup's).
      - A size in binary units such as V(64GiB), V(512MiB) or V(64G) (all powers of 1024), a number of bytes, or a
        fraction of the effective total such as V(0.8). Decimal units such as V(64GB) are refused as ambiguous.
    type: raw
    default: 8GiB
  max_build_processes:
    description:
      - Most build processes (matched by executable name) allowed to be running. Must be 0 or more.
    type: int
    default: 0
  max_memory_pressure:
    description:
      - Highest PSI C(some avg10) of C(/proc/pressure/memory), in percent (0 to 100). V(null) disables the check.
    type: float
    default: 10.0
  profiles:
    description:
      - Which groups of checks apply. V(build) is a node that compiles (toolchain, disk, recent OOM kills), V(gpu)
        a node that will serve (GPU count, compute capability, ECC, row remaps, Xid errors, compute apps, driver),
        V(node) the node around them as LBNL NHC checks it (filesystems, services, CPUs, installed memory, clock,
        InfiniBand).
      - Memory and build-process checks always apply.
    type: list
    elements: str
    choices: [build, gpu, node]
    default: [build, gpu]
  expected_gpus:
    description:
      - How many GPUs nvidia-smi must report (gpu profile).
    type: int
    default: 8
  compute_capability:
    description:
      - The compute capability every GPU must have, like V(12.0) for Blackwell SM120 or V(10.0) for B200 (gpu profile).
    type: str
    default: '12.0'
  max_ecc_errors:
    description:
      - Most uncorrected ECC errors a GPU may have reported (gpu profile).
    type: int
    default: 0
  fatal_xids:
    description:
      - NVIDIA Xid error codes that make a GPU unusable until it is reset (gpu profile); any of them within O(kernel_events_window)
        fails the node.
    type: list
    elements: int
    default: [48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120]
  allow_gpu_compute_apps:
    description:
      - Whether processes may already be running on the GPUs (gpu profile).
    type: bool
    default: false
  allowed_gpu_compute_apps:
    description:
      - Names (or paths) of GPU processes that do not count as the GPUs being in use, like V(dcgm-exporter) (gpu profile).
    type: list
    elements: str
    default: []
  min_driver_version:
    description:
      - Lowest acceptable NVIDIA driver version, like V(570.86.15) (gpu profile).
      - 'Unset: the oldest driver that runs what this node''s nvcc builds (from the CUDA release notes).'
    type: str
  min_pcie_gen:
    description:
      - 'The PCIe generation every GPU''s link must be able to reach (its C(pcie.link.gen.max): the lower of what
        the GPU and the slot support), like V(5) for H100/B200 in a Gen5 slot (gpu profile). Unset: not compared.'
      - 'Independently, a GPU that is busy (utilization above 0, not idle) whose link runs below its own maximum generation
        or width fails: links train down at idle, so an idle GPU is never judged on its current link.'
    type: int
  min_pcie_width:
    description:
      - 'The PCIe link width every GPU must be able to reach (C(pcie.link.width.max)), like V(16) (gpu profile). Unset:
        not compared.'
    type: int
  max_gpu_temperature:
    description:
      - The hottest a GPU may be, in degrees Celsius (C(temperature.gpu)) (gpu profile). V(null) disables the check.
    type: int
    default: 85
  bad_clock_event_reasons:
    description:
      - 'Clock-event (throttle) reasons that mean trouble when active on a GPU (gpu profile): hardware slowdown, thermal
        or power-brake slowdown and software thermal slowdown by default. C(gpu_idle), C(applications_clocks_setting)
        and C(sw_power_cap) (the board at its power limit under load) are benign and left out. An empty list disables
        the check.'
    type: list
    elements: str
    choices:
      - hw_slowdown
      - hw_thermal_slowdown
      - hw_power_brake_slowdown
      - sw_thermal_slowdown
      - sw_power_cap
      - sync_boost
      - applications_clocks_setting
      - display_clock_setting
      - gpu_idle
    default:
      - hw_slowdown
      - hw_thermal_slowdown
      - hw_power_brake_slowdown
      - sw_thermal_slowdown
  require_persistence_mode:
    description:
      - Whether every GPU must have persistence mode on (C(nvidia-persistenced) or C(nvidia-smi -pm 1)); without it
        the driver tears down and re-initialises the GPUs between jobs (gpu profile).
    type: bool
    default: true
  mig_mode:
    description:
      - 'The MIG mode every MIG-capable GPU must be in (gpu profile): V(disabled) for whole-GPU jobs and builds''
        GPU tests, V(enabled) for MIG partitions, V(any) to not check. GPUs without MIG (C([N/A])) pass.'
    type: str
    choices: [any, disabled, enabled]
    default: disabled
  check_nvlink:
    description:
      - 'Whether to check NVLink: every link up (C(nvidia-smi nvlink -s)) and error counters at most O(max_nvlink_errors)
        (C(nvidia-smi nvlink -e)), per GPU and link (gpu profile). Two extra nvidia-smi probes, run only when this
        is on. A board without NVLink (PCIe) is reported as not applicable.'
    type: bool
    default: false
  max_nvlink_errors:
    description:
      - Most errors (replay, recovery, CRC) any one NVLink link may have counted since the driver loaded (gpu profile,
        with O(check_nvlink)).
    type: int
    default: 0
  check_fabric:
    description:
      - 'Whether the NVSwitch fabric must be up: every GPU''s C(nvidia-smi -q) Fabric State C(Completed) with Status
        C(Success) (gpu profile). C(In Progress) or C(Not Started) means Fabric Manager (and NVLSM on B200 and later)
        is not running or has not registered the GPU. PCIe boards report N/A: not applicable, said so. One C(nvidia-smi
        -q) probe, run only when this or O(check_gpu_recovery) is on.'
    type: bool
    default: false
  check_gpu_recovery:
    description:
      - 'Whether a GPU the driver says needs a reset fails the node (gpu profile): C(nvidia-smi -q) GPU Reset Status
        (Reset Required, Drain and Reset Recommended; deprecated from driver 570) and GPU Recovery Action (driver
        570 and later: C(Reset), C(Reboot), C(Drain P2P), C(Drain and Reset)).'
    type: bool
    default: false
  xid_fail_actions:
    description:
      - 'The Xid classes that fail the node, by the immediate action NVIDIA''s Xid catalogue (r590) gives each code
        (gpu profile): V(reset_gpu), V(reboot) (the node), V(contact_support) (hardware), V(check_mechanicals) (power
        cables, Xid 54), V(nvlink) (Xid 74 and the NVLink5 Xids 144-150 when their message says Fatal), V(restart_vm)
        (Xid 151), V(check_uvm) (Xid 159), V(restart_app) (the application''s own error) and V(power_smoothing) (Xids
        163-165); the last two are left out by default. Xid 154 takes the class of the recovery action its message
        names (GPU Reset Required, Node Reboot Required, Drain and Reset...). Codes in O(fatal_xids) fail whatever
        their class.'
    type: list
    elements: str
    choices:
      - reset_gpu
      - reboot
      - contact_support
      - restart_app
      - check_mechanicals
      - nvlink
      - restart_vm
      - check_uvm
      - power_smoothing
    default:
      - reset_gpu
      - reboot
      - contact_support
      - check_mechanicals
      - nvlink
      - restart_vm
      - check_uvm
  check_sxid:
    description:
      - 'Whether NVSwitch errors in the kernel log (C(nvidia-nvswitchN: SXid ...) lines, read with the Xids) fail
        the node (gpu profile): a fatal SXid within O(kernel_events_window) does.'
    type: bool
    default: true
  sxid_fail_nonfatal:
    description:
      - Whether a non-fatal SXid fails the node too (O(check_sxid)).
    type: bool
    default: false
  check_dcgm_diag:
    description:
      - Whether to run DCGM's quick diagnostic C(dcgmi diag -r 1) (seconds; needs C(nv-hostengine)) and fail on a
        test it fails (gpu profile). It never runs while a process uses the GPUs (reported as not run); where C(dcgmi)
        is not installed the check is not applicable.
    type: bool
    default: false
  gpu_probe_timeout_fails:
    description:
      - 'Whether a probe that timed out makes its check unknown (the node not ready). By default it is reported (the
        probe named, the state unknown) but not counted against the node: a slow nvidia-smi is not a fault.'
    type: bool
    default: false
  nvcc_arch:
    description:
      - The GPU architecture nvcc must be able to compile for, like V(sm_120a) or V(compute_120) (build profile).
        sm_120 needs CUDA 12.8 or later.
    type: str
    default: sm_120a
  cmake_min_version:
    description:
      - Lowest CMake version accepted (build profile).
    type: str
    default: '3.18'
  cmake_max_version:
    description:
      - 'Newest CMake version accepted, compared at the precision it is written in (V(4.2) accepts 4.2.3) (build profile).
        Unset: no limit.'
    type: str
  cmake_policy_version_minimum:
    description:
      - 'The C(CMAKE_POLICY_VERSION_MINIMUM) the build sets for CMake 4 or later, which refuses dependencies declaring
        C(cmake_minimum_required) below 3.5 (build profile). Empty: CMake 4 or later fails the check.'
    type: str
    default: '3.5'
  require_numa:
    description:
      - Whether numa.h and a linkable libnuma must be installed (build profile; mscclpp needs them).
    type: bool
    default: true
  require_cuda_libraries:
    description:
      - Whether nvrtc, cuBLAS, cuBLASLt and libcuda (driver or the toolkit's link stub) must be there to link against,
        from the CUDA toolkit or torch's nvidia pip packages (build profile). Set it on nodes that build sgl-kernel.
      - With O(toolchain_python) set, the build profile also checks that its torch's CUDA major matches nvcc's.
    type: bool
    default: false
  build_path:
    description:
      - The build directory whose filesystem must have room (build profile). An absolute path on the node.
    type: path
    default: /tmp
  min_free_disk:
    description:
      - Minimum free space on O(build_path), a size in binary units like V(50GiB) or a number of bytes (build profile).
    type: raw
    default: 20GiB
  min_free_inodes:
    description:
      - Minimum free inodes on O(build_path) (build profile).
    type: int
    default: 100000
  oom_window_minutes:
    description:
      - No OOM kill in this node's memory cgroup (or a global one) may have happened within this many minutes (build
        profile). V(0) disables the check.
      - Kills by the limit of a M(gpufleet.preflight.guarded_build) cgroup are reported but pass; that build backed
        off and resumed by itself.
    type: int
    default: 60
  oom_ignore_cgroups:
    description:
      - 'Names (shell globs) of cgroups below this node''s memory cgroup whose OOM kills are not this node''s: another
        tenant under its own limit, a sandbox. A kill in any cgroup of its path below the node''s own that matches
        is reported by name and passes; a global OOM, or one at the node''s own cgroup (the build''s container), always
        counts.'
      - The default leaves out the cgroups this collection's test suite makes its deliberate OOM kills in (C(gpufleet-test-*)),
        so a check right after C(make test) on the same machine is not held back by them.
    type: list
    elements: str
    default: [gpufleet-test-*]
  required_mounts:
    description:
      - Paths that must each be a mount point, mounted read-write, with O(min_free_scratch) free (node profile), for
        example a shared scratch or home filesystem.
    type: list
    elements: path
    default: []
  scratch_paths:
    description:
      - Paths that must be writable with O(min_free_scratch) free (node profile).
    type: list
    elements: path
    default: [/tmp]
  min_free_scratch:
    description:
      - Minimum free space on each of O(required_mounts) and O(scratch_paths) (node profile), a size in binary units.
    type: raw
    default: 1GiB
  required_services:
    description:
      - Executable names of daemons that must be running (node profile), for example C(sshd), C(munged), C(nvidia-persistenced),
        C(nv-fabricmanager), C(slurmd).
    type: list
    elements: str
    default: []
  expected_sockets:
    description:
      - CPU sockets that must be online (node profile); V(0) does not check.
    type: int
    default: 0
  expected_cores:
    description:
      - Physical CPU cores that must be online, all sockets together (node profile); V(0) does not check.
    type: int
    default: 0
  expected_threads:
    description:
      - Online CPUs (hardware threads) that must be present (node profile), as slurm.conf's CPUs; V(0) does not check.
    type: int
    default: 0
  min_memory_total:
    description:
      - 'Installed memory the node must have (C(MemTotal), node profile), as slurm.conf''s RealMemory; unset: not
        checked.'
    type: raw
  require_clock_sync:
    description:
      - The kernel's clock must be synchronised by NTP or PTP (node profile; read with C(adjtimex)).
    type: bool
    default: true
  expected_ib_ports:
    description:
      - 'InfiniBand/RoCE ports that must be present (node profile); every port found must be ACTIVE and LinkUp. V(0):
        a node without any passes.'
    type: int
    default: 0
  min_ib_rate:
    description:
      - Lowest rate every InfiniBand/RoCE port must run at, in Gb/s (node profile; V(400) for NDR); V(0) does not
        check.
    type: int
    default: 0
  check_ib_counters:
    description:
      - Whether to read each InfiniBand port's error counters (C(/sys/class/infiniband/<dev>/ports/<n>/counters))
        and judge their growth since the previous run (node profile; the counts are kept on the node beside the probe
        cache). The first run records a baseline; a counter that went down (reboot, reset) starts a new one.
    type: bool
    default: false
  max_ib_link_downed:
    description:
      - Most link flaps (growth of C(link_downed)) a port may show since the previous run (O(check_ib_counters)).
    type: int
    default: 0
  max_ib_error_growth:
    description:
      - Most growth of any other error counter (C(symbol_error), C(port_rcv_errors), C(link_error_recovery), C(local_link_integrity_errors)...)
        a port may show since the previous run (O(check_ib_counters)).
    type: int
    default: 0
  check_d_state:
    description:
      - 'Whether processes stuck in uninterruptible sleep (D state in two C(/proc) scans 0.5 s apart) fail the node
        (node profile): more than O(max_d_state_processes) of them.'
    type: bool
    default: false
  max_d_state_processes:
    description:
      - Most processes that may stay in D state (O(check_d_state)).
    type: int
    default: 0
  expected_cpu_governor:
    description:
      - The CPU frequency governor every CPU must run (C(cpufreq/scaling_governor), node profile), V(performance)
        on build and GPU nodes; V(any) does not check. A node without a cpufreq driver (a VM) is not judged.
    type: str
    choices: [any, performance, powersave, schedutil, ondemand, conservative, userspace]
    default: any
  check_nvme:
    description:
      - 'Whether NVMe health fails the node (node profile; C(nvme smart-log -o json), needs nvme-cli and root): a
        critical warning, spare below its threshold, 100% of rated life used, or more than O(max_nvme_media_errors)
        media errors. Without nvme-cli the check says so and passes.'
    type: bool
    default: false
  max_nvme_media_errors:
    description:
      - Most media and data integrity errors an NVMe controller may report (O(check_nvme)).
    type: int
    default: 0
  check_ipmi_sel:
    description:
      - 'Whether new entries in the BMC''s System Event Log since the previous run fail the node (node profile; C(ipmitool
        sel elist), root; the last entry id is kept beside the probe cache, the first run records it): more than O(max_sel_new_entries).
        Without ipmitool or a BMC the check says so and passes.'
    type: bool
    default: false
  max_sel_new_entries:
    description:
      - Most new SEL entries allowed since the previous run (O(check_ipmi_sel)).
    type: int
    default: 0
  check_sensors:
    description:
      - Whether a BMC sensor past its critical or non-recoverable threshold (C(ipmitool sensor) status C(cr), C(nr))
        fails the node (node profile). Without ipmitool or a BMC the check says so and passes.
    type: bool
    default: false
  custom_checks:
    description:
      - Extra checks as JMESPath expressions over the gathered facts (keys without the C(gpufleet_) prefix, for example
        C(gpus.devices[?temperature > `85`] | length(@))), evaluated on the controller.
      - Each is a dict with C(name), C(query), one of C(equals), C(max) or C(min), and an optional C(message).
      - The subsets an expression reads are found from its parsed form; when that is unclear (C(@) at the top) every
        subset is gathered.
      - An expression that selects nothing fails the check as unknown, with the expression in the message.
    type: list
    elements: dict
    default: []
  wait:
    description:
      - Seconds to keep re-checking a node that is not ready yet (processes still exiting after a restart, memory
        still being reclaimed). Each re-check is one round trip. V(0) checks once; at most V(86400) (a day).
    type: float
    default: 0
  interval:
    description:
      - Seconds between re-checks while waiting.
    type: float
    default: 5
  full_facts:
    description:
      - 'Also return, as facts, everything the node''s check gathered (C(gpufleet_gpus), C(gpufleet_kernel_events),
        C(gpufleet_toolchain), C(gpufleet_disks), ...) and the checks and policy inside C(gpufleet_readiness). By
        default a node''s result carries the facts the fleet reports, the Slurm and metrics publishers read (C(gpufleet_memory),
        C(gpufleet_build_processes)) and the verdict fact without its checks and policy (the result''s own C(checks)
        and C(policy) have them): about 9 KB per node instead of 37 KB, which Ansible passes from worker to controller
        for every node.'
    type: bool
    default: false
  unknown_variables:
    description:
      - 'With C(variable_prefix), what a variable of that prefix gets when its name is no option (a misspelling, which
        would otherwise be ignored with the default in force): V(warn) names it and the nearest option, V(fail) refuses
        the run with the same words, V(ignore) says nothing.'
    type: str
    choices: [warn, fail, ignore]
    default: warn
  fail_when_not_ready:
    description:
      - Fail the host when it is not ready. With V(false) the verdict is only returned and set as a fact.
    type: bool
    default: true
  drain_cap_nodes:
    description:
      - 'The most nodes of a partition this collection holds drained (its reason prefix, set within O(drain_cap_window)),
        counted from Slurm''s own C(sinfo) by the node-local health check and the playbook alike; beyond it a node
        that is not ready is reported, counted in the metrics (C(gpufleet_preflight_drain_held_back)) and logged,
        not drained. The smaller of this and O(drain_cap_percent) applies. V(null): no count limit.'
    type: int
    default: 20
  drain_cap_percent:
    description:
      - 'The most nodes drained by this collection as a percentage of the nodes sharing a partition with the node
        (rounded down, at least 1): 2 of 8 nodes, and with O(drain_cap_nodes) 20 of 1,000. V(null): no share limit.'
    type: float
    default: 25
  drain_cap_window:
    description:
      - 'Which drains count: those Slurm says were set (its reason time) within this many seconds. V(0): every drain
        of ours held now, whatever its age.'
    type: int
    default: 3600
"""
