#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sgl_kernel_tree
short_description: Read what a CMake source tree fetches and what its generated build.ninja compiles
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes
description:
  - Reads files only; changes nothing.
  - With O(src), finds every C(FetchContent_Declare) name the tree's CMake files declare, looks for each in
    O(sources) and O(offline_dir), and walks into the offline copies of sub-projects (those given to
    C(FetchContent_MakeAvailable) or C(add_subdirectory)) for the names they declare in turn - mscclpp declares
    C(json), C(nanobind) and C(dlpack). RV(fetchcontent.missing) lists what an offline configure would stop on.
  - With O(build_ninja), counts the CUDA compile steps of a CMake-generated C(build.ninja) and the GPU
    architectures each compiles for (C(-gencode), C(--generate-code), C(-arch=sm_XX)); with O(keep_archs), the
    steps that still compile for another architecture.
  - With O(cmake_cache), the cache entries whose value is C(...-NOTFOUND).
attributes:
  check_mode:
    support: full
options:
  src:
    description: The source tree (the folder with the top C(CMakeLists.txt)).
    type: path
  offline_dir:
    description: A folder with one sub-folder per FetchContent name (C(repo-cutlass), C(json), ...).
    type: path
  sources:
    description: "C(NAME: path) for sources elsewhere; wins over O(offline_dir)."
    type: dict
    default: {}
  known_trees:
    description:
      - "C(commit: tree hash) (or C(commit: {tree: hash})) of pinned commits: an offline copy with no C(.git) and no
        record of playbooks/prepare_offline_sources.yml is checked by its files - their git tree hash, submodule
        paths left out - against its pin's. The sgl_kernel role passes the trees it ships for the sgl-kernel
        versions it knows (C(files/offline-trees.json)) and the user's C(sgl_kernel_known_trees) over them."
    type: dict
    default: {}
  build_ninja:
    description: A generated C(build.ninja).
    type: path
  keep_archs:
    description:
      - Architectures wanted, as numbers (C(120)), compute capabilities (C(12.0)) or names (C(sm_120a)); C(sm_120a)
        and C(sm_120) both count as C(120).
    type: list
    elements: str
  cmake_cache:
    description: A C(CMakeCache.txt).
    type: path
notes:
  - Sources are read as text; CMake variables inside C(FetchContent_Declare) are not expanded.
seealso:
  - module: gpufleet.preflight.guarded_build
"""

EXAMPLES = r"""
- name: Which offline sources are missing
  gpufleet.preflight.sgl_kernel_tree:
    src: /opt/gpufleet/src/sglang/sgl-kernel
    offline_dir: /opt/gpufleet/offline-sources
  register: tree

- name: Stop before configure
  ansible.builtin.fail:
    msg: "missing offline sources: {{ tree.fetchcontent.missing | join(', ') }}"
  when: tree.fetchcontent.missing | length > 0

- name: What build.ninja compiles, and for which GPUs
  gpufleet.preflight.sgl_kernel_tree:
    build_ninja: /opt/gpufleet/src/sglang/sgl-kernel/build/gpufleet-configure/build.ninja
    keep_archs: ["12.0"]
  register: steps
"""

RETURN = r"""
identity:
  description: The tree's C(package_version) (C(pyproject.toml)'s C(version)) and C(commit) (the git HEAD of the checkout
    holding O(src), read without git), each null when unknown; the sgl_kernel role keys what admission learns by them.
  returned: when src is given
  type: dict
  sample: {"package_version": "0.3.19", "commit": "7b9156c773f0467df80cc849637d94a4522a8b5e"}
