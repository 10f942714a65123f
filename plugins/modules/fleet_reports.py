#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_reports
short_description: Write the fleet's readiness reports (JSON, JUnit XML, Markdown, HTML) on the controller
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Builds the fleet report from every host's registered M(gpufleet.preflight.readiness) result, writes
    C(preflight.json), C(preflight.xml) (JUnit, one test case per host and check, unreachable hosts as errors),
    C(preflight.md) and C(preflight.html) into O(report_dir) on the controller, and returns the console table and the
    gate's decision on O(max_not_ready).
  - Every report says the gate's decision (JSON C(gate), the Markdown's top under the counts, the table's line after
    the counts, the HTML's banner, a JUnit test suite C(gate) whose case fails when the gate stopped the run).
  - C(preflight.html) is one self-contained page for 8 to 500 hosts (inline CSS and SVG, no scripts, fonts or
    network) - the summary and the gate's decision, failures grouped by check, one fleet memory chart, the host table,
    a check x host grid and the build processes still running, each with its pid, state and age. It is rendered from
    the Jinja2 template C(roles/preflight/templates/gpufleet_preflight.html.j2) shipped in the collection, autoescaped;
    O(html_template) replaces it.
  - The rendering is the pure code behind the P(gpufleet.preflight.fleet_report#filter) filters; this action only
    writes, in-process and atomically, so no module runs on any host.
  - Reports are the run's output, not a change to a host; they are written in check mode too.
  - This is an action plugin; the module file holds its documentation. Use it with C(run_once).
options:
  results:
    description: Hostname to that host's registered readiness result, or null when nothing came back (unreachable).
    type: dict
    required: true
  report_dir:
    description:
      - Directory on the controller for the four report files; created when missing.
      - Unset, C(reports) in the current directory of the controller process (where ansible-playbook was started);
        a relative path is taken from there too.
      - Files are written with the controller's umask (like any file the user writes). An existing file of the same
        name that is not an earlier gpufleet.preflight report is never overwritten; the task fails naming it.
    type: path
  write:
    description: Write the files. With V(false) only the report, table and gate are returned.
    type: bool
    default: true
  max_not_ready:
    description:
      - The most hosts that may be not ready (unreachable ones count), a count like V(2) or a percentage like V(25%).
        Unset means no limit.
    type: raw
  stop_when_none_ready:
    description:
      - With no host ready, the gate stops whatever O(max_not_ready) says (nothing to go on with). The
        C(gpufleet.preflight.preflight) role sets it from C(preflight_fail_when_not_ready), so a run that only
        records the verdicts is not stopped.
    type: bool
    default: true
  stats_key:
    description:
      - Also publish every host's verdict (C(ready), C(unreachable), C(failed_checks), C(message)), the lists of
        C(ready) and C(not_ready) hosts and the C(gate) to the run's stats under this name, as
        M(ansible.builtin.set_stats) with C(per_host=false) would (AWX keeps them as the job's artifacts). The
        C(gpufleet.preflight.preflight) role sets V(gpufleet_preflight). Unset, nothing is published.
    type: str
  policy:
    description: The policy the checks used, kept in the JSON report.
    type: dict
    default: {}
  html_template:
    description:
      - A Jinja2 template of your own for C(preflight.html), rendered with autoescape on instead of the shipped
        C(gpufleet_preflight.html.j2). Its directory is searched first, so it can C({% extends "gpufleet_preflight.html.j2" %})
        and replace only the blocks it names.
    type: path
extends_documentation_fragment:
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.action
attributes:
  check_mode:
    support: full
    details: Writes the reports on the controller in check mode as well; no host is touched.
seealso:
  - module: gpufleet.preflight.readiness
"""

EXAMPLES = r"""
- name: Report on the fleet
  gpufleet.preflight.fleet_reports:
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'preflight_result'))) }}"
    report_dir: "{{ playbook_dir }}/reports"
    max_not_ready: 25%
  run_once: true
  register: fleet

- name: Print the table
  ansible.builtin.debug:
    msg: "{{ fleet.table }}"
  run_once: true
"""

RETURN = r"""
report:
  description: The fleet report (C(summary) counts, C(hosts) entries, C(policy)), as written to C(preflight.json).
  returned: success
  type: dict
table:
  description: The console table's lines, ending with the count line.
  returned: success
  type: list
  elements: str
  sample: ["HOST   STATUS  EFFECTIVE AVAILABLE / TOTAL  BUILD PROCS  FIRST FAILED CHECK", "node1  ready   448Gi / 449Gi  0  -",
           "1 ready, 0 not ready, 0 unreachable (of 1)"]
gate:
  description:
    - The gate's decision, as the reports show it. C(abort) is true when too much of the fleet is not ready, or no
      host is (whatever the limit, nothing to go on with);
      C(decision) is V(stop) or V(continue); C(reason) says why, either way; C(not_ready) counts the hosts not ready
      or unreachable of C(total); C(max_not_ready) is the limit as given (null for none), C(allowed) the hosts it
      allows (null for no limit).
  returned: success
  type: dict
  sample: {abort: false, decision: continue, reason: "1 of 8 hosts are not ready or unreachable, within preflight_max_not_ready=25% (2 of 8 hosts)",
           not_ready: 1, total: 8, max_not_ready: 25%, allowed: 2}
files:
  description: The report files written.
  returned: success
  type: list
  elements: str
"""
