# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
name: merge_admission_peaks
short_description: One fleet peaks table from the admission launchers' peaks.json files of many nodes
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Merges the C(peaks.json) files the memory-admission launcher writes on each node (keyed by the tree's identity,
    the source's path and its arch flags) into one table the controller hands to every node before its next build
    (the launcher's C(seed_peaks)), so a node that never built the tree starts seeded instead of cold.
  - Per key the largest finished peak wins; a compile that was killed counts only where no node finished it. The
    merged compile time is the median of the nodes that finished it (each node's times are off by its own speed and
    load; the median orders the longest compiles better than any one node's), and the thread points the largest of
    each count.
  - Entries the launcher itself would not trust (a negative, zero, NaN or string peak, a list) are dropped, and so is
    a file that is not JSON, not an object, or larger than the launcher reads (64 MiB).
options:
  _input:
    description: The tables, each a dict or the JSON text of a C(peaks.json) file (as the file lookup reads it).
    type: list
    elements: raw
    required: true
"""

EXAMPLES = r"""
- name: Merge the nodes' peaks on the controller
  ansible.builtin.copy:
    dest: /srv/fleet-peaks/peaks.json
    content: "{{ query('ansible.builtin.fileglob', '/srv/fleet-peaks/nodes/*.json') | map('ansible.builtin.file')
                 | list | gpufleet.preflight.merge_admission_peaks | to_nice_json }}"
    mode: "0644"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_value:
  description: The merged peaks table, in the launcher's own C(peaks.json) form.
  type: dict
"""

import json

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_string

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy

MAX_TABLE_CHARS = 64 * 1024 * 1024   # the launcher's own read limit for a peaks or seed file (MAX_JSON_BYTES)


def table_of(item):
    """A dict from a table or its JSON text; {} for what the launcher would not read."""
    if is_string(item):
        if len(item) > MAX_TABLE_CHARS:
            return {}
        try:
            item = json.loads(item)
        except ValueError:
            return {}
    return item if isinstance(item, dict) else {}


def merge_admission_peaks(tables):
    """``[peaks, peaks_json_text, ...]`` -> the fleet's peaks (``_admission_policy.merge_fleet_peaks``)."""
    if is_string(tables) or isinstance(tables, dict) or not hasattr(tables, "__iter__"):
        raise AnsibleFilterError("merge_admission_peaks: expects a list of peaks tables (dicts or JSON text), got %s"
                                 % type(tables).__name__)
    return _admission_policy.merge_fleet_peaks(*[table_of(item) for item in tables])


class FilterModule(object):
    def filters(self):
        return {"merge_admission_peaks": merge_admission_peaks}
