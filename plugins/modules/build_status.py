#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: build_status
short_description: Read a guarded build's status file, bounded
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Reads the status file a M(gpufleet.preflight.guarded_build) writes in its build dir
    (C(gpufleet-build.status.json)) and returns it parsed. M(gpufleet.preflight.build_watch) runs it on every node
    at each poll.
  - Whatever is at O(path), the read is bounded and never blocks - a file larger than O(max_bytes) is not read, a
    FIFO, directory, socket or symbolic link is not opened for reading; each is answered in RV(error), naming the
    file, and the module does not fail (a watcher must go on following the other nodes).
  - The shape of the JSON is not checked here; M(gpufleet.preflight.build_watch) checks it on the controller.
extends_documentation_fragment:
  - gpufleet.preflight.attributes
attributes:
  check_mode:
    support: full
options:
  path:
    description: The status file (absolute path).
    type: path
    required: true
  max_bytes:
    description: The largest file read (4096 to 67108864); guarded_build's own status is a few tens of KiB.
    type: int
    default: 1048576
seealso:
  - module: gpufleet.preflight.guarded_build
  - module: gpufleet.preflight.build_watch
"""

EXAMPLES = r"""
- name: Read the build's status
  gpufleet.preflight.build_status:
    path: /opt/gpufleet/src/sglang/sgl-kernel/build/gpufleet-build.status.json
  register: _build_status
"""

RETURN = r"""
exists:
  description: Whether something is at O(path).
  returned: always
  type: bool
size:
  description: Its size in bytes, when it is a regular file.
  returned: always
  type: int
status:
  description: The parsed status (any JSON value), or null when absent or not readable as a status.
  returned: always
  type: raw
error:
  description: Why what is at O(path) is not a status file that could be read (too large, a FIFO, not JSON), or null.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_status import (
    MAX_MAX_BYTES,
    MIN_MAX_BYTES,
    read_status,
)

ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    max_bytes=dict(type="int", default=1048576),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    path, max_bytes = module.params["path"], module.params["max_bytes"]
    error = None
    if not MIN_MAX_BYTES <= max_bytes <= MAX_MAX_BYTES:
        error = "max_bytes must be between %d and %d, got %r" % (MIN_MAX_BYTES, MAX_MAX_BYTES, max_bytes)
    elif "\x00" in path or not path.startswith("/"):
        error = "path: %r is not an absolute path" % (path,)
    if error is not None:
        module.fail_json(msg=error)
    module.exit_json(changed=False, **read_status(path, max_bytes))


if __name__ == "__main__":
    main()
