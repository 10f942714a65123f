# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.build_watch: follow every node's guarded build in one loop, print one
table per poll, write the build report at the end.

Run once (``run_once``), it reaches each watched node over that node's own connection (its inventory and
connection variables, as a task on that host would) and runs ``ansible.builtin.slurp`` of the build's status
file there, and ``ansible.builtin.async_status`` of its job once the status says the build ended (or every
few polls, in case the module died without saying so). Nodes are polled side by side (threads); a node that
stops answering is shown as unreachable and the others go on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view_input as view_input
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report

display = Display()

ARGUMENT_SPEC = dict(
    jobs=dict(type="dict", required=True),
    status_paths=dict(type="dict", default={}),
    run_ids=dict(type="dict", default={}),
    max_status_bytes=dict(type="int", default=1048576),
    interval=dict(type="float", default=30),
    timeout=dict(type="float", default=0),
    unreachable_after=dict(type="int", default=3),
    status_every=dict(type="int", default=5),
    report_dir=dict(type="path"),
    write=dict(type="bool", default=True),
    redraw=dict(type="str", default="auto", choices=["auto", "always", "never"]),
)


def check_jobs(jobs, status_paths=None, run_ids=None):
    """``{host: {jid, status_path, run_id}}`` from ``jobs`` (each a dict with jid and status_path and maybe
    run_id, or a job id with the path in ``status_paths``; run ids may come from ``run_ids``); AnsibleActionFail
    naming the option otherwise."""
    checked = {}
    status_paths = status_paths or {}
    run_ids = run_ids or {}
    for host, job in jobs.items():
        if isinstance(job, (str, int)) and not isinstance(job, bool) and str(job) and status_paths.get(host):
            job = {"jid": job, "status_path": status_paths[host]}
        if not isinstance(job, dict) or not job.get("jid") or not job.get("status_path"):
            raise AnsibleActionFail("jobs: the entry of %s must be a dict with jid (the async job id) and "
                                    "status_path (the guarded_build status file), or a job id with the path in "
                                    "status_paths, got %r" % (host, job))
        run_id = job.get("run_id", run_ids.get(host))
        if run_id is not None and (not isinstance(run_id, (str, int)) or isinstance(run_id, bool) or not str(run_id).strip()):
            raise AnsibleActionFail("%s: the run id of %s must be a non-empty string (the run_id given to "
                                    "guarded_build), got %r" % ("jobs" if "run_id" in job else "run_ids", host, run_id))
        if not isinstance(job["status_path"], str) or not job["status_path"].startswith("/") or "\x00" in job["status_path"]:
            raise AnsibleActionFail("jobs: the status_path of %s must be an absolute path, got %r" % (host, job["status_path"]))
        checked[str(host)] = {"jid": str(job["jid"]), "status_path": job["status_path"],
                              "run_id": None if run_id is None else str(run_id)}
    return checked


def check_numbers(args):
    if not 0.1 <= args["interval"] <= 3600:
        raise AnsibleActionFail("interval must be between 0.1 and 3600 seconds, got %r" % args["interval"])
    if not 0 <= args["timeout"] <= 30 * 86400:
        raise AnsibleActionFail("timeout must be between 0 (none) and 2592000 seconds, got %r" % args["timeout"])
    if not 1 <= args["unreachable_after"] <= 1000:
        raise AnsibleActionFail("unreachable_after must be between 1 and 1000 polls, got %r" % args["unreachable_after"])
    if not 1 <= args["status_every"] <= 1000:
        raise AnsibleActionFail("status_every must be between 1 and 1000 polls, got %r" % args["status_every"])
    if not 4096 <= args.get("max_status_bytes", 1048576) <= 64 << 20:
        raise AnsibleActionFail("max_status_bytes must be between 4096 and 67108864, got %r" % args["max_status_bytes"])


def check_report_dir(args):
    """Refuse a report_dir that can never hold the report before anything is watched (not after an hour's build):
    blank, a NUL byte, or an existing path that is not a directory."""
    report_dir = args["report_dir"]
    if not args["write"] or report_dir is None:
        return
    if not report_dir.strip() or "\x00" in report_dir:
        raise AnsibleActionFail("report_dir: %r is not a directory path" % report_dir)
    path = os.path.abspath(os.path.expanduser(report_dir))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise AnsibleActionFail("report_dir: %s exists and is not a directory; nothing was written" % path)


