# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.fleet_reports: render and write the fleet reports in-process.

Writing three files through file/copy tasks delegated to localhost costs seven module runs (about
0.7 x an `ansible -m ping` of the fleet, docs/benchmarks.md); the controller can simply write them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report, _report

ARGUMENT_SPEC = dict(
    results=dict(type="dict", required=True),
    report_dir=dict(type="path"),
    write=dict(type="bool", default=True),
    max_not_ready=dict(type="raw"),
    policy=dict(type="dict", default={}),
)


def current_umask():
    """The process umask (reading it means setting it; set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def resolve_report_dir(report_dir, cwd):
    """Unset -> ``<cwd>/reports``; relative -> under ``cwd``. ``cwd`` is the real one (os.getcwd), not $PWD,
    which an environment may lack or carry stale."""
    return os.path.normpath(os.path.join(cwd, report_dir or "reports"))


def foreign_files(directory, names):
    """Existing files among ``names`` that are not earlier gpufleet reports: never overwritten silently."""
    found = []
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.lexists(path):
            continue
        try:
            with open(path, "rb") as handle:
                head = handle.read(256)
        except (IOError, OSError):
            head = b""
        if os.path.islink(path) or not os.path.isfile(path) or not _report.is_own_report(name, head):
            found.append(path)
    return found


def write_atomically(directory, name, content, mode):
    """Write aside, then rename over: a reader never sees half a report. ``mode``: 0666 less the umask,
    as any file the user writes."""
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix="." + name + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        os.chmod(tmp_path, mode)
        os.rename(tmp_path, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise
    return os.path.join(directory, name)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            _report.check_results(args["results"])
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))
        if args["report_dir"] and (not args["report_dir"].strip() or "\0" in args["report_dir"]):
            raise AnsibleActionFail("report_dir: %r is not a directory path (unset: ./reports here)" % (args["report_dir"],))
        results = dict((str(name), value) for name, value in args["results"].items())
        report = _report.build_report(results, policy=args["policy"],
                                      finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        try:
            abort, reason = _report.too_many_not_ready(report, args["max_not_ready"])
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))
        table = _report.render_table(report)
        files = []
        if args["write"]:
            report_dir = resolve_report_dir(args["report_dir"], os.getcwd())
            renders = (("preflight.json", _report.render_json), ("preflight.xml", _report.render_junit),
                       ("preflight.md", _report.render_markdown), ("preflight.html", _html_report.render_preflight_html))
            foreign = foreign_files(report_dir, [name for name, _render in renders])
            if foreign:
                raise AnsibleActionFail("report_dir: %s exist%s and %s not a report written by gpufleet.preflight; "
                                        "nothing was overwritten: move %s away or choose another report_dir" % (
                                            ", ".join(foreign), "s" if len(foreign) == 1 else "",
                                            "is" if len(foreign) == 1 else "are", "it" if len(foreign) == 1 else "them"))
            mode = 0o666 & ~current_umask()
            try:
                if not os.path.isdir(report_dir):
                    os.makedirs(report_dir, 0o777)
                files = [write_atomically(report_dir, name, render(report), mode) for name, render in renders]
            except (IOError, OSError) as exc:
                raise AnsibleActionFail("report_dir: cannot write the reports to %s: %s; the previous reports there are "
                                        "left as they were (free space there or choose another report_dir)" % (
                                            report_dir, exc.strerror or exc))
        result.update(changed=False, report=report, table=table, gate=dict(abort=abort, reason=reason), files=files,
                      msg=_report.summary_line(report))
        return result
