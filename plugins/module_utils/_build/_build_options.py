# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's option checks beyond what an argument spec type can say: bounds, sizes in binary units,
names CMake and the environment accept, paths that must be absolute and of the right kind. Every check raises
ValueError naming the option; the module turns it into ``fail_json``, never a traceback. Which check an option
gets is declared with the option (``_build_option_table.OPTIONS``, its ``check``): the ranges come from there and
``FORMS`` holds the function of each form; defaults and bounds are not restated here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_option_table as table
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite, seconds
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import FORMS

# bounds that turn a typo (jobs: 1e99, status_interval: -1) into a clear error instead of a hang (declared in the table)
LIMITS = table.limits()
SECONDS = table.limits("seconds")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")               # a CMake cache variable, an environment variable
_VERSION = FORMS["version"]                                  # CMAKE_POLICY_VERSION_MINIMUM (the one rule: _versions)
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}\Z")  # a run's id: in file contents and a variable
_ARCHS = FORMS["cuda_arch_list"]                             # TORCH_CUDA_ARCH_LIST
# a check's ``pattern``: (the rule, what a value must be)
PATTERNS = {"cmake_name": (_NAME, "a CMake variable name"), "cmake_version": (_VERSION, "a CMake version such as 3.5"),
            "arch_list": (_ARCHS, "an arch list such as 12.0a or 9.0;12.0a")}


def check_number(name, value, low, high):
    """None for an omitted option; a value in ``[low, high]`` or ValueError naming the option."""
    if value is None:
        return None
    if isinstance(value, bool):  # a YAML true is an int to Python, never a count
        raise ValueError("%s must be a whole number, got %r" % (name, value))
    if non_finite(value):
        raise ValueError("%s must be a finite number, got %r" % (name, value))
    if not low <= value <= high:
        raise ValueError("%s must be between %s and %s, got %r" % (name, low, high, value))
    return value


def check_size(name, text, positive=True):
    """A size option -> bytes (None when omitted). Binary units only, as the readiness options read them:
    ``64GB`` is refused as ambiguous (10^9 or 2^30?) rather than silently taken for 64 GiB."""
    if text is None:
        return None
    value = parse_size_option(name, text.strip() if isinstance(text, str) else text)
    if positive and value <= 0:
        raise ValueError("%s must be more than 0, got %r" % (name, text))
    return value


def check_command(argv, cmd):
    if argv is not None and (not argv or not str(argv[0]).strip()):
        raise ValueError("argv must be a non-empty list whose first element is the program")
    if cmd is not None and not cmd.strip():
        raise ValueError("cmd is empty")
    return list(argv) if argv else ["/bin/sh", "-c", cmd]


def check_text(name, value):
    """No NUL byte in any string of an option (exec and the environment refuse them with a bare ValueError)."""
    values = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if values is None:
        if isinstance(value, str) and "\0" in value:
            raise ValueError("%s: contains a NUL byte" % name)
        return
    for key, item in values:
        check_text(name, key)
        check_text(name, item)


def check_pattern(name, value, pattern, what):
    if value is not None and value != "" and not pattern.match(value):
        raise ValueError("%s: %r is not %s" % (name, value, what))


def check_environment(environment):
    for key, value in environment.items():
        if not _NAME.match(str(key)):
            raise ValueError("environment: %r is not a variable name (letters, digits, _; not starting with a digit)"
                             % (key,))
        if isinstance(value, (list, dict)):
            raise ValueError("environment: %s must be a string, a number or null, got a %s" % (key, type(value).__name__))


def check_path(name, value, kind=None, required=False):
    """An absolute path (``kind``: ``dir`` must be a directory, ``file`` must not be one nor a symlink; its
    directory must exist). None passes unless ``required``."""
    if value is None and not required:
        return None
    if not value or not str(value).strip():
        raise ValueError("%s: must be a path, got an empty string" % name)
    if not os.path.isabs(value):
        raise ValueError("%s: %r is not an absolute path; a relative one would depend on where the module runs"
                         % (name, value))
    if kind == "dir" and not os.path.isdir(value):
        raise ValueError("%s %s does not exist or is not a directory" % (name, value))
    if kind == "file":
        if os.path.islink(value):
            raise ValueError("%s: %s is a symlink: refusing to follow it as root" % (name, value))
        if os.path.isdir(value):
            raise ValueError("%s: %s is a directory, not a file" % (name, value))
        if not os.path.isdir(os.path.dirname(value)):
            raise ValueError("%s: the directory of %s does not exist" % (name, value))
    return value


def check_stop_options(params):
    """``state: stopped``: only what locates the build (and the wait) is read."""
    for name, value in params.items():
        check_text(name, value)
    check_number("stop_timeout", params["stop_timeout"], *LIMITS["stop_timeout"])
    if params["run_id"] is not None and not _RUN_ID.match(params["run_id"]):
        raise ValueError("run_id: %r is not a run id (1 to 128 letters, digits and _.:@+-, not starting with a sign); "
                         "omit it to have one generated" % (params["run_id"],))
    for name in ("chdir", "log_path", "status_path"):
        check_path(name, params[name], required=name == "chdir")


def _check_path(name, value, check):
    kind = check.get("kind")
    check_path(name, value, "dir" if kind == "dir" else "file" if kind == "file" else None,
               required=table.BY_NAME[name].get("required", False))
    if kind == "cache_dir" and value and os.path.exists(value) and not os.path.isdir(value):
        raise ValueError("%s: %s exists and is not a directory" % (name, value))


def _check_not_empty(name, value, _check):
    if value is not None and not value.strip():
        raise ValueError("%s: must not be empty" % name)


def _check_entries(name, value, _check):
    if any(not item.strip() for item in value):
        raise ValueError("%s: an empty entry would match everything or nothing; remove it" % name)


def _check_pattern(name, value, check):
    rule, what = PATTERNS[check["pattern"]]
    check_pattern(name, value, rule, what)


def _check_seconds(name, value, check):
    """Through the one rule for seconds (finite, bounded): nan/inf/-1 never reach a loop; omitted: no default, no limit."""
    if value is not None or table.BY_NAME[name].get("default") is not None:
        seconds(value, name, minimum=check["min"], maximum=check["max"])


def _checked_elsewhere(_name, _value, _check):
    """``type`` (the argument spec bounds it), ``by`` (the file it names checks it), ``text`` (every option is)."""


# form -> its check (name, value, the entry's check); ``command``, ``run_id`` and ranges are checked first, together
FORMS = {"path": _check_path, "not_empty": _check_not_empty, "entries": _check_entries, "pattern": _check_pattern,
         "seconds": _check_seconds, "environment": lambda _name, value, _check: check_environment(value),
         "size": lambda name, value, check: check_size(name, value, positive=not check.get("zero")),
         "command": _checked_elsewhere, "run_id": _checked_elsewhere, "text": _checked_elsewhere,
         "type": _checked_elsewhere, "by": _checked_elsewhere}


def check_options(params):
    """Everything checkable before planning, each option by its declared check; ``{per_thread, limit, reserve,
    command}`` parsed."""
    check_stop_options(params)
    command = check_command(params["argv"], params["cmd"])
    for name, (low, high) in LIMITS.items():
        check_number(name, params[name], low, high)
    for entry in table.OPTIONS:
        form = entry["check"].get("form")
        if form:
            FORMS[form](entry["name"], params[entry["name"]], entry["check"])
    return {"command": command, "per_thread": check_size("memory_per_thread", params["memory_per_thread"]),
            "limit": check_size("memory_limit", params["memory_limit"]),
            "reserve": check_size("reserve", params["reserve"], positive=False)}
