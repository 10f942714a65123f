# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: play_hosts
short_description: A play's host pattern, refused when it matches no host of the inventory and the plays will run
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Returns the host pattern as given when it matches at least one host of the inventory (the whole inventory, as
    P(ansible.builtin.inventory_hostnames#lookup) sees it, before C(--limit)).
  - Fails naming O(variable) and what did not happen (O(outcome)) when it matches none and C(ansible-playbook) is
    about to run the plays. A run that checked or ended nothing must not "succeed" (and, for the preflight, the
    reports of an earlier run must not look like this run's).
  - With C(--syntax-check), C(--list-hosts), C(--list-tasks) or C(--list-tags) no play runs, so nothing is refused and the
    pattern is returned as given. That is how C(ansible-lint), which runs C(ansible-playbook --syntax-check), checks a
    playbook that imports C(gpufleet.preflight.preflight) where no inventory is configured.
  - The playbooks C(gpufleet.preflight.preflight), C(gpufleet.preflight.reap) and C(gpufleet.preflight.build_stop)
    resolve their C(hosts) with it.
options:
  _terms:
    description: The host pattern (one).
    type: str
    required: true
  variable:
    description: The variable the pattern came from, named in the refusal.
    type: str
    default: hosts
  outcome:
    description: What does not happen when nothing matches, said in the refusal (V(nothing was reaped)).
    type: str
    default: nothing was run
"""

EXAMPLES = r"""
- name: Reap stray build processes
  hosts: >-
    {{ lookup('gpufleet.preflight.play_hosts', reap_hosts | default('all'), variable='reap_hosts',
              outcome='nothing was reaped') }}
  tasks: []
"""

RETURN = r"""
_raw:
  description: The host pattern, as given.
  type: list
  elements: str
"""

from ansible import context
from ansible.errors import AnsibleLookupError
from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase

# The ansible-playbook options under which it runs no play: it only reads (and templates) the plays.
NO_RUN_OPTIONS = ("syntax", "listhosts", "listtasks", "listtags")


def runs_plays(cli_args):
    """Whether this ansible-playbook run executes its plays (not a syntax check or a listing)."""
    return not any(cli_args.get(name) for name in NO_RUN_OPTIONS)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0].strip():
            raise AnsibleLookupError("play_hosts: needs one host pattern, got %r" % (terms,))
        pattern = terms[0]
        if not runs_plays(context.CLIARGS):
            return [pattern]
        matched = lookup_loader.get("ansible.builtin.inventory_hostnames", loader=self._loader,
                                    templar=self._templar).run([pattern], variables=variables)
        if not matched:
            raise AnsibleLookupError("%s=%s matches no host of the inventory: %s" % (
                self.get_option("variable"), pattern, self.get_option("outcome")))
        return [pattern]
