#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: build_processes
short_description: Report or reap build processes (cmake, ninja, cc1plus, nvcc, ...) on a node
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes.linux
description:
  - Scans C(/proc) for processes whose executable name is a build tool and reports them, or reaps them
    (SIGTERM, a grace period, then SIGKILL).
  - A process matches by its executable name, never by a word somewhere in its command line, so
    C(vim CMakeLists.txt) or C(grep cmake) never count. The name is the kernel's C(comm) (15 characters at
    most), the basename of the C(/proc/<pid>/exe) link target, or the basename of C(argv[0]).
  - Command-line regular expressions (O(patterns)) are an explicit, separate way to select.
  - The module's own process, all its ancestors (C(sh), C(sshd), C(ansible-playbook), maybe C(make)) and all
    its descendants are never reported nor signalled; neither is pid 1.
  - Before every signal the pid must still be the same process (same start time), so a reused pid is never
    signalled. Zombies are reported in RV(remaining); only their parent can reap them.
  - O(state=present) selects what the P(gpufleet.preflight.node_facts#module) C(build_processes) subset
    reports, narrowed by O(orphaned_only), O(older_than) and O(user).
options:
  state:
    description:
      - V(present) reports the selected processes; V(absent) reaps them.
    type: str
    choices: [present, absent]
    default: present
  names:
    description:
      - Executable names (basenames) that make a process a build process. Shell-style globs work (V(ld.*)).
      - Replaces the default list when given; V([]) selects by O(patterns) only.
      - Default V(cmake), V(ninja), V(make), V(gmake), V(cc1), V(cc1plus), V(collect2), V(ld), V(ld.*),
        V(cicc), V(ptxas), V(nvcc), V(nvlink), V(fatbinary), V(cudafe++).
    type: list
    elements: str
  extra_names:
    description:
      - Names added to O(names) (or to the default list).
    type: list
    elements: str
    default: []
  patterns:
    description:
      - Python regular expressions searched in the whole command line (arguments joined by spaces; the first
        32768 characters). A process matching one is selected even when its name is not in O(names).
      - All patterns together get 5 seconds over all command lines; a pattern that backtracks without end
        (V((a+\)+$) against a long argument) is named in the error instead of hanging the scan.
    type: list
    elements: str
    default: []
  orphaned_only:
    description:
      - Select only orphans, processes whose parent is gone, that is, left behind by a build that was killed
        or whose session ended (see RV(processes[].orphaned)).
    type: bool
    default: false
  older_than:
    description:
      - Select only processes started at least this many seconds ago.
    type: int
  user:
    description:
      - Select only processes of this user (name or numeric uid).
    type: str
  grace:
    description:
      - Seconds to wait after SIGTERM before sending SIGKILL to what is still running (O(state=absent)).
      - A finite number from 0 to 3600; V(nan), V(inf) and larger values are refused.
    type: float
    default: 10
  allow_broad:
    description:
      - Reaping (O(state=absent)) refuses, naming the option, a selection that reaches beyond build tools,
        unless this is V(true). Broad are O(names) that also match system processes (V(*), V(s*), V(sshd),
        V(python*), ...) and O(patterns) that select processes whose executable is not a build tool
        (for example V(pip) or V(python3) running a wheel build).
      - Reaping also never signals a process in another PID namespace (a container, seen from its host) unless
        this is V(true); such processes are listed in RV(remaining).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: In check mode nothing is signalled; RV(would_kill) lists what would be.
notes:
  - Reads C(/proc) directly with the Python standard library; no C(ps), no psutil.
  - Processes of other users are seen but, without root, cannot be signalled; they are listed in
    RV(remaining) with the reason.
seealso:
  - module: gpufleet.preflight.node_facts
"""

EXAMPLES = r"""
- name: How many build processes are running (what `ps aux | grep -E "cmake|ninja|cc1plus|nvcc"` meant)
  gpufleet.preflight.build_processes:
  register: builds

- name: Reap what a killed build left behind (orphans older than 10 minutes), 5 s grace before SIGKILL
  gpufleet.preflight.build_processes:
    state: absent
    orphaned_only: true
    older_than: 600
    grace: 5

- name: Only the wheel build of one checkout, found by its command line (pip is not a build tool, so say so)
  gpufleet.preflight.build_processes:
    state: absent
    names: []
    patterns:
      - 'pip wheel .*/srv/build/sglang/sgl-kernel'
    allow_broad: true

- name: Count the linkers too, gold and lld included by the default ld.* glob; add mold
  gpufleet.preflight.build_processes:
    extra_names: [mold]
"""

RETURN = r"""
count:
  description: Number of selected processes.
  returned: always
  type: int
  sample: 3
by_name:
  description: Selected processes per executable name.
  returned: always
  type: dict
  sample: {ninja: 1, cc1plus: 2}
total_rss_bytes:
  description: Resident memory of the selected processes, in bytes.
  returned: always
  type: int
  sample: 1073741824
total_rss_human:
  description: RV(total_rss_bytes) for people.
  returned: always
  type: str
  sample: 1.0Gi
scanned:
  description: Processes looked at.
  returned: always
  type: int
  sample: 812
names:
  description: The names used for the selection.
  returned: always
  type: list
  elements: str
  sample: [cmake, ninja, make]
patterns:
  description: The command-line regular expressions used for the selection.
  returned: always
  type: list
  elements: str
  sample: []
errors:
  description: What could not be read, each as C(<path>) colon reason.
  returned: always
  type: list
  elements: str
  sample: []
processes:
  description: The selected processes (before any reaping).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process id.
      type: int
    ppid:
      description: Parent process id.
      type: int
    name:
      description: The executable name that matched (or C(comm) for a pattern match).
      type: str
    comm:
      description: The kernel's name for the process (at most 15 characters).
      type: str
    user:
      description: Owner (real uid) name.
      type: str
    uid:
      description: Owner (real uid).
      type: int
    state:
      description: Kernel state letter (R, S, D, Z, T, ...).
      type: str
    start_ticks:
      description: Start time in clock ticks after boot; with RV(processes[].pid) it names the process.
      type: int
    age_seconds:
      description: Seconds since the process started.
      type: int
    rss_bytes:
      description: Resident memory in bytes.
      type: int
    cmdline:
      description: Command line, cut to 200 characters.
      type: str
    orphaned:
      description:
        - Its parent is gone and it was re-parented to the init of its PID namespace (parent pid 1).
        - Not an orphan though its parent is pid 1 when pid 1 is itself the build (C(make -j) as a container's
          command), when it leads its own session (a systemd service, dumb-init's command) or leads its own
          process group in pid 1's session (tini's command).
      type: bool
    zombie:
      description: Dead, waiting for its parent to reap it.
      type: bool
    matched_by:
      description: V(name) or V(pattern).
      type: str
  sample:
    - {pid: 4242, ppid: 1, name: ninja, comm: ninja, user: root, uid: 0, state: S, start_ticks: 34440,
       age_seconds: 812, rss_bytes: 4194304, cmdline: "ninja -C build", orphaned: true, zombie: false,
       matched_by: name}
killed:
  description: Processes that were signalled and are gone; C(how) is V(term) (SIGTERM sufficed) or V(kill).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, name: ninja, how: kill, cmdline: "ninja -C build"}]
