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
  - Runs a build command (C(pip wheel), C(cmake --build), C(make) ...) in O(chdir) inside a new memory cgroup
    made through cgroupfs under the node's own cgroup (v1 C(memory.limit_in_bytes) or v2 C(memory.max); no systemd
    needed), limited to the planned memory budget, so an OOM kills a compiler of the build and not the node, its
    sshd or other work.
  - Sizes the build through its environment - C(CMAKE_BUILD_PARALLEL_LEVEL), C(MAX_JOBS), C(NVCC_THREADS),
    C(CMAKE_ARGS) with C(-DSGL_KERNEL_COMPILE_THREADS=<nvcc_threads>) appended, C(CMAKE_POLICY_VERSION_MINIMUM),
    C(CCACHE_DIR), C(TORCH_CUDA_ARCH_LIST).
  - Detects an OOM kill (the cgroup's C(oom_kill) counter, exit status 137, the kernel log when readable) and resumes
    in the same build directory with the jobs halved, up to O(max_attempts); fails clearly when one job still does
    not fit.
  - Holds a lock per build directory (a second build there is refused naming the holder's pid) and writes a stamp
    of the source revision and configuration (not the job count), so an up-to-date build returns C(changed=false)
    without running.
  - Writes a log file and a JSON status file (state, attempt, jobs, ninja's C([N/M]) progress, memory in use) that
    a poller can read while the module runs under C(async).
  - Always removes the cgroup it made.
options:
  argv:
    description:
      - The build command as a list; the first element is looked up on the build environment's C(PATH) before anything runs.
      - Exactly one of O(argv) and O(cmd) is required.
    type: list
    elements: str
  cmd:
    description:
      - The build command as one shell string, run with C(/bin/sh -c).
      - Its first word is looked up on C(PATH) before anything runs unless it is a shell construct.
    type: str
  chdir:
    description: Directory to run the build in.
    type: path
    required: true
  source:
    description:
      - The source tree whose revision goes into the stamp (C(git rev-parse HEAD) in a git work tree, else a hash of the
        files' sizes and modification times). Defaults to O(chdir).
    type: path
  source_ignore:
    description: Names or paths relative to O(source) left out of the tree hash (build outputs).
    type: list
    elements: str
    default: [.git, build, dist, __pycache__, _skbuild, .eggs]
  build_dir:
    description:
      - The build directory the command uses (absolute, or relative to O(chdir)); it holds the lock, the stamp and by
        default the log and status files. A resumed build must reuse it, so give the build tool a persistent build
        directory (for scikit-build-core C(-Cbuild-dir=build)).
    type: path
    default: build
  name:
    description: A short name for the build, used in the cgroup's name. Defaults to the base name of O(chdir).
    type: str
  jobs:
    description:
      - Parallel jobs to start with (a whole number). Planned from the node's memory and CPUs when omitted.
    type: raw
  nvcc_threads:
    description: nvcc threads per compile job (C(SGL_KERNEL_COMPILE_THREADS), C(NVCC_THREADS)).
    type: int
    default: 1
  threads_variable:
    description: The CMake cache variable that carries O(nvcc_threads) in C(CMAKE_ARGS); empty to pass none.
    type: str
    default: SGL_KERNEL_COMPILE_THREADS
  memory_limit:
    description:
      - The build cgroup's memory limit (bytes or a size like C(400GiB)); usually the C(budget_bytes) of
        P(gpufleet.preflight.build_jobs#filter). Planned as effective available minus O(reserve) when omitted.
      - Must hold at least one job (O(nvcc_threads) x O(memory_per_thread)).
    type: str
  memory_per_thread:
    description: Memory one concurrent nvcc thread takes, for planning and the one-job check.
    type: str
    default: 5GiB
  reserve:
    description: Memory kept free when planning; defaults to the larger of 8 GiB and 10% of the effective total.
    type: str
  min_jobs:
    description: Fewest jobs when planning.
    type: int
    default: 1
  max_jobs:
    description: Most jobs when planning.
    type: int
  cpus:
    description: Usable CPUs for planning; read from affinity and the cgroup CPU quota when omitted.
    type: int
  memory_facts:
    description: The node's C(gpufleet_memory) facts for planning; read from C(/proc/meminfo) and the cgroup when omitted.
    type: dict
  max_attempts:
    description: Attempts in all, the first included; each OOM kill halves the jobs for the next.
    type: int
    default: 4
  cmake_args:
    description: C(CMAKE_ARGS) for the build; C(-D<threads_variable>=<nvcc_threads>) is appended.
    type: str
  cmake_policy_version_minimum:
    description: C(CMAKE_POLICY_VERSION_MINIMUM), e.g. C(3.5) for third-party projects CMake 4 refuses.
    type: str
  ccache_dir:
    description: C(CCACHE_DIR); sgl-kernel uses ccache only when it is found and this is set.
    type: path
  cuda_arch_list:
    description: C(TORCH_CUDA_ARCH_LIST), e.g. C(12.0a) for Blackwell SM120.
    type: str
  environment:
    description: More environment variables for the build (a C(CMAKE_ARGS) here joins O(cmake_args)).
    type: dict
    default: {}
  artifacts:
    description:
      - Globs relative to O(chdir) of what the build produces (C(dist/*.whl)); returned, and needed for a build to
        count as up to date.
    type: list
    elements: str
    default: []
  log_path:
    description: The build log (appended, one header per attempt). Defaults to C(<build_dir>/gpufleet-build.log).
    type: path
  status_path:
    description: The JSON status file. Defaults to C(<build_dir>/gpufleet-build.status.json).
    type: path
  status_interval:
    description: Seconds between status file updates.
    type: float
    default: 2
  confine:
    description:
      - Run the build in its own memory cgroup. Needs root or a delegated cgroup; without it OOM detection falls back
        to exit status 137 and the kernel log.
    type: bool
    default: true
  force:
    description: Build even when the stamp says the build is up to date.
    type: bool
    default: false
  timeout:
    description: Seconds the whole build may take before it is stopped; unlimited when omitted.
    type: int
  tail_lines:
    description: Lines of the log returned on failure.
    type: int
    default: 40
notes:
  - Meant to run with C(async); the role P(gpufleet.preflight.sgl_kernel#role) polls it and prints the status file's progress.
  - An up-to-date check reads the stamp only; delete the build directory or set O(force) to rebuild.
seealso:
  - plugin: gpufleet.preflight.build_jobs
    plugin_type: filter
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports whether the build is up to date and what it would run, without running it.
  diff_mode:
    support: none
    details: Nothing to diff; the result lists attempts, artifacts and the log.
  platform:
    platforms: linux
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

- name: A synthetic build that OOMs at -j8 in 400 MiB and finishes at -j2
  gpufleet.preflight.guarded_build:
    cmd: cmake -S . -B build -G Ninja && cmake --build build
    chdir: /tmp/hungry
    jobs: 8
    memory_limit: 400MiB
    memory_per_thread: 150MiB
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
    oom_kills: {description: OOM kills counted by the build cgroup (null when unconfined)., type: int}
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
  description: The environment variables the build got beyond the module's own environment.
  type: dict
  returned: always
  sample: {CMAKE_BUILD_PARALLEL_LEVEL: "2", MAX_JOBS: "2", CMAKE_ARGS: "-DSGL_KERNEL_COMPILE_THREADS=1"}
cgroup:
  description: The build's cgroup (version, directory, path); null when unconfined.
  type: dict
  returned: always
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

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.preflight.plugins.module_utils._guarded_build import (
    BuildError,
    GuardedBuild,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str"),
            cmd=dict(type="str"),
            chdir=dict(type="path", required=True),
            source=dict(type="path"),
            source_ignore=dict(type="list", elements="str",
                               default=[".git", "build", "dist", "__pycache__", "_skbuild", ".eggs"]),
            build_dir=dict(type="path", default="build"),
            name=dict(type="str"),
            jobs=dict(type="raw"),
            nvcc_threads=dict(type="int", default=1),
            threads_variable=dict(type="str", default="SGL_KERNEL_COMPILE_THREADS"),
            memory_limit=dict(type="str"),
            memory_per_thread=dict(type="str", default="5GiB"),
            reserve=dict(type="str"),
            min_jobs=dict(type="int", default=1),
            max_jobs=dict(type="int"),
            cpus=dict(type="int"),
            memory_facts=dict(type="dict"),
            max_attempts=dict(type="int", default=4),
            cmake_args=dict(type="str"),
            cmake_policy_version_minimum=dict(type="str"),
            ccache_dir=dict(type="path"),
            cuda_arch_list=dict(type="str"),
            environment=dict(type="dict", default={}),
            artifacts=dict(type="list", elements="str", default=[]),
            log_path=dict(type="path"),
            status_path=dict(type="path"),
            status_interval=dict(type="float", default=2),
            confine=dict(type="bool", default=True),
            force=dict(type="bool", default=False),
            timeout=dict(type="int"),
            tail_lines=dict(type="int", default=40),
        ),
        mutually_exclusive=[("argv", "cmd")],
        required_one_of=[("argv", "cmd")],
        supports_check_mode=True,
    )

    def run(argv, timeout):
        rc, out, err = module.run_command(argv)
        return rc, out, err

    def which(name, path):
        return module.get_bin_path(name, opt_dirs=[part for part in path.split(os.pathsep) if part])

    build = GuardedBuild(module.params, run, which, check_mode=module.check_mode)
    failure = None
    try:
        result = build.execute()
    except BuildError as exc:
        failure = (to_native(exc), dict(exc.result))
    except (IOError, OSError) as exc:
        failure = ("guarded_build: %s" % to_native(exc), dict(build.result))
    if failure:
        # outside the except block: ansible-core would attach the handled exception's traceback
        message, result = failure
        result.pop("failed", None)
        result.setdefault("changed", False)
        module.fail_json(msg=message, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
