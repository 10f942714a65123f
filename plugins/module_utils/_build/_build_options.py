# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's option checks beyond what an argument spec type can say: bounds, sizes in binary units,
names CMake and the environment accept, paths that must be absolute and of the right kind. Every check raises
ValueError naming the option; the module turns it into ``fail_json``, never a traceback. Defaults are not
restated here: the module's argument spec is their one home.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite, seconds
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import FORMS

# bounds that turn a typo (jobs: 1e99, status_interval: -1) into a clear error instead of a hang
LIMITS = {"jobs": (1, 4096), "nvcc_threads": (1, 1024), "max_attempts": (1, 64), "min_jobs": (1, 4096),
          "max_jobs": (1, 4096), "cpus": (1, 1 << 16), "tail_lines": (0, 100000), "stop_timeout": (1, 3600)}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")               # a CMake cache variable, an environment variable
_VERSION = FORMS["version"]                                  # CMAKE_POLICY_VERSION_MINIMUM (the one rule: _versions)
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}\Z")  # a run's id: in file contents and a variable
_ARCHS = FORMS["cuda_arch_list"]                             # TORCH_CUDA_ARCH_LIST


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


def check_options(params):
    """Everything checkable before planning; ``{per_thread, limit, reserve, command}`` parsed."""
    check_stop_options(params)
    command = check_command(params["argv"], params["cmd"])
    for name, (low, high) in LIMITS.items():
        check_number(name, params[name], low, high)
    # seconds go through the one rule for them (finite, bounded): nan/inf/-1 never reach a loop
    seconds(params["status_interval"], "status_interval", minimum=0.05, maximum=3600)
    if params["timeout"] is not None:
        seconds(params["timeout"], "timeout", minimum=1, maximum=30 * 86400)
    check_path("chdir", params["chdir"], "dir", required=True)
    check_path("source", params["source"], "dir")
    check_path("log_path", params["log_path"], "file")
    check_path("status_path", params["status_path"], "file")
    check_path("ccache_dir", params["ccache_dir"])
    if params["ccache_dir"] and os.path.exists(params["ccache_dir"]) and not os.path.isdir(params["ccache_dir"]):
        raise ValueError("ccache_dir: %s exists and is not a directory" % params["ccache_dir"])
    for name in ("build_dir", "name"):
        if not params[name] and params[name] is not None or params[name] is not None and not params[name].strip():
            raise ValueError("%s: must not be empty" % name)
    for name in ("source_ignore", "artifacts"):
        if any(not item.strip() for item in params[name]):
            raise ValueError("%s: an empty entry would match everything or nothing; remove it" % name)
    check_pattern("threads_variable", params["threads_variable"], _NAME, "a CMake variable name")
    check_pattern("cmake_policy_version_minimum", params["cmake_policy_version_minimum"], _VERSION,
                  "a CMake version such as 3.5")
    check_pattern("cuda_arch_list", params["cuda_arch_list"], _ARCHS, "an arch list such as 12.0a or 9.0;12.0a")
    check_environment(params["environment"])
    return {"command": command, "per_thread": check_size("memory_per_thread", params["memory_per_thread"]),
            "limit": check_size("memory_limit", params["memory_limit"]),
            "reserve": check_size("reserve", params["reserve"], positive=False)}