fetchcontent:
  description: What O(src) declares; absent without O(src).
  returned: when src is given
  type: dict
  contains:
    declared:
      description: One entry per name (first declaration wins), with C(name), C(declared_in), C(git_repository),
        C(git_tag), C(url), C(depth) (0 for the tree itself), C(subproject), C(source_dir) (null when missing),
        C(commit) (the offline copy's git HEAD, else the commit playbooks/prepare_offline_sources.yml recorded for it)
        and C(pin) (C(match), C(mismatch) or C(unverified) against C(git_tag); null when missing).
      type: list
      elements: dict
    missing:
      description: Names with no offline copy.
      type: list
      elements: str
    wrong_commit:
      description: "C(name (pinned <GIT_TAG>, found <commit>)) for each offline copy at another commit than the tree pins."
      type: list
      elements: str
    unverified:
      description:
        - "C(name (pinned <GIT_TAG>: <why>)) for each offline copy whose pin could not be checked: exported without
          C(.git) and not made by playbooks/prepare_offline_sources.yml (no record of its commit), or a tag name that
          does not resolve in it. Each is also a warning: such a copy may be another version of the source."
      type: list
      elements: str
    cmake_args:
      description: C(-DFETCHCONTENT_SOURCE_DIR_<NAME>=<dir>) for each name found in O(offline_dir) (not those of O(sources)).
      type: list
      elements: str
    errors:
      description: Files that could not be read.
      type: list
      elements: str
ninja:
  description: What O(build_ninja) compiles; absent without it.
  returned: when build_ninja is given
  type: dict
  contains:
    cuda_steps:
      description: CUDA compile steps.
      type: int
    archs:
      description: Every architecture named by a CUDA step.
      type: list
      elements: str
    targets:
      description: "C(target: {steps, archs})."
      type: dict
    other_arch_steps:
      description: Steps compiling for an architecture not in O(keep_archs) (0 without it).
      type: int
    other_archs:
      description: Those architectures.
      type: list
      elements: str
    other_examples:
      description: Up to five such steps' outputs.
      type: list
      elements: str
cache_notfound:
  description: "C(VAR: value) for each C(-NOTFOUND) entry of O(cmake_cache)."
  returned: when cmake_cache is given
  type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._ninja_steps import arch_number
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._sgl_tree import (
    cmake_cache_notfound, known_trees_problem, read_ninja_summary, scan_fetchcontent, tree_identity)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path"),
            offline_dir=dict(type="path"),
            sources=dict(type="dict", default={}),
            known_trees=dict(type="dict", default={}),
            build_ninja=dict(type="path"),
            keep_archs=dict(type="list", elements="str"),
            cmake_cache=dict(type="path"),
        ),
        required_one_of=[("src", "build_ninja", "cmake_cache")],
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False)
    keep = params["keep_archs"]
    if keep is not None:
        bad = [arch for arch in keep if arch_number(arch) is None]
        if bad or not keep:
            module.fail_json(msg="keep_archs: not an architecture: %s (use 120, 12.0 or sm_120a)"
                             % (", ".join(repr(arch) for arch in bad) or "an empty list"))
    for option in ("src", "offline_dir", "build_ninja", "cmake_cache"):
        if params[option] is not None and not os.path.isabs(params[option]):
            module.fail_json(msg="%s: an absolute path is needed, got %r" % (option, params[option]))
    for option in ("src", "offline_dir"):
        if params[option] is not None and not os.path.isdir(params[option]):
            module.fail_json(msg="%s: %s is not a directory" % (option, params[option]))
    for option in ("build_ninja", "cmake_cache"):
        if params[option] is not None and not os.path.isfile(params[option]):
            module.fail_json(msg="%s: %s is not a file" % (option, params[option]))
    problem = known_trees_problem(params["known_trees"])
    if problem:
        module.fail_json(msg="known_trees: %s" % problem)
    for name, path in params["sources"].items():
        if not re.match(r"^[A-Za-z0-9_.+-]+$", str(name)):
            module.fail_json(msg="sources: %r is not a FetchContent name (letters, digits and _.+-)" % (name,))
        if not isinstance(path, str) or not os.path.isabs(path):
            module.fail_json(msg="sources: %s must map to an absolute path, got %r" % (name, path))
    if params["src"]:
        result["fetchcontent"] = scan_fetchcontent(params["src"], params["offline_dir"], params["sources"],
                                                   known_trees=params["known_trees"])
        for unchecked in result["fetchcontent"]["unverified"]:
            module.warn("offline source %s - not checked against the tree's pin: make it with playbooks/"
                        "prepare_offline_sources.yml, or copy it with its .git" % unchecked)
        result["identity"] = tree_identity(params["src"])
    # failures are stored and reported outside the except blocks: fail_json there would carry the traceback
    problem = None
    if params["build_ninja"]:
        try:
            result["ninja"] = read_ninja_summary(params["build_ninja"], keep)
        except (IOError, OSError) as exc:
            problem = "build_ninja: cannot read %s: %s" % (params["build_ninja"], exc)
    if params["cmake_cache"] and problem is None:
        try:
            with open(params["cmake_cache"], "rb") as handle:
                result["cache_notfound"] = cmake_cache_notfound(handle.read().decode("utf-8", "replace"))
        except (IOError, OSError) as exc:
            problem = "cmake_cache: cannot read %s: %s" % (params["cmake_cache"], exc)
    if problem:
        module.fail_json(msg=problem)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
