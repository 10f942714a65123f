# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.fleet_reports: render and write the fleet reports in-process.

Writing three files through file/copy tasks delegated to localhost costs seven module runs (about
0.7 x an `ansible -m ping` of the fleet, docs/benchmarks.md); the controller can simply write them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import stat
import time

from ansible.errors import AnsibleActionFail
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._action import ControllerAction
from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate, _html_report, _report, _report_input

ARGUMENT_SPEC = dict(
    results=dict(type="dict", required=True),
    report_dir=dict(type="path"),
    write=dict(type="bool", default=True),
    max_not_ready=dict(type="raw"),
    stop_when_none_ready=dict(type="bool", default=True),
    policy=dict(type="dict", default={}),
    html_template=dict(type="path"),
    stats_key=dict(type="str"),
)
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def current_umask():
    """The process umask (reading it means setting it; set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def resolve_report_dir(report_dir, cwd):
    """Unset -> ``<cwd>/reports``; relative -> under ``cwd``. ``cwd`` is the real one (os.getcwd), not $PWD,
    which an environment may lack or carry stale."""
    return os.path.normpath(os.path.join(cwd, report_dir or "reports"))


def describe_kind(mode):
    """What a file of ``mode`` (st_mode) is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link"),
                        (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "not a regular file"


def _head(path):
    """The first bytes of a regular file, read without following a link and without waiting on a FIFO that
    appeared since the lstat (O_NONBLOCK; re-checked on the open descriptor): None when it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except (IOError, OSError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 256)
    except (IOError, OSError):
        return None
    finally:
        os.close(fd)


def foreign_files(directory, names):
    """Existing files among ``names`` that are not earlier gpufleet reports: never overwritten silently.
    ``[(path, what it is: a FIFO, a link ... or None for a regular file)]``; anything but a regular file is never
    opened."""
    found = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            mode = os.lstat(path).st_mode
        except (IOError, OSError):
            continue
        if not stat.S_ISREG(mode):
            found.append((path, describe_kind(mode)))
            continue
        head = _head(path)
        if head is None or not _report.is_own_report(name, head):
            found.append((path, None))
    return found


def report_dir_problem(report_dir):
    """Why ``report_dir`` cannot hold the reports before anything is written (it exists and is no directory, or
    a dangling link), or None."""
    try:
        mode = os.lstat(report_dir).st_mode
    except (IOError, OSError):
        return None
    if stat.S_ISLNK(mode) and not os.path.exists(report_dir):
        return "report_dir: %s is a symbolic link to a missing target, not a directory" % report_dir
    if not os.path.isdir(report_dir):
        return "report_dir: %s exists and is %s, not a directory: choose a directory (it is created when missing)" % (
            report_dir, describe_kind(os.stat(report_dir).st_mode))
    return None


def write_error(report_dir, exc):
    """A failed write (or mkdir) in words: only a full disk or quota asks for free space."""
    text = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free space there or choose another report_dir"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "make it writable for this user or choose another report_dir"
    else:
        advice = "choose another report_dir"
    return "report_dir: cannot write the reports to %s: %s; the previous reports there are left as they were (%s)" % (
        report_dir, text, advice)


def collection_version(root=COLLECTION_ROOT):
    """The collection's version: MANIFEST.json of an installed collection, else galaxy.yml of a checkout."""
    try:
        with open(os.path.join(root, "MANIFEST.json")) as handle:
            return str(json.load(handle)["collection_info"]["version"])
    except (IOError, OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(root, "galaxy.yml")) as handle:
            found = re.search(r"^version:\s*['\"]?([^'\"\s]+)", handle.read(), re.M)
        return found.group(1) if found else None
    except (IOError, OSError):
        return None


def run_facts(task_vars):
    """What the reports say of the run: the collection's version, the --limit and the inventory sources."""
    task_vars = task_vars or {}
    sources = task_vars.get("ansible_inventory_sources")
    return dict(collection_version=collection_version(), limit=task_vars.get("ansible_limit") or None,
                inventory=[str(s) for s in sources] if isinstance(sources, (list, tuple)) else (str(sources) if sources else None))


def write_atomically(directory, name, content, mode):
    """Write aside, then rename over (_atomic.write_file): a reader never sees half a report. ``mode``: 0666 less
    the umask, as any file the user writes."""
    return write_file(os.path.join(directory, name), content, mode=mode)


class ActionModule(ControllerAction):

    def act(self, result, task_vars):
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            _report_input.check_results(args["results"])
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))
        if args["report_dir"] and (not args["report_dir"].strip() or "\0" in args["report_dir"]):
            raise AnsibleActionFail("report_dir: %r is not a directory path (unset: ./reports here)" % (args["report_dir"],))
        results = dict((str(name), value) for name, value in args["results"].items())
        report = _report.build_report(results, policy=args["policy"], run=run_facts(task_vars),
                                      finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        problem = None
        try:
            report["gate"] = _gate.gate(report, args["max_not_ready"], args["stop_when_none_ready"])
        except ValueError as exc:
            problem = str(exc)
        if problem:  # raised outside the except block: a handled error carries no traceback
            raise AnsibleActionFail(problem)
        template = args["html_template"]
        if template is not None and not os.path.isfile(template):
            raise AnsibleActionFail("html_template: %s is not a readable template file" % template)
        table = _report.render_table(report)
        files = []
        if args["write"]:
            files = self._write(report, resolve_report_dir(args["report_dir"], os.getcwd()), template)
        gate = report["gate"]
        result.update(changed=False, report=report, table=table, gate=gate, files=files,
                      msg=_report.summary_line(report))
        if args["stats_key"]:
            # What a set_stats task would publish, without its templating over every host (issue 27 item 5).
            result["ansible_stats"] = dict(data={args["stats_key"]: _gate.run_stats(results, gate)}, per_host=False,
                                           aggregate=False)
        return result

    @staticmethod
    def _write(report, report_dir, template):
        problem = report_dir_problem(report_dir)
        if problem:
            raise AnsibleActionFail(problem)
        html_page = None
        try:
            html_page = _html_report.render_preflight_html(report, template)
        except _html_report.TemplateError as exc:
            problem = "html_%s" % exc
        if html_page is None:
            raise AnsibleActionFail(problem)
        pages = (("preflight.json", _report.render_json(report)), ("preflight.xml", _report.render_junit(report)),
                 ("preflight.md", _report.render_markdown(report)), ("preflight.html", html_page))
        foreign = foreign_files(report_dir, [name for name, _text in pages])
        if foreign:
            raise AnsibleActionFail("report_dir: %s; nothing was overwritten: move %s away or choose another report_dir" % (
                "; ".join("%s exists and is %snot a report written by gpufleet.preflight" % (path, what + ", " if what else "")
                          for path, what in foreign),
                "it" if len(foreign) == 1 else "them"))
        mode = 0o666 & ~current_umask()
        failure = None
        try:
            if not os.path.isdir(report_dir):
                os.makedirs(report_dir, 0o777)
            return [write_atomically(report_dir, name, text, mode) for name, text in pages]
        except (IOError, OSError) as exc:
            failure = write_error(report_dir, exc)
        raise AnsibleActionFail(failure)
