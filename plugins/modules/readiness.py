#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: readiness
short_description: Decide whether a node is ready for a heavy CUDA build, in one round trip
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Runs M(gpufleet.preflight.node_facts) B(once) on the node with only the subsets the policy needs, then evaluates
    the policy on the controller.
  - Returns RV(ready), one entry per check in RV(checks), sets the fact C(gpufleet_readiness) (and the gathered
    C(gpufleet_*) facts), and fails the host when it is not ready unless O(fail_when_not_ready=false).
  - 'The failure message names every failed check in words a person can act on, for example
    C(3 build processes still running: ninja (pid 115, orphaned, 2h 03m\), cc1plus x2).'
  - Checks of a profile that is not selected are reported with status C(skipped) and why; a check whose facts
    could not be gathered fails with status C(unknown) and why; it never passes silently.
  - This is an action plugin; the module file holds its documentation. The C(gpufleet.preflight.preflight) role wraps it.
options:
  min_available_memory:
    description:
      - Minimum B(effective) available memory (the tighter of the host's and the memory cgroup's).
      - A size such as V(64GiB) or V(512MiB), or a fraction of the effective total such as V(0.8).
    type: raw
    default: 8GiB
  max_build_processes:
    description: Most build processes (by executable name) allowed to be running. Must be 0 or more.
    type: int
    default: 0
  max_memory_pressure:
    description:
      - Highest PSI C(some avg10) of C(/proc/pressure/memory), in percent (0 to 100). V(null) disables the check.
    type: float
    default: 10.0
  profiles:
    description:
      - Which groups of checks apply. V(build) is a node that compiles (toolchain, disk, recent OOM kills),
        V(gpu) a node that will serve (GPU count, compute capability, ECC, row remaps, Xid errors, compute apps, driver).
      - Memory and build-process checks always apply.
    type: list
    elements: str
    choices: [build, gpu]
    default: [build, gpu]
  expected_gpus:
    description: How many GPUs nvidia-smi must report (gpu profile).
    type: int
    default: 8
  compute_capability:
    description: The compute capability every GPU must have, like V(12.0) for Blackwell SM120 (gpu profile).
    type: str
    default: '12.0'
  min_driver_version:
    description: Lowest acceptable NVIDIA driver version, like V(570.86.15) (gpu profile). Not checked when unset.
    type: str
  allow_gpu_compute_apps:
    description: Whether processes may already be running on the GPUs (gpu profile).
    type: bool
    default: false
  nvcc_arch:
    description: The GPU architecture nvcc must be able to compile for (build profile). sm_120 needs CUDA 12.8 or later.
    type: str
    default: sm_120a
  cmake_min_version:
    description:
      - Lowest CMake version accepted (build profile). CMake 4 or later passes with a note that
        C(CMAKE_POLICY_VERSION_MINIMUM=3.5) will be set for projects declaring an older minimum.
    type: str
    default: '3.18'
  build_path:
    description: The build directory whose filesystem must have room (build profile).
    type: path
    default: /tmp
  min_free_disk:
    description: Minimum free space on O(build_path), a size like V(50GiB) (build profile).
    type: raw
    default: 20GiB
  min_free_inodes:
    description: Minimum free inodes on O(build_path) (build profile).
    type: int
    default: 100000
  oom_window_minutes:
    description:
      - No OOM kill in this node's memory cgroup (or a global one) may have happened within this many minutes
        (build profile). V(0) disables the check.
      - Kills by the limit of a M(gpufleet.preflight.guarded_build) cgroup are reported but pass; that build
        backed off and resumed by itself.
    type: int
    default: 60
  custom_checks:
    description:
      - Extra checks as JMESPath expressions over the gathered facts (keys without the C(gpufleet_) prefix,
        for example C(gpus.devices[?temperature > `85`] | length(@))), evaluated on the controller.
      - Each is a dict with C(name), C(query), one of C(equals), C(max) or C(min), and an optional C(message).
      - An expression that selects nothing fails the check as unknown, with the expression in the message.
    type: list
    elements: dict
    default: []
  wait:
    description:
      - Seconds to keep re-checking a node that is not ready yet (processes still exiting after a restart, memory
        still being reclaimed). Each re-check is one round trip. V(0) checks once.
    type: float
    default: 0
  interval:
    description: Seconds between re-checks while waiting.
    type: float
    default: 5
  fail_when_not_ready:
    description: Fail the host when it is not ready. With V(false) the verdict is only returned and set as a fact.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.preflight.node_facts_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Only reads the node.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
seealso:
  - module: gpufleet.preflight.node_facts
  - module: gpufleet.preflight.build_processes
"""

EXAMPLES = r"""
- name: Is this node ready to resume the build?
  gpufleet.preflight.readiness:
    min_available_memory: 64GiB
    max_build_processes: 0
    profiles: [build]

- name: Wait up to a minute for a node that was just restarted
  gpufleet.preflight.readiness:
    min_available_memory: 0.8
    wait: 60
    interval: 5

- name: Add a custom check, and decide later
  gpufleet.preflight.readiness:
    custom_checks:
      - name: gpus_not_hot
        query: "gpus.devices[?temperature > `85`] | length(@)"
        equals: 0
        message: a GPU is hotter than 85 C
    fail_when_not_ready: false
  register: verdict
"""

RETURN = r"""
ready:
  description: Whether every applied check passed.
  returned: success
  type: bool
  sample: false
message:
  description: The verdict in words; names each failed check.
  returned: success
  type: str
  sample: "not ready: build_processes: 3 build processes still running: ninja (pid 115, orphaned, 2h 03m), cc1plus x2"
checks:
  description: One entry per check.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The check's name.
      type: str
    ok:
      description: Whether it passed (skipped checks count as passed).
      type: bool
    status:
      description: V(ok), V(failed), V(unknown) (facts missing) or V(skipped) (profile not selected).
      type: str
    observed:
      description: What the node showed.
      type: raw
    expected:
      description: What the policy asks for.
      type: raw
    message:
      description: What to do about it, when it failed.
      type: str
    profile:
      description: V(common), V(build), V(gpu) or V(custom).
      type: str
failed_checks:
  description: Names of the checks that failed or were unknown.
  returned: success
  type: list
  elements: str
waited_seconds:
  description: How long the node was re-checked before the verdict.
  returned: success
  type: float
attempts:
  description: How many times the node's facts were gathered.
  returned: success
  type: int
subsets:
  description: The node_facts subsets gathered for this policy.
  returned: success
  type: list
  elements: str
"""