would_kill:
  description: In check mode, the processes O(state=absent) would signal.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, name: ninja, cmdline: "ninja -C build"}]
remaining:
  description: Selected processes left alive, each with a C(reason) (protected, zombie, cannot signal,
    survived SIGKILL).
  returned: always
  type: list
  elements: dict
  sample: []
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import (
    DEFAULT_NAMES,
    NameMatcher,
    broad_names,
    compile_patterns,
    refuse_broad,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._processes import (
    collect_build_processes,
    filter_selection,
    summarize,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._reap import MAX_GRACE, reap
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import relaxed_spec, seconds

# uid_t is 32 bits and (uid_t)-1 means "no user".
MAX_UID = 2 ** 32 - 2

ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    names=dict(type="list", elements="str"),
    extra_names=dict(type="list", elements="str", default=[]),
    patterns=dict(type="list", elements="str", default=[]),
    orphaned_only=dict(type="bool", default=False),
    older_than=dict(type="int"),
    user=dict(type="str"),
    grace=dict(type="float", default=10.0),
    allow_broad=dict(type="bool", default=False),
)


def resolve_uid(user):
    """User name or numeric uid -> uid; ValueError naming the option."""
    if user is None:
        return None
    if user.isdigit():
        if int(user) > MAX_UID:
            raise ValueError("user: %s is not a uid (0 to %d)" % (user, MAX_UID))
        return int(user)
    import pwd
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise ValueError("user: no such user %r on this node" % (user,))


def main():
    try:
        module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    except OverflowError:
        # older_than=inf: ansible-core's int check overflows; seconds() below names the option
        module = AnsibleModule(argument_spec=relaxed_spec(ARGUMENT_SPEC), supports_check_mode=True)
    params = module.params
    # everything is validated before anything is scanned, let alone signalled
    reaping = params["state"] == "absent"
    error = None
    try:
        grace = seconds(params["grace"], "grace", maximum=MAX_GRACE)
        if params["older_than"] is not None:
            seconds(params["older_than"], "older_than", maximum=float("1e12"))
        if reaping and params["names"] == [] and not params["extra_names"] and not params["patterns"]:
            raise ValueError("names: [] with no patterns selects nothing to reap; give names or patterns")
        NameMatcher(params["names"] or [], "names")
        NameMatcher(params["extra_names"], "extra_names")
        compile_patterns(params["patterns"])
        uid = resolve_uid(params["user"])
        facts = collect_build_processes(names=params["names"], extra_names=params["extra_names"],
                                        patterns=params["patterns"], self_pid=os.getpid())
        selection = filter_selection(facts["processes"], orphaned_only=params["orphaned_only"],
                                     older_than=params["older_than"], uid=uid)
        if reaping and not params["allow_broad"]:
            chosen_names = list(DEFAULT_NAMES if params["names"] is None else params["names"]) + params["extra_names"]
            broad_extra = broad_names(params["extra_names"])
            refusal = refuse_broad(chosen_names if not broad_extra else params["extra_names"], selection,
                                   list(DEFAULT_NAMES) + chosen_names,
                                   names_option="names" if not broad_extra else "extra_names")
            if refusal:
                raise ValueError(refusal)
    except ValueError as exc:
        error = str(exc)
    if error is not None:  # failed outside the except block: a handled error carries no traceback
        module.fail_json(msg=error)

    result = summarize(selection, facts["names"], facts["patterns"], facts["scanned"], facts["errors"])
    result.update(changed=False, killed=[], would_kill=[], remaining=[])
    if reaping:
        outcome = reap(selection, grace=grace, check_mode=module.check_mode, all_namespaces=params["allow_broad"])
        result.update(outcome)
        if module.check_mode and outcome["would_kill"]:
            result["msg"] = "would kill %d process(es): %s" % (
                len(outcome["would_kill"]), ", ".join(str(item["pid"]) for item in outcome["would_kill"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
