# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.health_check_bundle: the node-local health check as one zip application.

The zip holds ``_health_check`` and every module it imports, found by reading their imports (as Ansiballz does for a
module): the collection's module_utils and the ``ansible.module_utils`` files they need, nothing else. The policy is
validated here against the readiness option table, so a typo fails the role on the controller, naming the option.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
import zipfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._action import ControllerAction
from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _remediation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options

ENTRY = "ansible_collections.gpufleet.preflight.plugins.module_utils._node_check._health_check"
ROOTS = ("ansible_collections.gpufleet.preflight.plugins.module_utils", "ansible.module_utils")
MAIN = ("# gpufleet.preflight node-local health check (zip application; python3 this.pyz --help)\n"
        "import sys\nfrom %s import main\nsys.exit(main())\n" % ENTRY)
# A fixed time for every zip entry: the same collection gives the same bytes (the copy task then changes nothing).
STAMP = (2020, 1, 1, 0, 0, 0)


def _wanted(name):
    return any(name == root or name.startswith(root + ".") for root in ROOTS)


def _imports(source, filename):
    """Absolute module names a file imports (also inside functions), including ``from pkg import submodule``."""
    names = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update("%s.%s" % (node.module, alias.name) for alias in node.names)
    return names


def closure(entry=ENTRY):
    """{module name: file path} for the entry and everything of ROOTS it imports, transitively."""
    found, todo = {}, [entry]
    while todo:
        name = todo.pop()
        if name in found or not _wanted(name):
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue  # ``from pkg import function``: not a module
        found[name] = spec.origin
        with open(spec.origin, "rb") as handle:
            todo.extend(_imports(handle.read(), spec.origin))
    return found


# Run in a child with a fixed hash seed: a frozenset constant's marshalled order follows the string hashes, and the
# same collection must give the same bytes. Unchecked-hash pycs (PEP 552): zipimport cannot write a cache, so without
# them every run compiled the whole program again (0.13 s of a 0.2 s run's CPU on 2 cores).
_COMPILE = """
import json, os, py_compile, sys, tempfile
out, work = {}, tempfile.mkdtemp()
for arcname, path in json.load(sys.stdin):
    cfile = os.path.join(work, str(len(out)) + ".pyc")
    py_compile.compile(path, cfile=cfile, dfile=arcname, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    with open(cfile, "rb") as handle:
        out[arcname] = handle.read().hex()
    os.unlink(cfile)
os.rmdir(work)
json.dump(out, sys.stdout)
"""


def compiled(sources):
    """``{arcname: pyc bytes}`` for ``[(arcname, path)]``, compiled by this controller's Python; ``{}`` when that
    fails (the zip then runs from source, as before)."""
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _COMPILE], input=json.dumps(sources).encode("utf-8"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PYTHONHASHSEED": "0"}, timeout=120,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if proc.returncode != 0:
        return {}
    return dict((name, bytes.fromhex(data)) for name, data in json.loads(proc.stdout.decode("utf-8")).items())


def bundle_bytes(entry=ENTRY):
    """The zip application's bytes: every module of the closure, empty ``__init__.py`` for the package levels above."""
    modules = closure(entry)
    buf = io.BytesIO()
    packages = set()
    sources = []
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(modules):
            path = modules[name]
            is_package = os.path.basename(path) == "__init__.py"
            arcname = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")
            parts = name.split(".")
            for depth in range(1, len(parts) if not is_package else len(parts)):
                packages.add("/".join(parts[:depth]))
            with open(path, "rb") as handle:
                info = zipfile.ZipInfo(arcname, STAMP)
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                archive.writestr(info, handle.read(), zipfile.ZIP_DEFLATED)
            sources.append((arcname, path))
        # Beside each source its bytecode for the controller's Python minor; a node with another Python finds the
        # magic number wrong and compiles the source, as it always did.
        for arcname, data in sorted(compiled(sources).items()):
            info = zipfile.ZipInfo(arcname[:-3] + ".pyc", STAMP)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, data, zipfile.ZIP_STORED)  # read as it is: no inflating on every run
        have = set(name.replace(".", "/") for name in modules if modules[name].endswith("__init__.py"))
        for package in sorted(packages - have):
            info = zipfile.ZipInfo(package + "/__init__.py", STAMP)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, b"")
        info = zipfile.ZipInfo("__main__.py", STAMP)
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        archive.writestr(info, MAIN.encode("utf-8"))
    return buf.getvalue(), sorted(modules)


def complete_policy(given):
    """The policy with the table's defaults filled in and types converted; ValueError naming the option."""
    if not isinstance(given, dict):
        raise ValueError("policy: must be a dict of readiness options, got %r" % (given,))
    spec = _readiness_options.argument_spec()
    spec.pop("fail_when_not_ready", None)
    spec.pop("wait", None)
    spec.pop("interval", None)
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise ValueError("policy: unknown option%s %s (the readiness options are %s)"
                         % ("s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(spec))))
    outcome = ArgumentSpecValidator(spec).validate(dict(given))
    if outcome.error_messages:
        raise ValueError("policy: %s" % "; ".join(outcome.error_messages))
    policy = outcome.validated_parameters
    _policy_validation.validate_policy(dict(policy, fail_when_not_ready=False, wait=0, interval=5), require_jmespath=False)
    return policy


def check_deadline(policy, deadline, schedule, slurm, interval_minutes):
    """The run's deadline against its schedule and the policy's timeouts (``_hc_runtime.check_fit``), on the
    controller: a policy that could never finish before slurmd kills it is refused at install, not at every run."""
    validated = _policy_validation.validate_policy(dict(policy, fail_when_not_ready=False, wait=0, interval=5),
                                                   require_jmespath=False)
    subsets = _policy.subsets_for(validated)
    gathers_gpus = "gpus" in subsets or "all" in subsets
    return _hc_runtime.check_fit(deadline, float(policy["gpu_timeout"]), gathers_gpus, slurm, schedule, interval_minutes)


class ActionModule(ControllerAction):

    def act(self, result, task_vars):
        _validation, args = self.validate_argument_spec(argument_spec=dict(
            dest=dict(type="path", required=True), policy=dict(type="dict", default={}),
            deadline_seconds=dict(type="float", default=_hc_runtime.DEFAULT_DEADLINE),
            schedule=dict(type="str", default="none", choices=list(_hc_runtime.SCHEDULES)),
            slurm=dict(type="bool", default=False), interval_minutes=dict(type="int", default=5),
            remediation=dict(type="dict", default={})))
        problem = None
        try:
            remediation = _remediation.validate(args["remediation"])
            policy = complete_policy(args["policy"])
            check_deadline(policy, args["deadline_seconds"], args["schedule"], args["slurm"] or args["schedule"] == "slurm",
                           args["interval_minutes"])
        except ValueError as exc:
            problem = str(exc)
        if problem:
            raise AnsibleActionFail(problem)
        data, modules = bundle_bytes()
        dest = args["dest"]
        try:
            with open(dest, "rb") as handle:
                changed = handle.read() != data
        except (IOError, OSError):
            changed = True
        if changed:
            try:
                write_file(dest, data, mode=0o644, prefix=".health_check.")
            except (IOError, OSError) as exc:
                raise AnsibleActionFail("dest: cannot write the bundle to %s: %s" % (dest, exc.strerror or exc))
        result.update(changed=changed, dest=dest, modules=modules, size=len(data), policy=policy, remediation=remediation)
        return result
