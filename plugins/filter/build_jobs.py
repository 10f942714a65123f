# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: build_jobs
short_description: Plan a CUDA build's parallel jobs from the memory and CPUs a node really has
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Computes how many parallel build jobs (C(MAX_JOBS), C(CMAKE_BUILD_PARALLEL_LEVEL)) a node can carry so that
    O(nvcc_threads) concurrent nvcc threads per job, each taking O(memory_per_thread), fit in the node's
    effective available memory minus a reserve, and do not outnumber its usable CPUs.
  - "The rule: C(jobs x nvcc_threads x memory_per_thread <= available - reserve) and C(jobs x nvcc_threads <= cpus)."
  - Uses the effective (container-aware) memory of C(gpufleet_memory), not C(/proc/meminfo), so a capped
    container is not planned as if it owned the host.
  - Pure; runs on the controller.
options:
  _input:
    description:
      - The C(gpufleet_memory) facts of the node (from M(gpufleet.preflight.node_facts)); its
        C(effective.available_bytes) and C(effective.total_bytes) are used.
      - A whole C(ansible_facts) dict holding C(gpufleet_memory) is accepted too.
    type: dict
    required: true
  cpus:
    description:
      - Usable CPUs of the node (affinity and cgroup CPU quota taken into account).
      - An integer, or the C(gpufleet_cpus) facts dict (its C(usable) is used).
    type: raw
    required: true
  memory_per_thread:
    description:
      - Memory one concurrent nvcc thread takes, as bytes or a size like C(5GiB) or C(512MiB).
      - Measurements put it at 3 to 5 GB for heavy CUDA kernels.
    type: raw
    default: 5GiB
  nvcc_threads:
    description:
      - nvcc threads per compile job (C(--threads), sgl-kernel's C(SGL_KERNEL_COMPILE_THREADS), whose own default is 32).
    type: int
    default: 1
  reserve:
    description:
      - Memory kept free for the system, sshd and the page cache, as bytes or a size.
      - Defaults to the larger of 8 GiB and 10% of the effective total.
    type: raw
  min_jobs:
    description: Fewest jobs to plan. When even these do not fit in memory, RV(_value.fits) is false.
    type: int
    default: 1
  max_jobs:
    description: Most jobs to plan; unlimited when omitted.
    type: int
  measured_memory_per_thread:
    description:
      - What one concurrent nvcc thread measurably took in an earlier guarded build of this source on this node (bytes
        or a size); the plan then uses it times O(measured_margin), never below O(min_memory_per_thread), instead of
        O(memory_per_thread), and its RV(_value.reason) says so. Unset or empty - O(memory_per_thread).
      - M(gpufleet.preflight.guarded_build) keeps it in its stamp, C(<build_dir>/.gpufleet-build.stamp), as
        C(measured.memory_per_thread_bytes) - the peak memory of the attempt that finished over its jobs x nvcc
        threads. Read the stamp with M(ansible.builtin.slurp) and pass that value (see the examples).
    type: raw
  measured_margin:
    description: Factor (1 to 10) a measured memory per thread is planned with.
    type: float
    default: 1.25
  min_memory_per_thread:
    description: The least memory per thread a measurement may plan with (bytes or a size).
    type: raw
    default: 1GiB
"""

EXAMPLES = r"""
- name: Plan the sgl-kernel build's parallelism from the node's facts
  ansible.builtin.set_fact:
    _plan: >-
      {{ ansible_facts.gpufleet_memory | gpufleet.preflight.build_jobs(
           cpus=ansible_facts.gpufleet_cpus, nvcc_threads=32, memory_per_thread='5GiB') }}
# The seed's node: 449 GiB total, 448 GiB available, 32 nvcc threads per job
#   -> jobs=2: 448Gi available - 45Gi reserve over 32 threads x 5Gi (memory allows 2, 128 cpus allow 4; bound by memory)

- name: Refuse to start a build that cannot fit even one job
  ansible.builtin.assert:
    that: _plan.fits
    fail_msg: "{{ _plan.reason }}"

- name: Read what the last build on this node measured (guarded_build's stamp)
  ansible.builtin.slurp:
    src: /srv/sglang/sgl-kernel/build/.gpufleet-build.stamp
  register: _stamp
  failed_when: false

- name: Plan from the measured memory per thread when there is one, else from the default 5 GiB
  ansible.builtin.set_fact:
    _plan: >-
      {{ ansible_facts.gpufleet_memory | gpufleet.preflight.build_jobs(
           cpus=ansible_facts.gpufleet_cpus, nvcc_threads=32,
           measured_memory_per_thread=((_stamp.content | b64decode | from_json).measured | default({}, true)).memory_per_thread_bytes
                                      | default(none) if _stamp.content is defined else none) }}
# -> jobs=4: 448Gi available - 45Gi reserve over 32 threads x 2.5Gi (measured 2Gi/thread + 25%, not the default 5Gi) ...

- name: Cap the jobs and keep a bigger reserve
  ansible.builtin.debug:
    msg: "{{ (ansible_facts.gpufleet_memory | gpufleet.preflight.build_jobs(cpus=64, reserve='32GiB', max_jobs=16)).jobs }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    jobs:
      description: Parallel jobs to run (at least O(min_jobs), at most O(max_jobs)).
      type: int
      sample: 2
    fits:
      description: Whether RV(_value.jobs) jobs fit in the memory budget; false means even the minimum does not.
      type: bool
      sample: true
    reason:
      description: One line saying how the number came about.
      type: str
      sample: "jobs=2: 448Gi available - 45Gi reserve over 32 threads x 5Gi (memory allows 2, 128 cpus allow 4; bound by memory)"
    bound_by:
      description: What limited the jobs, one of C(memory), C(cpus), C(max_jobs), C(min_jobs).
      type: str
      sample: memory
    budget_bytes:
      description: Available memory minus the reserve; the memory limit for the build's cgroup.
      type: int
      sample: 432826693222
    budget_human:
      description: RV(_value.budget_bytes) for people.
      type: str
      sample: 403Gi
    per_job_bytes:
      description: Memory one job takes (nvcc threads x memory per thread).
      type: int
      sample: 171798691840
    reserve_bytes:
      description: The reserve used.
      type: int
      sample: 48210627788
    memory_jobs:
      description: Jobs the memory budget allows.
      type: int
      sample: 2
    cpu_jobs:
      description: Jobs the CPUs allow.
      type: int
      sample: 4
    memory_per_thread_source:
      description: Whether the plan used a C(measured) memory per thread or the C(default) O(memory_per_thread).
      type: str
      sample: measured
    concurrent_threads:
      description: jobs x nvcc threads, the concurrent compilers the plan runs.
      type: int
      sample: 64
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_plan import (
    DEFAULT_MEMORY_PER_THREAD,
    MEASURED_MARGIN,
    MIN_MEMORY_PER_THREAD,
    plan_from_facts,
)


def build_jobs(memory_facts, cpus=None, memory_per_thread=DEFAULT_MEMORY_PER_THREAD, nvcc_threads=1,
               reserve=None, min_jobs=1, max_jobs=None, measured_memory_per_thread=None,
               measured_margin=MEASURED_MARGIN, min_memory_per_thread=MIN_MEMORY_PER_THREAD, **unknown):
    """Plan parallel build jobs; see DOCUMENTATION."""
    if unknown:
        # named here: otherwise Jinja's call raises a bare TypeError (an unhandled exception in the task)
        raise AnsibleFilterError("build_jobs: unknown option%s %s; the options are cpus, memory_per_thread, nvcc_threads, "
                                 "reserve, min_jobs, max_jobs, measured_memory_per_thread, measured_margin, "
                                 "min_memory_per_thread" % ("s" if len(unknown) > 1 else "", ", ".join(sorted(unknown))))
    if cpus is None:
        raise AnsibleFilterError("build_jobs: cpus is required (an int or the gpufleet_cpus facts)")
    try:
        return plan_from_facts(memory_facts, cpus, memory_per_thread=memory_per_thread, nvcc_threads=nvcc_threads,
                               reserve=reserve, min_jobs=min_jobs, max_jobs=max_jobs,
                               measured_memory_per_thread=measured_memory_per_thread, measured_margin=measured_margin,
                               min_memory_per_thread=min_memory_per_thread)
    except ValueError as exc:
        raise AnsibleFilterError("build_jobs: %s" % to_native(exc))


class FilterModule(object):
    """gpufleet.preflight build planning filters."""

    def filters(self):
        return {"build_jobs": build_jobs}
