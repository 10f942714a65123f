#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: build_watch
short_description: Follow the fleet's guarded builds in one live table and write the build report
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Follows the M(gpufleet.preflight.guarded_build) jobs started with C(async) on every node of O(jobs), in one loop
    on the controller, and prints one table per poll - a row per node with its phase (C(queued), C(starting),
    C(configuring), C(compiling), C(linking), C(installing), C(done), C(failed), C(stopped), C(unreachable)), ninja's C([N/M]) with the percent
    and an ETA from the rate so far, the jobs now and the backoffs so far, memory in use against the build's budget,
    the peak, the OOM kills and the first failed step. It replaces a per-host C(async_status) retry loop and its
    per-host lines.
  - Each node is reached over its own connection (its inventory and connection variables, as a task on that host
    would be) - M(gpufleet.preflight.build_status) reads the build's status file (bounded), C(ansible.builtin.async_status)
    the job's result once the status says it ended (and every O(status_every) polls, in case the module died without
    saying so).
  - Interrupting the playbook (Ctrl-C) stops the watching, not the builds - they were started with C(async) and run
    on; the task says so, naming the nodes, and how to stop them (C(playbooks/build_stop.yml)). A build stopped that way
    shows as C(stopped) (its node's entry in RV(results) has C(phase=stopped)) and is no failure, as the examples show.
  - A node that does not answer O(unreachable_after) polls in a row shows as C(unreachable) and is no longer
    polled; the others go on. Nodes finishing at different times are followed until the last one ends.
  - The table goes through the Display, so it works with any stdout callback; a new table is printed only when a
    row changed. On a terminal (O(redraw)) it is redrawn in place.
  - After the build writes C(build.json), C(build.md) and C(build.html) (self-contained - inline SVG, no scripts,
    fonts or network) into O(report_dir) when that is set - per node the attempts (jobs, duration, peak, OOM kills,
    why each ended), the memory over time with the budget line and each OOM/backoff marked, and a fleet summary.
  - This is an action plugin; the module file holds its documentation. Use it with C(run_once).
options:
  jobs:
    description:
      - Hostname to the node's job, a dict with C(jid) (the C(ansible_job_id) of the async
        M(gpufleet.preflight.guarded_build) task) and C(status_path) (its status file on the node, by default
        C(<chdir>/<build_dir>/gpufleet-build.status.json)).
      - Or hostname to the job id alone, with the status file in O(status_paths).
    type: dict
    required: true
  status_paths:
    description: Hostname to the node's status file, for the entries of O(jobs) that are a job id alone.
    type: dict
    default: {}
  run_ids:
    description:
      - Hostname to the C(run_id) given to that node's M(gpufleet.preflight.guarded_build) (or C(run_id) in the
        node's O(jobs) entry). The watch then follows that run only - a status file of another run (the build dir's
        previous build, still saying C(succeeded)) shows the node as C(starting) until this run's module writes its
        own.
      - Whatever a status file says, a node is over only once its job's result is in (or it is unreachable).
    type: dict
    default: {}
  max_status_bytes:
    description:
      - The largest status file read on a node (4096 to 67108864 bytes), by M(gpufleet.preflight.build_status). A
        larger file, a FIFO, or JSON of another shape than guarded_build writes is shown as that node's error while
        the others are followed; the timeline kept per node is bounded (240 samples, peaks kept) whatever the file
        held.
    type: int
    default: 1048576
  interval:
    description: Seconds between polls (0.1 to 3600).
    type: float
    default: 30
  timeout:
    description: Seconds to follow the builds before giving up on those still running (reported as unreachable); V(0) for none.
    type: float
    default: 0
  unreachable_after:
    description: Polls in a row a node may fail to answer before it shows as unreachable (1 to 1000).
    type: int
    default: 3
  status_every:
    description: Ask the async job for its result every this many polls even while the status file says running (1 to 1000).
    type: int
    default: 5
  report_dir:
    description:
      - Directory on the controller for C(build.json), C(build.md) and C(build.html); created when missing. No report
        is written when unset.
      - An existing file of the same name that is not an earlier build report is never overwritten; the task fails naming it.
    type: path
  write:
    description: Write the report files (with O(report_dir)).
    type: bool
    default: true
  redraw:
    description:
      - Redraw the table in place (ANSI cursor movement) instead of printing a new one below. V(auto) redraws when
        the controller's standard output is a terminal.
    type: str
    choices: [auto, always, never]
    default: auto
extends_documentation_fragment:
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.action
attributes:
  check_mode:
    support: none
    details: There is no build to follow in check mode; the role does not call it then.
seealso:
  - module: gpufleet.preflight.guarded_build
  - module: gpufleet.preflight.build_status
"""

EXAMPLES = r"""
- name: Start the build on every node
  gpufleet.preflight.guarded_build:
    cmd: cmake -S . -B build -G Ninja && cmake --build build
    chdir: /srv/build/project
  async: 21600
  poll: 0
  register: _job

- name: Remember where each node's build reports
  ansible.builtin.set_fact:
    _watch_job: {jid: "{{ _job.ansible_job_id }}", status_path: /srv/build/project/build/gpufleet-build.status.json}

- name: Follow every node's build in one table, then write the build report
  gpufleet.preflight.build_watch:
    jobs: "{{ dict(ansible_play_batch | zip(ansible_play_batch | map('extract', hostvars, '_watch_job'))) }}"
    interval: 10
    report_dir: "{{ playbook_dir }}/reports"
  run_once: true
  register: _watch

# A build stopped on request (gpufleet.preflight.build_stop) is no failure: that node leaves the play, nothing
# is installed from a build cut short
- name: End the play of a node whose build was stopped on request
  ansible.builtin.meta: end_host
  when: _watch.results[inventory_hostname].phase | default('') == 'stopped'

- name: Fail the nodes whose build failed
  ansible.builtin.fail:
    msg: "{{ _watch.results[inventory_hostname].msg }}"
  when: _watch.results[inventory_hostname].failed | default(false)
"""

RETURN = r"""
results:
  description:
    - Hostname to that node's final M(gpufleet.preflight.guarded_build) result (as C(async_status) returns it), with
      C(phase) and the last C(status) added; C(failed) and C(msg) set for a node that became unreachable (then
      C(unreachable_during_build) is true) or gave no result.
  returned: always
  type: dict
report:
  description: The build report (C(summary), C(nodes) with attempts, timeline and events), as written to C(build.json).
  returned: always
  type: dict
files:
  description: The report files written.
  returned: always
  type: list
  elements: str
polls:
  description: Poll rounds made.
  returned: always
  type: int
  sample: 12
"""
