#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: log_bundle
short_description: Keep a log bundle on a node that is not ready, the remediation ladder's first step
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes.linux
description:
  - Writes one C(gpufleet-bundle-<node>-<UTC time>.tar.gz) in O(dir) on the node, C(nvidia-bug-report)-style - the
    verdict and every check's message (C(README.txt), C(verdict.json)), every fact the check gathered
    (C(facts.json)), the kernel's own lines it read (C(kernel.txt) - OOM kills, Xid and SXid events with their
    times) and the GPU probes' output as parsed (C(probes.json)), so what the node looked like when it failed
    survives its reset, reboot or repair.
  - The file is mode 0600 in a directory made 0700, never written over another file; the newest O(keep) bundles are
    kept, the older ones of this module removed (no other file is ever touched).
  - By default only for a node that is not ready (O(only_not_ready)).
options:
  dir:
    description:
      - Directory on the node for the bundles (made 0700 when missing).
    type: path
    required: true
  node_name:
    description:
      - The node's name in the file name. Unset - the short hostname.
    type: str
  ready:
    description:
      - The verdict (C(preflight_result.ready)).
    type: bool
    required: true
  checks:
    description:
      - The verdict's checks (C(preflight_result.checks)), dicts with C(name), C(status) and C(message).
    type: list
    elements: dict
    default: []
  facts:
    description:
      - The gathered facts, keyed C(gpufleet_memory) / C(memory) and so on (C(preflight_result.ansible_facts); with
        C(preflight_full_facts) every subset).
    type: dict
    default: {}
  keep:
    description:
      - How many bundles of this module to keep in O(dir), 1 to 1000; older ones are removed.
    type: int
    default: 10
  only_not_ready:
    description:
      - Write a bundle only when O(ready) is false.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or removed; RV(message) names the bundle it would keep.
seealso:
  - module: gpufleet.preflight.readiness
  - module: gpufleet.preflight.slurm_node
"""

EXAMPLES = r"""
- name: Keep the evidence of a node that is not ready
  gpufleet.preflight.log_bundle:
    dir: /var/lib/gpufleet-preflight/bundles
    ready: "{{ preflight_result.ready }}"
    checks: "{{ preflight_result.checks }}"
    facts: "{{ preflight_result.ansible_facts }}"
"""

RETURN = r"""
path:
  description: The bundle written (or, in check mode, that would be), null when none was due.
  returned: always
  type: str
  sample: /var/lib/gpufleet-preflight/bundles/gpufleet-bundle-gpu1-20261204T221500Z.tar.gz
pruned:
  description: The older bundles removed (or that would be).
  returned: always
  type: list
  elements: str
message:
  description: What was kept and removed, in words.
  returned: always
  type: str
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _log_bundle

ARGUMENT_SPEC = dict(
    dir=dict(type="path", required=True),
    node_name=dict(type="str"),
    ready=dict(type="bool", required=True),
    checks=dict(type="list", elements="dict", default=[]),
    facts=dict(type="dict", default={}),
    keep=dict(type="int", default=10),
    only_not_ready=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if not 1 <= params["keep"] <= 1000:
        module.fail_json(msg="keep: must be 1 to 1000, got %s" % params["keep"])
    if os.path.exists(params["dir"]) and not os.path.isdir(params["dir"]):
        module.fail_json(msg="dir: %s exists and is not a directory" % params["dir"])
    node = params["node_name"] or socket.gethostname().split(".")[0]
    if params["ready"] and params["only_not_ready"]:
        module.exit_json(changed=False, path=None, pruned=[], message="%s: ready: no bundle" % node)
    facts = dict((key[len("gpufleet_"):] if key.startswith("gpufleet_") else key, value)
                 for key, value in params["facts"].items())
    items = _log_bundle.contents(node, params["ready"], params["checks"], facts, _now())
    result, problem = None, None
    try:
        result = _log_bundle.write(params["dir"], node, items, params["keep"], module.check_mode)
    except (IOError, OSError) as exc:
        problem = "dir: %s: the bundle could not be written: %s" % (params["dir"], exc)
    if problem:     # failed outside the except block: fail_json there would carry the traceback
        module.fail_json(msg=problem)
    module.exit_json(**result)


def _now():
    import time  # pylint: disable=import-outside-toplevel
    return time.time()


if __name__ == "__main__":
    main()
