# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: build_paths
short_description: Where a guarded build keeps its status, stamp and log in a build directory
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - The paths M(gpufleet.preflight.guarded_build) uses by default in its O(gpufleet.preflight.guarded_build#module:build_dir)
    - the status file M(gpufleet.preflight.build_watch) follows, the stamp that records what the last build measured
    (C(measured.memory_per_thread_bytes), read by the P(gpufleet.preflight.build_jobs#filter) plan), and the log -
    from the module's own names, so a playbook never spells them.
options:
  _input:
    description: The build directory on the node (absolute, as guarded_build resolves it).
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Read what the last build here measured
  ansible.builtin.slurp:
    src: "{{ (build_dir | gpufleet.preflight.build_paths).stamp }}"
  register: stamp
  failed_when: false
"""

RETURN = r"""
_value:
  description: C(status), C(stamp) and C(log), each a path inside the build directory.
  type: dict
"""

import posixpath

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.module_utils import _constants


def build_paths(build_dir):
    if not isinstance(build_dir, str) or not build_dir.startswith("/"):
        raise AnsibleFilterError("build_paths: the build directory must be an absolute path on the node, got %r" % (build_dir,))
    return {
        "status": posixpath.join(build_dir, _constants.BUILD_STATUS_NAME),
        "stamp": posixpath.join(build_dir, _constants.BUILD_STAMP_NAME),
        "log": posixpath.join(build_dir, _constants.BUILD_LOG_NAME),
    }


class FilterModule(object):
    def filters(self):
        return {"build_paths": build_paths}
