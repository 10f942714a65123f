# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The confinement methods of the guarded build: their one registry (``METHODS``), the ``confinement`` option's
choices and the choice of the method to use (``auto``: the first that can run here). Split from ``_guarded_build``
(the 500-line rule); ``_guarded_build`` re-exports every name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import signal

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_watchdog import WatchdogConfinement
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import (
    CgroupfsConfinement,
    Confinement,
    SystemdConfinement,
    Unavailable,
)

# the one confinement registry: each method names itself (``name``), its poll interval (``poll_seconds``) and its
# place in ``auto`` (``auto_rank``); the module's ``confinement`` choices are ``strategy_names()`` (a unit test
# ties them). A new method: its class (in _confinement.py or its own file), an entry here, and the module's
# confinement choices and docs (tests/unit/.../test_build_methods.py fails naming what is missing).
METHODS = (SystemdConfinement, CgroupfsConfinement, WatchdogConfinement, Confinement)
SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}


def strategy_names(methods=METHODS):
    """The ``confinement`` option's choices: ``auto`` then every method's name."""
    return ("auto",) + tuple(method.name for method in methods)


def auto_order(methods=METHODS):
    """The methods ``auto`` tries, in order."""
    return tuple(sorted((method for method in methods if method.auto_rank is not None), key=lambda m: m.auto_rank))


def choose(requested, unit, limit_bytes, floor_bytes, find, run, root="/", methods=METHODS):
    """The method to use: ``requested``, or with ``auto`` the first in ``auto_order(methods)`` that can run.
    ``(confinement, skipped)``, ``skipped`` saying why each earlier one could not; Unavailable when the one asked
    for cannot run."""
    by_name = dict((method.name, method) for method in methods)
    skipped = {}
    for method in auto_order(methods) if requested == "auto" else (by_name[requested],):
        strategy = method(unit, limit_bytes, floor_bytes, root, find=find, run=run)
        try:
            strategy.prepare()
        except Unavailable as exc:
            if requested != "auto":
                raise Unavailable("confinement=%s is not possible here: %s" % (method.name, exc))
            skipped[method.name] = str(exc)
            continue
        return strategy, skipped
    raise Unavailable("no confinement is possible here (%s); set confinement=none to build unprotected"
                      % "; ".join("%s: %s" % item for item in sorted(skipped.items())))
