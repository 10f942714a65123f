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
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

ARGUMENT_SPEC = dict(
    results=dict(type="dict", required=True),
    report_dir=dict(type="path"),
    write=dict(type="bool", default=True),
    max_not_ready=dict(type="raw"),
    policy=dict(type="dict", default={}),
)


def write_atomically(directory, name, content):
    """Write aside, then rename over: a reader never sees half a report."""
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix="." + name + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        os.chmod(tmp_path, 0o644)
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
            if not args["report_dir"]:
                raise AnsibleActionFail("report_dir: needed to write the reports (or set write: false)")
            renders = (("preflight.json", _report.render_json), ("preflight.xml", _report.render_junit),
                       ("preflight.md", _report.render_markdown))
            try:
                if not os.path.isdir(args["report_dir"]):
                    os.makedirs(args["report_dir"], 0o755)
                files = [write_atomically(args["report_dir"], name, render(report)) for name, render in renders]
            except (IOError, OSError) as exc:
                raise AnsibleActionFail("report_dir: cannot write the reports to %s: %s; the previous reports there are "
                                        "left as they were (free space there or choose another report_dir)" % (
                                            args["report_dir"], exc.strerror or exc))
        result.update(changed=False, report=report, table=table, gate=dict(abort=abort, reason=reason), files=files,
                      msg=_report.summary_line(report))
        return result