def short_error(exc):
    """One short line for a connection error: ssh's own reason (``[Errno 32] Broken pipe``, ``Connection
    refused``) rather than Ansible's sentence around it."""
    text = " ".join(to_native(exc).split())
    if not text:
        return type(exc).__name__
    if len(text) > 60 and ": " in text:
        text = text.rsplit(": ", 1)[-1]
    return text


def controller_on_terminal():
    """Whether ansible-playbook's own standard output is a terminal. The action runs in a worker process whose
    stdout is not the controller's, so its parent's fd 1 is asked (Linux /proc), then our own."""
    for pid in (os.getppid(), os.getpid()):
        try:
            if os.readlink("/proc/%d/fd/1" % pid).startswith(("/dev/pts/", "/dev/tty")):
                return True
        except OSError:
            continue
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class NodeWatch(object):
    """One node: its connection, a handler to run modules there, what was last learned."""

    def __init__(self, name, job, handler, variables, max_bytes=1048576):
        self.name = name
        self.job = job
        self.handler = handler
        self.variables = variables
        self.max_bytes = max_bytes
        self.node = {"status": None, "result": None, "unreachable": None, "status_error": None, "foreign": False}
        self.failures = 0
        self.polls = 0
        self.async_dir = None
        self.last_error = None

    def run_module(self, module, args):
        result = self.handler._execute_module(module_name=module, module_args=args, task_vars=self.variables)  # pylint: disable=protected-access
        if result.get("unreachable"):
            raise AnsibleConnectionFailure(result.get("msg") or "unreachable")
        return result

    def read_status(self):
        """The status file of the run followed, read bounded on the node (build_status) and checked here; None
        while there is none (or another run's). What is wrong with it is kept as the node's ``status_error``."""
        result = self.run_module("gpufleet.preflight.build_status",
                                 {"path": self.job["status_path"], "max_bytes": self.max_bytes})
        error = result.get("msg") if result.get("failed") else result.get("error")
        if error:
            self.node["status_error"] = " ".join(to_text(error).split())[:300]
            return None
        raw = result.get("status")
        if raw is None:
            return None  # not written yet (queued), or removed
        status, error = view_input.check_status(raw)
        if error:
            self.node["status_error"] = "%s: %s" % (self.job["status_path"], error)
            return None
        if not view.belongs(status, self.job.get("run_id")):
            self.node["foreign"] = True  # an earlier run's file: this run's module has not written its own yet
            self.node["status_error"] = None
            return None
        self.node.update(foreign=False, status_error=None, status=status)
        return status

    def read_job(self):
        if self.async_dir is None:
            async_dir = self.handler.get_shell_option("async_dir", default="~/.ansible_async")
            self.async_dir = self.handler._remote_expand_user(async_dir)  # pylint: disable=protected-access
        args = {"jid": self.job["jid"], "mode": "status", "_async_dir": self.async_dir}
        result = self.run_module("ansible.legacy.async_status", args)
        if result.get("finished"):
            return result
        if result.get("failed") and not result.get("started"):
            return result  # the job file is gone or unreadable: the job's end is all there is to learn
        return None

    def poll(self, status_every):
        """One poll; returns nothing, updates ``self.node``. Only the job's result ends a node (a status file
        saying succeeded may be an earlier run's, or the module may still be writing its result)."""
        if view.over(self.node):
            return
        self.polls += 1
        try:
            status = self.read_status()
            state = (status or {}).get("state")
            ended = state in ("succeeded", "failed", "stopped")
            if ended or status is None or self.polls % status_every == 0:
                job = self.read_job()
                if job is not None:
                    if not ended:  # the last status with the whole timeline
                        self.read_status()
                    self.node["result"] = view_input.check_result(job)
            self.failures = 0
        except (AnsibleConnectionFailure, AnsibleError, OSError) as exc:
            self.failures += 1
            self.last_error = short_error(exc)
            self.node["error"] = self.last_error

    def mark_unreachable(self, limit):
        if self.failures >= limit and not self.node["unreachable"]:
            self.node["unreachable"] = self.last_error


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def _handler_for(self, host, variables):
        """An action handler whose connection is ``host``'s own, set up from its variables as a task there would be."""
        templar = self._templar.copy_with_new_env(available_variables=variables)
        conn_type = variables.get("ansible_connection") or self._task.connection or "ssh"
        conn_type = templar.template(conn_type)
        play_context = self._play_context.set_task_and_variable_override(task=self._task, variables=variables,
                                                                         templar=templar)
        connection = self._shared_loader_obj.connection_loader.get(
            conn_type, play_context, None, task_uuid=self._task._uuid, ansible_playbook_pid=to_text(os.getppid()))
        if connection is None:
            raise AnsibleActionFail("jobs: %s: the connection plugin %r was not found" % (host, conn_type))
        task_keys = self._task.dump_attrs()
        task_keys["timeout"] = play_context.timeout
        if play_context.password:
            task_keys["password"] = play_context.password
        task_keys.pop("retries", None)
        connection.set_options(task_keys=task_keys, var_options=connection._resolve_option_variables(variables, templar))
        shell = getattr(connection, "_shell", None)
        if shell is not None:
            shell.set_options(task_keys=task_keys, var_options=shell._resolve_option_variables(variables, templar)
                              if hasattr(shell, "_resolve_option_variables") else {})
        become = getattr(self._connection, "become", None) if self._connection is not None else None
        if become is not None:
            mine = self._shared_loader_obj.become_loader.get(become.name)
            mine.set_options(task_keys=task_keys, var_options=dict(
                (name, templar.template(variables[name])) for name in variables if name.startswith("ansible_become")))
            connection.set_become_plugin(mine)
        return self._shared_loader_obj.action_loader.get(
            "ansible.legacy.normal", task=self._task, connection=connection, play_context=play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)

    def _print(self, lines, previous, redraw):
        text = "\n".join(lines)
        if redraw and previous:
            # move up over the previous table and clear to the end of the screen: the table is redrawn in place
            text = "\x1b[%dA\x1b[J%s" % (previous, text)
        display.display(text)

    def _watch(self, watches, args, redraw, started, deadline):
        """Poll every node until all are over (or the timeout): ``(polls, nodes)``."""
        last_lines, previous_count = None, 0
        lock = threading.Lock()
        polls = 0
        nodes = {}  # jobs {}: nothing to follow, an empty report
        with ThreadPoolExecutor(max_workers=max(1, min(len(watches), 16))) as pool:
            while watches:
                polls += 1
                list(pool.map(lambda watch: watch.poll(args["status_every"]), watches.values()))
                with lock:
                    for watch in watches.values():
                        watch.mark_unreachable(args["unreachable_after"])
                    nodes = dict((name, watch.node) for name, watch in watches.items())
                    lines = view.render_table(nodes, time.time() - started)
                    if lines[1:] != (last_lines or [None])[1:]:  # the counts line's clock alone is no news
                        self._print(lines, previous_count, redraw)
                        last_lines, previous_count = lines, len(lines)
                if view.all_final(nodes):
                    break
                if deadline and time.time() > deadline:
                    for watch in watches.values():
                        if not view.over(watch.node):
                            watch.node["unreachable"] = "still running after the watch's timeout of %ss" % args["timeout"]
                    break
                time.sleep(args["interval"])
        return polls, nodes

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        check_numbers(args)
        check_report_dir(args)
        jobs = check_jobs(args["jobs"], args["status_paths"], args["run_ids"])
        hostvars = task_vars.get("hostvars") or {}
        watches = {}
        for host, job in sorted(jobs.items()):
            if host not in hostvars:
                raise AnsibleActionFail("jobs: %s is not a host of the inventory" % host)
            variables = hostvars[host]
            watches[host] = NodeWatch(host, job, self._handler_for(host, variables), variables, args["max_status_bytes"])
        redraw = args["redraw"] == "always" or (args["redraw"] == "auto" and controller_on_terminal())
        started = time.time()
        deadline = started + args["timeout"] if args["timeout"] else None
        with say_on_interrupt(watches):
            polls, nodes = self._watch(watches, args, redraw, started, deadline)
        report = view.build_report(nodes, finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        files = []
        if args["write"] and args["report_dir"] is not None:
            files = write_reports(args["report_dir"], report)
        results = {}
        for name, watch in watches.items():
            node = watch.node
            entry = dict(node.get("result") or {})
            entry.pop("ansible_facts", None)
            entry.update(phase=view.phase(node), status=node.get("status"))
            if node.get("unreachable"):
                entry.update(failed=True, unreachable_during_build=True,
                             msg="%s became unreachable during the build: %s" % (name, node["unreachable"]))
            elif node.get("result") is None:
                entry.update(failed=True, msg="no result from the build of %s" % name)
            results[name] = entry
        result.update(changed=any(r.get("changed") for r in results.values()), results=results, report=report,
                      files=files, polls=polls, msg=view.summary_line(report))
        return result


def tell_the_controller(text):
    """Write ``text`` to ansible-playbook's own standard error. The action runs in a worker process whose stdio is
    /dev/null and whose Display goes through a queue the interrupted controller no longer reads, so its parent's
    fd 2 is opened (Linux /proc; appending, so a redirected log is never overwritten); the Display otherwise."""
    try:
        fd = os.open("/proc/%d/fd/2" % os.getppid(), os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        display.display(text, stderr=True)
        return
    try:
        os.write(fd, ("\n" + text + "\n").encode("utf-8", "replace"))
    except OSError:
        display.display(text, stderr=True)
    finally:
        os.close(fd)


class say_on_interrupt(object):  # pylint: disable=invalid-name
    """While the watch runs, Ctrl-C (SIGINT, which ansible-playbook forwards to its workers) or SIGTERM first tells
    the user that the builds run on and how to stop them, then ends the worker as ansible-core's handler would."""

    def __init__(self, watches):
        self.watches = watches
        self.previous = {}

    def handle(self, signum, frame):
        tell_the_controller(interrupted_message(self.watches))
        previous = self.previous.get(signum)
        self.restore()
        if callable(previous):
            previous(signum, frame)  # ansible-core's worker handler: ends the worker's process group
        raise KeyboardInterrupt()

    def restore(self):
        for signum, previous in self.previous.items():
            try:
                signal.signal(signum, previous)
            except (ValueError, TypeError):
                pass
        self.previous = {}

    def __enter__(self):
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, self.handle)
            except ValueError:  # not the main thread: nothing to hook
                pass
        return self

    def __exit__(self, *exc_info):
        self.restore()
        return False


def interrupted_message(watches):
    """What an interrupted watch tells the user: which builds run on, and how to stop or follow them."""
    running = sorted(name for name, watch in watches.items() if not view.over(watch.node))
    if not running:
        return "build_watch interrupted: every build had already ended."
    return ("build_watch interrupted: the build%s on %s keep%s running on the node%s (started with async; each "
            "holds its build dir's lock).\n"
            "  To stop them (each build ends through its own guarded_build, which releases the lock and the memory "
            "cgroup and marks the status \"stopped\"):\n"
            "    ansible-playbook gpufleet.preflight.build_stop -i <inventory> -e build_stop_hosts=%s\n"
            "  (a build other than the sgl_kernel role's: add -e build_stop_chdir=<its chdir>, and "
            "-e build_stop_build_dir=<its build_dir> when that is not build)\n"
            "  To build on later, run the same playbook again: a build resumes in its build dir (a rerun while one "
            "runs is refused naming its owner)." % (
                "" if len(running) == 1 else "s", ", ".join(running), "s" if len(running) == 1 else "",
                "" if len(running) == 1 else "s", ",".join(running)))


def write_reports(report_dir, report):
    """build.json, build.md, build.html into ``report_dir`` (created), each written aside and renamed over; an
    existing file that is not an earlier build report is never overwritten."""
    report_dir = os.path.abspath(os.path.expanduser(report_dir))
    renders = (("build.json", view.render_json), ("build.md", view.render_markdown),
               ("build.html", _html_report.render_build_html))
    try:
        if not os.path.isdir(report_dir):
            os.makedirs(report_dir, 0o777)
        for name, dummy in renders:  # all checked before any is written
            path = os.path.join(report_dir, name)
            if os.path.lexists(path):
                head = b""
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as handle:
                        head = handle.read(256)
                if os.path.islink(path) or not os.path.isfile(path) or (
                        head and not head.startswith(view.REPORT_SIGNATURES[name])):
                    raise AnsibleActionFail("report_dir: %s exists and is not a build report written by "
                                            "gpufleet.preflight; nothing was overwritten" % path)
        written = []
        for name, render in renders:
            path = os.path.join(report_dir, name)
            write_file(path, render(report), mode=None)
            written.append(path)
        return written
    except (IOError, OSError) as exc:
        raise AnsibleActionFail("report_dir: cannot write the build report to %s: %s" % (report_dir, exc.strerror or exc))
