# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ONE declaration of every readiness option and preflight role variable.

Everything else follows from ``OPTIONS``: the readiness action's argument spec (``argument_spec()``), the
checks' defaults (``default()``), and -- written by ``tests/tools/gen_preflight_options.py`` -- the doc
fragments ``readiness_options`` and ``node_facts_options``, ``roles/preflight/defaults/main.yml``
and ``roles/preflight/meta/argument_specs.yml`` (``roles/preflight/tasks/check.yml`` names no option: the action
reads each from its role variable, ``variable_prefix: preflight_``).
``tests/unit/plugins/module_utils/test_readiness_options.py`` fails when any of them drifts from this table.

Each entry: ``name`` (the action option; the role variable is ``preflight_<name>``), ``type``, ``default``,
``description`` (a list of sentences; ``O(x)`` names another option and becomes ``O(preflight_x)`` in the role),
optional ``elements``/``choices``, ``node`` (also a node_facts gathering option, documented in the
``node_facts_options`` fragment), ``action`` (an option of the readiness action; false for role-only
variables) and ``roles`` (the preflight role entry points that take it).

``check`` (every action option): what ``_policy_validation.validate_policy`` enforces beyond the type, read from here --
``min``/``max`` (``above``: strictly greater), with ``unit``/``what``/``why`` for the message, or a ``form``:
``size``, ``memory`` (a size or a fraction of the total), ``version`` (``empty``: '' allowed), ``arch``,
``compute_capability``, ``absolute_path``, ``path``, ``program_names``, ``process_names``, ``cgroup_names``,
``regexes``, ``xids``,
``custom_checks``, ``choices`` or ``bool`` (the type bounds it). A float is always refused when not finite.
Role-only variables (``action=False``) carry a ``check`` too; a form ``validate_policy`` does not know names the
plugin or task file that enforces it (``by``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import (
    FATAL_XIDS, MAX_GPU_TIMEOUT, MAX_KERNEL_EVENTS_WINDOW, MAX_WAIT_SECONDS)
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._node_options import CHECK, NODE_OPTIONS, count, flag
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._active_test_options import ACTIVE_TEST_OPTIONS

# A node-side time limit, in seconds, gathered by node_facts too: four rows of one shape, each bounded for one reason.
_SLURM_LIMIT = "Slurm kills a HealthCheckProgram at 60 s"
_HUNG_DRIVER = "a hung driver needs a deadline"


def node_seconds(name, most, why, default, description):
    return dict(name=name, check=dict(above=0, max=most, unit="seconds", why=why), type="float", default=default, roles=CHECK, node=True,
                description=description)


# A role variable of the publish step that another plugin or task file checks (``by``), not the readiness action.
def published(name, type_, default, form, by, description):
    return dict(name=name, check=dict(form=form, by=by), type=type_, default=default, roles=("main", "publish"), action=False,
                description=description)


OPTIONS = (
    # ---------------------------------------------------------------- memory and build processes (always)
    dict(name="min_available_memory", check=dict(form="memory"), type="raw", default="8GiB", roles=CHECK, description=[
        "Minimum B(effective) available memory (the tighter of the host's and the memory cgroup's).",
        "A size in binary units such as V(64GiB), V(512MiB) or V(64G) (all powers of 1024), a number of bytes, or a "
        "fraction of the effective total such as V(0.8). Decimal units such as V(64GB) are refused as ambiguous.",
    ]),
    count("max_build_processes", 100000, 0, [
        "Most build processes (matched by executable name) allowed to be running. Must be 0 or more.",
    ]),
    dict(name="max_memory_pressure", check=dict(min=0, max=100, what="a PSI percentage"), type="float", default=10.0, roles=CHECK, description=[
        "Highest PSI C(some avg10) of C(/proc/pressure/memory), in percent (0 to 100). V(null) disables the check.",
    ]),
    dict(name="build_process_names", check=dict(form="program_names"), type="list", elements="str", default=[], roles=CHECK, node=True, description=[
        "Executable names to count as build processes B(in addition to) the defaults (cmake, ninja, make, gmake, cc1, "
        "cc1plus, cicc, ptxas, nvcc, nvlink, fatbinary, cudafe++, collect2, ld and ld.* linkers). Shell globs allowed.",
    ]),
    dict(name="build_process_patterns", check=dict(form="regexes"), type="list", elements="str", default=[], roles=CHECK, node=True, description=[
        "Python regular expressions matched against the whole command line of a process; a match counts it as a build "
        "process too (for example a wrapper script).",
    ]),
    dict(name="profiles", check=dict(form="choices"),
         type="list", elements="str", choices=["build", "gpu", "node"], default=["build", "gpu"], roles=CHECK, description=[
        "Which groups of checks apply. V(build) is a node that compiles (toolchain, disk, recent OOM kills), "
        "V(gpu) a node that will serve (GPU count, compute capability, ECC, row remaps, Xid errors, compute apps, "
        "driver), V(node) the node around them as LBNL NHC checks it (filesystems, services, CPUs, installed "
        "memory, clock, InfiniBand).",
        "Memory and build-process checks always apply.",
    ]),
    # ---------------------------------------------------------------- profile gpu
    count("expected_gpus", 1024, 8, [
        "How many GPUs nvidia-smi must report (gpu profile).",
    ]),
    dict(name="compute_capability", check=dict(form="compute_capability"), type="str", default="12.0", roles=CHECK, description=[
        "The compute capability every GPU must have, like V(12.0) for Blackwell SM120 or V(10.0) for B200 (gpu profile).",
    ]),
    count("max_ecc_errors", 2 ** 31 - 1, 0, [
        "Most uncorrected ECC errors a GPU may have reported (gpu profile).",
    ]),
    dict(name="fatal_xids", check=dict(form="xids"), type="list", elements="int", default=sorted(FATAL_XIDS), roles=CHECK, description=[
        "NVIDIA Xid error codes that make a GPU unusable until it is reset (gpu profile); any of them within "
        "O(kernel_events_window) fails the node.",
    ]),
    flag("allow_gpu_compute_apps", False, [
        "Whether processes may already be running on the GPUs (gpu profile).",
    ]),
    dict(name="allowed_gpu_compute_apps", check=dict(form="process_names"), type="list", elements="str", default=[], roles=CHECK, description=[
        "Names (or paths) of GPU processes that do not count as the GPUs being in use, like V(dcgm-exporter) "
        "(gpu profile).",
    ]),
    dict(name="min_driver_version", check=dict(form="version", what="a driver version like 570.86.15 (unset: derived from nvcc)"),
         type="str", default=None, roles=CHECK, description=[
        "Lowest acceptable NVIDIA driver version, like V(570.86.15) (gpu profile).",
        "Unset: the oldest driver that runs what this node's nvcc builds (from the CUDA release notes).",
    ]),
    # ---------------------------------------------------------------- profile gpu: node health (issue 30)
    dict(name="min_pcie_gen", check=dict(min=1, max=6, what="a PCIe generation (1 to 6)"), type="int", default=None, roles=CHECK,
         description=[
        "The PCIe generation every GPU's link must be able to reach (its C(pcie.link.gen.max): the lower of what the "
        "GPU and the slot support), like V(5) for H100/B200 in a Gen5 slot (gpu profile). Unset: not compared.",
        "Independently, a GPU that is busy (utilization above 0, not idle) whose link runs below its own maximum "
        "generation or width fails: links train down at idle, so an idle GPU is never judged on its current link.",
    ]),
    dict(name="min_pcie_width", check=dict(min=1, max=32, what="a PCIe link width (1 to 32 lanes)"), type="int", default=None,
         roles=CHECK, description=[
        "The PCIe link width every GPU must be able to reach (C(pcie.link.width.max)), like V(16) (gpu profile). "
        "Unset: not compared.",
    ]),
    dict(name="max_gpu_temperature", check=dict(min=0, max=150, unit="degrees C"), type="int", default=85, roles=CHECK,
         description=[
        "The hottest a GPU may be, in degrees Celsius (C(temperature.gpu)) (gpu profile). V(null) disables the check.",
    ]),
    dict(name="bad_clock_event_reasons", check=dict(form="choices"), type="list", elements="str",
         choices=["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown", "sw_power_cap",
                  "sync_boost", "applications_clocks_setting", "display_clock_setting", "gpu_idle"],
         default=["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"], roles=CHECK,
         description=[
        "Clock-event (throttle) reasons that mean trouble when active on a GPU (gpu profile): hardware slowdown, "
        "thermal or power-brake slowdown and software thermal slowdown by default. C(gpu_idle), "
        "C(applications_clocks_setting) and C(sw_power_cap) (the board at its power limit under load) are benign "
        "and left out. An empty list disables the check.",
    ]),
    flag("require_persistence_mode", True, [
        "Whether every GPU must have persistence mode on (C(nvidia-persistenced) or C(nvidia-smi -pm 1)); without it "
        "the driver tears down and re-initialises the GPUs between jobs (gpu profile).",
    ]),
    dict(name="mig_mode", check=dict(form="choices"), type="str", choices=["any", "disabled", "enabled"], default="disabled",
         roles=CHECK, description=[
        "The MIG mode every MIG-capable GPU must be in (gpu profile): V(disabled) for whole-GPU jobs and builds' GPU "
        "tests, V(enabled) for MIG partitions, V(any) to not check. GPUs without MIG (C([N/A])) pass.",
    ]),
    flag("check_nvlink", False, [
        "Whether to check NVLink: every link up (C(nvidia-smi nvlink -s)) and error counters at most "
        "O(max_nvlink_errors) (C(nvidia-smi nvlink -e)), per GPU and link (gpu profile). Two extra nvidia-smi "
        "probes, run only when this is on. A board without NVLink (PCIe) is reported as not applicable.",
    ]),
    count("max_nvlink_errors", 2 ** 63 - 1, 0, [
        "Most errors (replay, recovery, CRC) any one NVLink link may have counted since the driver loaded "
        "(gpu profile, with O(check_nvlink)).",
    ]),
    flag("check_fabric", False, [
        "Whether the NVSwitch fabric must be up: every GPU's C(nvidia-smi -q) Fabric State C(Completed) with Status "
        "C(Success) (gpu profile). C(In Progress) or C(Not Started) means Fabric Manager (and NVLSM on B200 and later) "
        "is not running or has not registered the GPU. PCIe boards report N/A: not applicable, said so. "
        "One C(nvidia-smi -q) probe, run only when this or O(check_gpu_recovery) is on.",
    ]),
    flag("check_gpu_recovery", False, [
        "Whether a GPU the driver says needs a reset fails the node (gpu profile): C(nvidia-smi -q) GPU Reset Status "
        "(Reset Required, Drain and Reset Recommended; deprecated from driver 570) and GPU Recovery Action "
        "(driver 570 and later: C(Reset), C(Reboot), C(Drain P2P), C(Drain and Reset)).",
    ]),
    dict(name="xid_fail_actions", check=dict(form="choices"), type="list", elements="str",
         choices=["reset_gpu", "reboot", "contact_support", "restart_app", "check_mechanicals", "nvlink", "restart_vm",
                  "check_uvm", "power_smoothing"],
         default=["reset_gpu", "reboot", "contact_support", "check_mechanicals", "nvlink", "restart_vm", "check_uvm"],
         roles=CHECK, description=[
        "The Xid classes that fail the node, by the immediate action NVIDIA's Xid catalogue (r590) gives each code (gpu "
        "profile): V(reset_gpu), V(reboot) (the node), V(contact_support) (hardware), V(check_mechanicals) (power "
        "cables, Xid 54), V(nvlink) (Xid 74 and the NVLink5 Xids 144-150 when their message says Fatal), V(restart_vm) "
        "(Xid 151), V(check_uvm) (Xid 159), V(restart_app) (the application's own error) and V(power_smoothing) (Xids "
        "163-165); the last two are left out by default. Xid 154 takes the class of the recovery action its message "
        "names (GPU Reset Required, Node Reboot Required, Drain and Reset...). Codes in O(fatal_xids) fail whatever "
        "their class.",
    ]),
    flag("check_sxid", True, [
        "Whether NVSwitch errors in the kernel log (C(nvidia-nvswitchN: SXid ...) lines, read with the Xids) fail the "
        "node (gpu profile): a fatal SXid within O(kernel_events_window) does.",
    ]),
    flag("sxid_fail_nonfatal", False, [
        "Whether a non-fatal SXid fails the node too (O(check_sxid)).",
    ]),
    flag("check_dcgm_diag", False, [
        "Whether to run DCGM's quick diagnostic C(dcgmi diag -r 1) (seconds; needs C(nv-hostengine)) and fail on a test "
        "it fails (gpu profile). It never runs while a process uses the GPUs (reported as not run); where C(dcgmi) is "
        "not installed the check is not applicable.",
    ]),
    node_seconds("dcgm_diag_timeout", 50, _SLURM_LIMIT, 20, [
        "Seconds C(dcgmi diag -r 1) may take (with the readiness option C(check_dcgm_diag)); it runs after the other probes, so a node "
        "answers within O(gpu_timeout) + O(gpu_probe_budget) + this (45 s with the defaults).",
    ]),
    node_seconds("gpu_probe_timeout", MAX_GPU_TIMEOUT, _HUNG_DRIVER, 5, [
        "Seconds each extra nvidia-smi probe (C(nvlink -s), C(nvlink -e), C(-q)) may take before it is killed and "
        "reported as timed out, naming the probe.",
    ]),
    node_seconds("gpu_probe_budget", 50, _SLURM_LIMIT, 15, [
        "Seconds all extra nvidia-smi probes together may take, after the device query (at most O(gpu_timeout)); they "
        "run side by side. With the defaults a node answers within 25 s, inside Slurm's 60 s HealthCheckProgram limit.",
    ]),
    flag("gpu_probe_timeout_fails", False, [
        "Whether a probe that timed out makes its check unknown (the node not ready). By default it is reported "
        "(the probe named, the state unknown) but not counted against the node: a slow nvidia-smi is not a fault.",
    ]),
    # ---------------------------------------------------------------- profile build
    dict(name="nvcc_arch", check=dict(form="arch"), type="str", default="sm_120a", roles=CHECK, description=[
        "The GPU architecture nvcc must be able to compile for, like V(sm_120a) or V(compute_120) (build profile). "
        "sm_120 needs CUDA 12.8 or later.",
    ]),
    dict(name="cmake_min_version", check=dict(form="version", what="a version like 3.18"), type="str", default="3.18", roles=CHECK, description=[
        "Lowest CMake version accepted (build profile).",
    ]),
    dict(name="cmake_max_version", check=dict(form="version", what="a version like 4.2 (unset: no limit)"),
         type="str", default=None, roles=CHECK, description=[
        "Newest CMake version accepted, compared at the precision it is written in (V(4.2) accepts 4.2.3) "
        "(build profile). Unset: no limit.",
    ]),
    dict(name="cmake_policy_version_minimum", check=dict(form="version", empty=True, what="a version like 3.5 (empty: not set)"),
         type="str", default="3.5", roles=CHECK, description=[
        "The C(CMAKE_POLICY_VERSION_MINIMUM) the build sets for CMake 4 or later, which refuses dependencies declaring "
        "C(cmake_minimum_required) below 3.5 (build profile). Empty: CMake 4 or later fails the check.",
    ]),
    flag("require_numa", True, [
        "Whether numa.h and a linkable libnuma must be installed (build profile; mscclpp needs them).",
    ]),
    flag("require_cuda_libraries", False, [
        "Whether nvrtc, cuBLAS, cuBLASLt and libcuda (driver or the toolkit's link stub) must be there to link against, "
        "from the CUDA toolkit or torch's nvidia pip packages (build profile). Set it on nodes that build sgl-kernel.",
        "With O(toolchain_python) set, the build profile also checks that its torch's CUDA major matches nvcc's.",
    ]),
    dict(name="build_path", check=dict(form="absolute_path"), type="path", default="/tmp", roles=CHECK, description=[
        "The build directory whose filesystem must have room (build profile). An absolute path on the node.",
    ]),
    dict(name="min_free_disk", check=dict(form="size"), type="raw", default="20GiB", roles=CHECK, description=[
        "Minimum free space on O(build_path), a size in binary units like V(50GiB) or a number of bytes "
        "(build profile).",
    ]),
    count("min_free_inodes", 2 ** 63 - 1, 100000, [
        "Minimum free inodes on O(build_path) (build profile).",
    ]),
    dict(name="oom_window_minutes", check=dict(min=0, max=366 * 24 * 60, unit="minutes"), type="int", default=60, roles=CHECK, description=[
        "No OOM kill in this node's memory cgroup (or a global one) may have happened within this many minutes "
        "(build profile). V(0) disables the check.",
        "Kills by the limit of a M(gpufleet.preflight.guarded_build) cgroup are reported but pass; that build "
        "backed off and resumed by itself.",
    ]),
    dict(name="oom_ignore_cgroups", check=dict(form="cgroup_names"), type="list", elements="str", default=["gpufleet-test-*"], roles=CHECK,
         description=[
        "Names (shell globs) of cgroups below this node's memory cgroup whose OOM kills are not this node's: "
        "another tenant under its own limit, a sandbox. A kill in any cgroup of its path below the node's own "
        "that matches is reported by name and passes; a global OOM, or one at the node's own cgroup (the "
        "build's container), always counts.",
        "The default leaves out the cgroups this collection's test suite makes its deliberate OOM kills in "
        "(C(gpufleet-test-*)), so a check right after C(make test) on the same machine is not held back by them.",
    ]),
) + NODE_OPTIONS + ACTIVE_TEST_OPTIONS + (
    # ---------------------------------------------------------------- custom, gathering, waiting
    dict(name="custom_checks", check=dict(form="custom_checks"), type="list", elements="dict", default=[], roles=CHECK, description=[
        "Extra checks as JMESPath expressions over the gathered facts (keys without the C(gpufleet_) prefix, "
        "for example C(gpus.devices[?temperature > `85`] | length(@))), evaluated on the controller.",
        "Each is a dict with C(name), C(query), one of C(equals), C(max) or C(min), and an optional C(message).",
        "The subsets an expression reads are found from its parsed form; when that is unclear (C(@) at the top) "
        "every subset is gathered.",
        "An expression that selects nothing fails the check as unknown, with the expression in the message.",
    ]),
    node_seconds("gpu_timeout", MAX_GPU_TIMEOUT, _HUNG_DRIVER, 10, [
        "Seconds to wait for C(nvidia-smi) before reporting the GPUs as timed out; a wedged driver makes it hang. "
        "Must be a finite number greater than 0.",
    ]),
    dict(name="toolchain_python", check=dict(form="path"), type="path", default=None, roles=CHECK, node=True, description=[
        "The Python interpreter (for example a build venv's C(bin/python)) whose torch and scikit-build-core to inspect.",
        "Defaults to the Python that runs the module on the node (C(ansible_python_interpreter)), inspected in-process.",
    ]),
    dict(name="kernel_events_window", check=dict(min=1, max=int(MAX_KERNEL_EVENTS_WINDOW), unit="seconds"),
         type="int", default=86400, roles=CHECK, node=True, description=[
        "How far back, in seconds, to report OOM kills and GPU Xid errors from the kernel log.",
    ]),
    dict(name="wait", check=dict(min=0, max=MAX_WAIT_SECONDS, unit="seconds"), type="float", default=0, roles=CHECK, description=[
        "Seconds to keep re-checking a node that is not ready yet (processes still exiting after a restart, memory "
        "still being reclaimed). Each re-check is one round trip. V(0) checks once; at most V(86400) (a day).",
    ]),
    dict(name="interval", check=dict(min=0, max=MAX_WAIT_SECONDS, unit="seconds"), type="float", default=5, roles=CHECK, description=[
        "Seconds between re-checks while waiting.",
    ]),
    flag("full_facts", False, [
        "Also return, as facts, everything the node's check gathered (C(gpufleet_gpus), C(gpufleet_kernel_events), "
        "C(gpufleet_toolchain), C(gpufleet_disks), ...) and the checks and policy inside C(gpufleet_readiness). By "
        "default a node's result carries the facts the fleet reports, the Slurm and metrics publishers read "
        "(C(gpufleet_memory), C(gpufleet_build_processes)) and the verdict fact without its checks and policy (the "
        "result's own C(checks) and C(policy) have them): about 9 KB per node instead of 37 KB, which Ansible passes "
        "from worker to controller for every node.",
    ]),
    dict(name="unknown_variables", check=dict(form="choices"), type="str", choices=["warn", "fail", "ignore"], default="warn",
         roles=CHECK, description=[
        "With C(variable_prefix), what a variable of that prefix gets when its name is no option (a misspelling, "
        "which would otherwise be ignored with the default in force): V(warn) names it and the nearest option, "
        "V(fail) refuses the run with the same words, V(ignore) says nothing.",
    ], role_description=[
        "What a C(preflight_*) variable that is no option of this role gets (a misspelt "
        "C(preflight_min_avaliable_memory) would otherwise be ignored, the default in force): V(warn) names it and "
        "the nearest option name, V(fail) stops the run with the same words, V(ignore) says nothing.",
    ]),
    dict(name="fail_when_not_ready", check=dict(form="bool"), type="bool", default=True, roles=("main", "drop"), role_task=False, description=[
        "Fail the host when it is not ready. With V(false) the verdict is only returned and set as a fact.",
    ], role_description=[
        "Drop a node that is not ready from the rest of the run (fail it) instead of only recording the verdict.",
    ]),
    # ---------------------------------------------------------------- the drain circuit breaker (issue 38), every path that drains
    dict(name="drain_cap_nodes", check=dict(min=0, max=1000000, unit="nodes"), type="int", default=20,
         roles=("main", "check", "publish"), description=[
        "The most nodes of a partition this collection holds drained (its reason prefix, set within O(drain_cap_window)), "
        "counted from Slurm's own C(sinfo) by the node-local health check and the playbook alike; beyond it a node that "
        "is not ready is reported, counted in the metrics (C(gpufleet_preflight_drain_held_back)) and logged, not "
        "drained. The smaller of this and O(drain_cap_percent) applies. V(null): no count limit.",
    ]),
    dict(name="drain_cap_percent", check=dict(min=0, max=100, what="a percentage of the partition"), type="float",
         default=25, roles=("main", "check", "publish"), description=[
        "The most nodes drained by this collection as a percentage of the nodes sharing a partition with the node "
        "(rounded down, at least 1): 2 of 8 nodes, and with O(drain_cap_nodes) 20 of 1,000. V(null): no share limit.",
    ]),
    dict(name="drain_cap_window", check=dict(min=0, max=30 * 86400, unit="seconds"), type="int", default=3600,
         roles=("main", "check", "publish"), description=[
        "Which drains count: those Slurm says were set (its reason time) within this many seconds. V(0): every drain "
        "of ours held now, whatever its age.",
    ]),
    # ---------------------------------------------------------------- role only: the fleet report and gate
    dict(name="report_dir", check=dict(form="path", by="plugins/action/fleet_reports.py"),
         type="path", default=None, roles=("report",), action=False, description=[
        "Directory on the controller for C(preflight.json), C(preflight.xml) and C(preflight.md).",
        "Unset: C(reports) in the directory ansible-playbook runs in. A relative path is taken from there too.",
    ]),
    dict(name="html_template", check=dict(form="path", by="plugins/action/fleet_reports.py"),
         type="path", default=None, roles=("report",), action=False, description=[
        "A Jinja2 template of your own for C(preflight.html), rendered with autoescape on instead of the shipped "
        "C(gpufleet_preflight.html.j2). Its directory is searched first, so it can extend the shipped template and "
        "replace only the blocks it names. Unset: the shipped template.",
    ]),
    dict(name="write_reports", check=dict(form="bool"), type="bool", default=True, roles=("report",), action=False, description=[
        "Write the report files. With V(false) only the console table and the gate are produced.",
    ]),
    dict(name="max_not_ready", check=dict(form="count_or_percent", by="plugins/action/fleet_reports.py"),
         type="raw", default=None, roles=("report",), action=False, description=[
        "The most hosts of the play that may be not ready, as a count like V(2) or a percentage of the play's hosts "
        "like V(25%) (rounded down); unreachable hosts count as not ready.",
        "When more are not ready, every host of the play fails with the reason, so the plays after an "
        "C(import_playbook) of C(gpufleet.preflight.preflight) do not run at all. Unset: no limit.",
    ]),
    dict(name="gate", check=dict(form="gate", by="roles/preflight/tasks/drop.yml"),
         type="dict", default={"abort": False, "reason": None}, roles=("drop",), action=False, description=[
        "The fleet gate from M(gpufleet.preflight.fleet_reports) (C(abort), C(reason)); when it aborts, every "
        "node fails with its reason. Set by the C(report) entry point. C(abort) must be a boolean.",
    ]),
    dict(name="drop_mode", check=dict(form="choices"), type="str", choices=["fail", "end_host"], default="fail", roles=("main", "drop"), action=False,
         description=[
             "How a node that is not ready leaves the run; either way it is not in the group C(gpufleet_preflight_ready) "
             "the ready nodes join, which later plays target (C(playbooks/examples/gated_provisioning.yml)). V(fail) fails "
             "it: ansible-core keeps a failed host out of every later play, and C(ansible-playbook) exits 2 even when the "
             "fleet gate passed (a person at a terminal). V(end_host) ends the preflight play for it with a message "
             "(C(meta: end_host) ends the current play only), so a gate that passes exits 0 and only a gate that stops the "
             "run exits non-zero: what AWX workflows and CI pipelines expect; their later plays must target "
             "C(gpufleet_preflight_ready), as a play on C(all) would run the node again.",
    ]),
    # ---------------------------------------------------------------- role only: where the fleet runs (issue 19)
    dict(name="slurm", check=dict(form="bool"), type="bool", default=False, roles=("main", "publish"), action=False, description=[
        "Drain a node that is not ready in Slurm (C(scontrol update State=DRAIN Reason=\"<prefix> <check>: <message>\")) "
        "and resume a ready node this collection drained (M(gpufleet.preflight.slurm_node)). A drain by anyone else, "
        "or a node down, failing, in maintenance, rebooting or reserved, is left alone and reported.",
    ]),
    published("slurm_reason_prefix", "str", "gpufleet:", "reason_prefix", "plugins/modules/slurm_node.py", [
        "The first word of every drain reason this collection sets. A drain is resumed only when it is the very one "
        "recorded (reason text and slurmctld's time), never merely because its reason starts with this.",
    ]),
    dict(name="slurm_resume", check=dict(form="bool"), type="bool", default=True, roles=("main", "publish"),
         action=False, description=[
        "Resume a ready node whose drain this collection set. V(false): drain only, never resume (NHC's "
        "C(MARK_OFFLINE) without marking online): a person resumes it (C(scontrol update NodeName=<node> State=RESUME)).",
    ]),
    published("slurm_node_name", "str", None, "node_name", "plugins/modules/slurm_node.py", [
        "The node's name in Slurm: one node (C(gpu[1-8]), commas and C(ALL) are refused: Slurm reads them as several). "
        "Unset: the short hostname of the node (the inventory's short name with O(slurm_host)).",
    ]),
    published("slurm_host", "str", None, "inventory_host", "roles/preflight/tasks/publish.yml", [
        "An inventory host that runs C(sinfo)/C(scontrol) for every node (for example the Slurm controller). "
        "Unset: each node runs them itself (every Slurm node has them). Unreachable nodes are never drained.",
    ]),
    published("slurm_conf", "path", None, "path", "plugins/modules/slurm_node.py", [
        "The C(slurm.conf) for C(sinfo)/C(scontrol) (C(SLURM_CONF)). Unset: their own default.",
    ]),
    published("slurm_state_dir", "path", "/var/lib/gpufleet-preflight", "path", "plugins/modules/slurm_node.py", [
        "Where the host that runs C(scontrol) records the drains this collection set (C(slurm-<node>.json)). "
        "Share it with the C(gpufleet.preflight.health_check) role's C(health_check_slurm_state_dir) so either may "
        "resume the other's drain.",
    ]),
    published("bundle_dir", "path", None, "path", "plugins/modules/log_bundle.py", [
        "The remediation ladder's first step: a directory on the nodes where a node that is not ready keeps a log "
        "bundle (M(gpufleet.preflight.log_bundle): verdict, facts, the kernel's lines, GPU probes; the newest 10 "
        "kept). Check mode writes nothing. Unset: no bundle.",
    ]),
    published("metrics_dir", "path", None, "path", "plugins/modules/textfile_metrics.py", [
        "node_exporter's textfile directory on the nodes (C(--collector.textfile.directory)): each reachable node "
        "gets C(gpufleet_preflight_playbook.prom) there (M(gpufleet.preflight.textfile_metrics)). Unset: no metrics.",
    ]),
)

# The preflight role's entry points; their options are the OPTIONS naming them in ``roles``.
ENTRY_POINTS = (
    ("main", dict(short_description="Check a node and drop it from the run when it is not ready", description=[
        "Runs M(gpufleet.preflight.readiness) once per node and fails a node that is not ready, with a message that "
        "names each failed check.",
    ])),
    ("check", dict(short_description="Only check a node and record the verdict (preflight_result, fact gpufleet_readiness)",
                   description=[
                       "One M(gpufleet.preflight.readiness) round trip; the result is registered as C(preflight_result).",
                       "A ready node joins the group C(gpufleet_preflight_ready), the group later plays target: a node "
                       "that is not ready (or unreachable) is never in it, whatever C(preflight_drop_mode) says.",
                   ])),
    ("report", dict(short_description="Once, on the controller: the fleet's reports and the preflight_max_not_ready gate",
                    description=[
                        "Runs M(gpufleet.preflight.fleet_reports) once over every host of the play (their "
                        "C(preflight_result)), prints the console table and sets C(preflight_gate) for the C(drop) "
                        "entry point.",
                    ])),
    ("drop", dict(short_description="Fail a node whose recorded verdict is not ready, or every node when the fleet gate "
                                    "says stop",
                  description=[
                      "Fails this node when its C(preflight_result) is not ready (or it was unreachable), or every node "
                      "when C(preflight_gate) aborts.",
                      "The ready nodes are in the group C(gpufleet_preflight_ready) already (the C(check) entry point "
                      "put them there), the group later plays target: a node that is not ready is never in it.",
                  ])),
    ("publish", dict(short_description="Put the verdict where the fleet is run: Slurm drain/resume, node_exporter metrics",
                     description=[
                         "With C(preflight_slurm), drains a node that is not ready and resumes one this collection "
                         "drained; with C(preflight_metrics_dir), writes the verdict as node_exporter textfile metrics. "
                         "Runs after the C(report) entry point, before C(drop).",
                     ])),
)

BY_NAME = dict((entry["name"], entry) for entry in OPTIONS)

# The readiness action's options that are not policy (documented in plugins/modules/readiness.py, kept out of the
# result's policy): where the options a task leaves out come from, and the group a ready node joins.
TASK_SPEC = dict(variable_prefix=dict(type="str"), ready_group=dict(type="str"))

# The preflight role's and playbook's own variables that are no option (``unknown_variables`` knows them):
# preflight_hosts (playbooks/preflight.yml), preflight_result, preflight_slurm_result, preflight_bundle_result and
# preflight_left_out (registered), preflight_gate.
ROLE_VARIABLES = ("hosts", "result", "slurm_result", "bundle_result", "left_out", "gate")


def default(name):
    """The declared default of one option (a copy: callers may change lists)."""
    return copy.deepcopy(BY_NAME[name]["default"])


def defaults():
    """Every action option's default: a complete policy for the pure checks and their tests."""
    return dict((entry["name"], default(entry["name"])) for entry in OPTIONS if entry.get("action", True))


def argument_spec():
    """The readiness action's argument spec."""
    spec = {}
    for entry in OPTIONS:
        if not entry.get("action", True):
            continue
        option = dict(type=entry["type"])
        if entry.get("elements"):
            option["elements"] = entry["elements"]
        if entry.get("choices"):
            option["choices"] = list(entry["choices"])
        if entry["default"] is not None:
            option["default"] = default(entry["name"])
        spec[entry["name"]] = option
    return spec


def names_of_type(kind):
    """Action option names declared with this type (e.g. every float, to refuse NaN and infinity)."""
    return [entry["name"] for entry in OPTIONS if entry["type"] == kind and entry.get("action", True)]
