#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: guarded_build
short_description: Run a CUDA build in its own memory cgroup, backing off when it is OOM-killed
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Runs a build command (C(pip wheel), C(cmake --build), C(make) ...) in O(chdir), confined so that an OOM kills a
    compiler of the build and not the node, its sshd or other work. O(confinement) chooses how; with C(auto) the first
    that works here of a transient systemd scope (C(systemd-run --scope -p MemoryMax=... -p MemorySwapMax=0)), a child
    memory cgroup made through cgroupfs, and a watchdog that stops the build's own process group when the node's
    memory runs low. The result's RV(confinement) says which ran and why each earlier one could not.
  - Sizes the build through its environment - C(CMAKE_BUILD_PARALLEL_LEVEL), C(MAX_JOBS), C(NVCC_THREADS),
    C(CMAKE_ARGS) with C(-DSGL_KERNEL_COMPILE_THREADS=<nvcc_threads>) appended, C(CMAKE_POLICY_VERSION_MINIMUM),
    C(CCACHE_DIR), C(TORCH_CUDA_ARCH_LIST).
  - Detects an OOM kill (the cgroup's C(oom_kill) counter, exit status 137, the kernel log when readable, a watchdog
    stop) and resumes in the same build directory with the jobs halved, up to O(max_attempts); fails clearly when one
    job still does not fit.
  - Holds a lock per build directory (an C(flock) in C(/run/gpufleet-build), keyed by the build directory's parent (device and
    inode) and name, so every spelling of it is one build and removing it does not free the lock; the build never inherits it); a second build there is refused
    naming the holder (module pid, run id, since when). The build runs under a holder process that ends it - and
    everything it started, also C(setsid) daemons and background jobs - when the attempt ends or the module dies
    (SIGKILL, the async limit, the OOM killer), under every O(confinement).
  - Writes a stamp of the source (git HEAD plus the content of modified and untracked files under O(source), or the
    content of every file without git), the toolchain (path, file and version of cc, c++, nvcc, cmake, ninja) and the
    configuration (not the job count), so an up-to-date build returns C(changed=false).
  - Writes a log file and a JSON status file (state, attempt, jobs, ninja's C([N/M]) progress, memory in use) that
    a poller can read while the module runs under C(async); it names its run (C(run_id), C(module_pid),
    C(module_start_time)) and is written as soon as the lock is taken. A status still saying C(running) whose module
    no longer runs is abandoned; the next run reports it as RV(stale_status).
  - State files are opened without following symlinks and made mode 0600; a build directory (or log or status
    directory) owned by another user, or writable by everyone without the sticky bit, is refused.
  - Always removes the cgroup it made; its name carries the run's module pid and start time, and another run removes
    it only once that module is gone.
notes:
  - Meant to run with C(async); the role P(gpufleet.preflight.sgl_kernel#role) polls it and prints the status file's progress.
  - Nothing the build starts outlives the attempt; a compiler-cache server started by the build is ended with it.
  - An up-to-date check reads the stamp only; delete the build directory or set O(force) to rebuild.
  - Without C(git) on the node the stamp hashes the content of the source tree.
  - Every command the module runs itself (C(git), C(--version) probes, C(systemd-run --version)) has a timeout.
seealso:
  - plugin: gpufleet.preflight.build_jobs
    plugin_type: filter
extends_documentation_fragment:
  - gpufleet.preflight.guarded_build_options
  - gpufleet.preflight.attributes.linux
attributes:
  check_mode:
    support: full
    details: Reports whether the build is up to date and what it would run, without running it.
  diff_mode:
    support: none
    details: Nothing to diff; the result lists attempts, artifacts and the log.
"""

EXAMPLES = r"""
- name: Build the sgl-kernel wheel with the planned parallelism, confined and OOM-safe
  gpufleet.preflight.guarded_build:
    argv: [/opt/build-venv/bin/python, -m, pip, wheel, ., --no-build-isolation, --no-deps, -v, -w, dist,
           -Cbuild-dir=build]
    chdir: /srv/sglang/sgl-kernel
    jobs: "{{ _plan.jobs }}"
    memory_limit: "{{ _plan.budget_bytes }}"
    nvcc_threads: 1
    cmake_policy_version_minimum: "3.5"
    cuda_arch_list: 12.0a
    artifacts: [dist/*.whl]
  async: 21600
  poll: 0
  register: _build_job

- name: A synthetic build that OOMs at -j8 in 400 MiB and finishes at -j2 (in a directory root owns, not /tmp)
  gpufleet.preflight.guarded_build:
    cmd: cmake -S . -B build -G Ninja && cmake --build build
    chdir: /srv/build/hungry
    jobs: 8
    memory_limit: 400MiB
    memory_per_thread: 150MiB

- name: Stop the build running in /srv/build/project (its owner ends it and marks the status stopped)
  gpufleet.preflight.guarded_build:
    chdir: /srv/build/project
    state: stopped

- name: In a container with a read-only /sys/fs/cgroup, the watchdog keeps 1 GiB free
  gpufleet.preflight.guarded_build:
    cmd: cmake --build build
    chdir: /srv/build/project
    confinement: watchdog
    reserve: 1GiB
"""

RETURN = r"""
changed:
  description: False when the stamp showed the build up to date and nothing ran.
  type: bool
  returned: always
up_to_date:
  description: Whether the stamp matched (source revision and configuration) and the artifacts exist.
  type: bool
  returned: always
attempts:
  description: One entry per attempt.
  type: list
  elements: dict
  returned: always
  sample:
    - {attempt: 1, jobs: 8, rc: 1, oom: true, oom_kills: 5, duration: 6.1, peak_memory_bytes: 419430400}
    - {attempt: 2, jobs: 4, rc: 0, oom: false, oom_kills: 0, duration: 9.8, peak_memory_bytes: 331350016}
  contains:
    attempt: {description: Attempt number from 1., type: int}
    jobs: {description: Jobs the attempt ran with., type: int}
    rc: {description: Exit status of the command (negative for a signal)., type: int}
    oom: {description: Whether the attempt was OOM-killed., type: bool}
    why: {description: What the OOM verdict rests on., type: str}
    oom_kills: {description: OOM kills counted by the build cgroup (null without one)., type: int}
    kind: {description: "How the attempt ended: ok, oom, timeout, failed, interrupted.", type: str}
    watchdog: {description: Why the watchdog stopped the attempt; null when it did not., type: str}
    strategy: {description: The confinement the attempt ran in., type: str}
    kernel_oom_lines: {description: Kernel log lines about OOM kills in the build cgroup., type: list, elements: str}
    duration: {description: Seconds., type: float}
    peak_memory_bytes: {description: The cgroup's peak memory during the attempt., type: int}
    progress: {description: "Last ninja C([N/M]): done, total, percent.", type: dict}
    failed_steps: {description: "ninja C(FAILED:) lines of the attempt.", type: list, elements: str}
final_jobs:
  description: Jobs of the last attempt.
  type: int
  returned: always
  sample: 2
peak_memory_bytes:
  description: Highest peak memory over the attempts.
  type: int
  returned: when something ran or the stamp recorded it
peak_memory_human:
  description: RV(peak_memory_bytes) for people.
  type: str
  returned: when something ran or the stamp recorded it
  sample: 316Mi
duration:
  description: Seconds the attempts took.
  type: float
  returned: always
artifacts:
  description: Absolute paths matching O(artifacts).
  type: list
  elements: str
  returned: always
  sample: [/srv/sglang/sgl-kernel/dist/sgl_kernel-0.3.0-cp39-abi3-linux_x86_64.whl]
log:
  description: The log file.
  type: str
  returned: always
status:
  description: The JSON status file.
  type: str
  returned: always
stamp:
  description: The stamp file.
  type: str
  returned: always
status_path:
  description: The JSON status file (as RV(status)); roles read it from here rather than naming it.
  type: str
  returned: always
stamp_path:
  description: The stamp file (as RV(stamp)).
  type: str
  returned: always
run_id:
  description: This run's id (O(run_id) or generated), as the status file's C(run_id); with O(state=stopped) the run stopped (null when none).
  type: str
  returned: always
stopped:
  description: True when a signal (or O(state=stopped) from elsewhere) stopped the build.
  type: bool
  returned: when stopped
module_pid:
  description: With O(state=stopped), the pid of the module run that was stopped.
  type: int
  returned: when a live build was stopped
fingerprint:
  description: sha256 of the source revision and configuration the stamp is checked against.
  type: str
  returned: always
memory_limit_bytes:
  description: The build cgroup's memory limit.
  type: int
  returned: always
plan:
  description: The plan (as P(gpufleet.preflight.build_jobs#filter) returns it) when jobs or memory_limit were planned here.
  type: dict
  returned: when planned
env:
  description: The environment variables the build got beyond the module's own environment; values set through O(environment) show as C(********).
  type: dict
  returned: always
  sample: {CMAKE_BUILD_PARALLEL_LEVEL: "2", MAX_JOBS: "2", CMAKE_ARGS: "-DSGL_KERNEL_COMPILE_THREADS=1"}
cgroup:
  description: The build's cgroup (version, directory, path) of the last attempt; null without one.
  type: dict
  returned: when the build ran
confinement:
  description:
    - The strategy that ran (C(strategy)), the one asked for (C(requested)), why each earlier one in the C(auto)
      order could not (C(skipped)), and its cgroup or watched memory.
  type: dict
  returned: always
  sample:
    strategy: cgroupfs
    requested: auto
    skipped: {systemd: PID 1 is not systemd (no /run/systemd/system)}
    cgroup: {version: 1, dir: /sys/fs/cgroup/memory/gpufleet-build-hungry-1a2b3c4d, path: /gpufleet-build-hungry-1a2b3c4d}
stale_status:
  description: Set when the status file still said C(running) from a run whose module no longer runs (abandoned; its leftovers are ended).
  type: str
  returned: when found
toolchain:
  description: The toolchain identity in the stamp (path, size and mtime, version line per tool; null when absent).
  type: dict
  returned: always
source_revision:
  description: What the stamp records of the source (git HEAD and a hash of modified and untracked files, or a tree hash).
  type: dict
  returned: always
compiler_cache:
  description:
    - The compiler cache the build went through - C(kind) (ccache, sccache, none), C(path), C(version),
      C(settings) (the variables set, credentials masked), C(notes) - and after a build what this build did with it -
      C(hits) and C(misses) (whole compiles), C(compiles), C(hit_rate) (0-1), C(uncacheable), C(size_bytes) and
      C(max_size_bytes) of the cache, C(location) and a C(summary) line. sccache's numbers are the last attempt's.
  type: dict
  returned: always
  sample:
    kind: ccache
    version: 4.7.5
    settings: {CCACHE_DEPEND: "1", CCACHE_NOHASHDIR: "true", CCACHE_COMPILERCHECK: content, CCACHE_BASEDIR: /srv/sgl}
    hits: 40
    misses: 2
    compiles: 42
    hit_rate: 0.952
    size_bytes: 1288490188
    summary: "ccache: 40 of 42 compiles from the cache (95%), cache 1.2Gi"
log_tail:
  description: The last O(tail_lines) lines of the log.
  type: list
  elements: str
  returned: on failure after the build ran
failed_steps:
  description: "ninja's C(FAILED:) lines of the last attempt, the failing compile step."
  type: list
  elements: str
  returned: on failure after the build ran
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_option_table import argument_spec
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_stop import stop_build
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._guarded_build import (
    BuildError,
    GuardedBuild,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import (
    find_executable,
    run_with_timeout,
    search_path,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import first_non_finite


def find_in(name, env):
    """The one way programs are found: ``name`` on the build environment's PATH (absolute: checked as is)."""
    return find_executable(name, search_path([], environ=env))


# declared in _build/_build_option_table.py (with its docs and its check); module_utils reads params, tests the table
ARGUMENT_SPEC = argument_spec()


def non_finite_option(params):
    """The first option given NaN or infinity, or None (_values: the one place NaN/inf are recognised)."""
    return first_non_finite(params)


def main():
    module = None
    try:
        module = AnsibleModule(
            argument_spec=ARGUMENT_SPEC,
            mutually_exclusive=[("argv", "cmd")],
            required_if=[("state", "present", ("argv", "cmd"), True)],
            supports_check_mode=True,
        )
    except OverflowError:
        pass    # ansible-core's int conversion raises this on infinity instead of failing the option: named below
    if module is None:
        # outside the except block: fail_json there would carry the handled OverflowError's traceback
        module = AnsibleModule(argument_spec=dict((name, dict(type="raw")) for name in ARGUMENT_SPEC),
                               supports_check_mode=True)
        name, value = non_finite_option(module.params) or ("an option", "inf")
        module.fail_json(msg="%s: must be a finite number, got %s" % (name, value))
    if module.params["confine"] is not None:
        module.deprecate("confine is replaced by confinement (confine=false is confinement=none)",
                         version="2.0.0", collection_name="gpufleet.preflight")

    build = GuardedBuild(module.params, run_with_timeout, find_in, check_mode=module.check_mode)
    failure = None
    try:
        if module.params["state"] == "stopped":
            result = stop_build(build, module.params["stop_timeout"], check_mode=module.check_mode)
        else:
            result = build.execute()
    except BuildError as exc:
        failure = (to_native(exc), dict(exc.result))
    except (IOError, OSError) as exc:
        failure = ("guarded_build: %s" % to_native(exc), dict(build.result))
    for warning in build.warnings:
        module.warn(warning)
    if failure:
        # outside the except block: ansible-core would attach the handled exception's traceback
        message, result = failure
        result.pop("failed", None)
        result.setdefault("changed", False)
        module.fail_json(msg=message, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
