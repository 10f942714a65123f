# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The product's own cold path in the replay (issue 35): claim, freeze, evict, thaw, as the admission launcher
(plugins/module_utils/_build/_admission.py) takes them, on bench/replay.py's model of the compiles.

The launcher's decisions, called as it calls them: ``_admission_policy.pick_next`` (an unlearned compile claims
``claim``: its default, at most the budget per CPU; one evicted before claims the whole room, ``first``) and
``_admission_pressure.decide`` (freeze the growing compile furthest from done when what runs, grown for the horizon,
would cross the budget; evict a frozen one when freezing cannot make room; thaw in freeze order), nothing new
started while one is frozen (``admitting``). Taken when the launcher takes them, not continuously: at each sample of
a running compile (every ``sample_seconds`` from its start; its ``live``, ``rate`` and reservation are refreshed
then and stay stale until its next sample) and when a compile ends or is evicted (its launcher leaves the ledger).
Horizon = 2 x sample_seconds + poll_seconds, the launcher's. ``rate``: "model" (the growth the model gives at the
sample: peak / (grow x seconds) x the CPU rate, while growing) or "measured" (the launcher's: growth over the last
max(1, 3 x sample_seconds) seconds of samples or over the last interval, whichever is lower, the history restarted
at a freeze). Before its first sample a compile is ``fresh``: the launcher counts its reservation. A frozen compile's entry keeps
the rate sampled before its freeze (the launcher's ``rate=e.get("rate")`` while frozen).

A frozen compile makes no progress, takes no CPU and keeps its memory; an evicted one loses its work and queues
again first (claiming the whole room). The kernel's OOM killer is still modelled between decisions (what all compiles
hold - frozen ones included - reaching the node's memory kills the largest; it queues again, its partial peak known as
a killed one, unlearned): a decision that comes too late shows as an OOM kill. Not modelled: the settle wait (0.5 s)
before a first decision, the launchers' own memory (``launcher_bytes``, 0 by default, as in the warm rows).
``limits`` [(seconds, GiB)] changes the node's memory mid-build: the budget is read again at the next decision (the
live budget), the kernel kills at once whatever is held over the new limit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "module_utils", "_build"))
import replay  # noqa: E402 pylint: disable=wrong-import-position
import _admission_policy as policy  # noqa: E402 pylint: disable=wrong-import-position,import-error
import _admission_pressure as pressure  # noqa: E402 pylint: disable=wrong-import-position,import-error
import _admission_settings as settings  # noqa: E402 pylint: disable=wrong-import-position,import-error

SAMPLE = float(settings.DEFAULTS["sample_seconds"])
POLL = float(settings.DEFAULTS["poll_seconds"])
EPS = replay.EPS


class Wide:
    """ninja wide: every compile's launcher queues at once (the launcher, not ninja, bounds what runs)."""
    name = "product cold (claim, freeze, evict)"

    @staticmethod
    def ninja_jobs(sim):
        return len(sim.pending) + 1


class ColdRun(replay.Run):
    """A running compile as its launcher's ledger entry shows it: what was sampled last, and whether it is frozen
    (a frozen one keeps the rate it grew at before, as the launcher writes it: what it may grow by once thawed)."""

    def __init__(self, job, now, reserved, since, learned, seconds, pid, sample=SAMPLE):
        replay.Run.__init__(self, job, now, reserved, since)
        self.learned, self.seconds, self.pid = learned, seconds, pid
        self.live, self.rate, self.frozen, self.next_sample, self.history = 0.0, 0.0, None, now + sample, [(now, 0.0)]
        self.fresh = True   # started, not sampled yet: the launcher counts its reservation (``fresh``)

    def entry(self):
        return {"pid": self.pid, "live": self.live, "rate": self.rate, "frozen": self.frozen, "fresh": self.fresh,
                "started": self.started, "seconds": self.seconds, "bytes": self.reserved, "learned": self.learned,
                "threads": 1}


class ColdSim(replay.Sim):
    """One build with the product's cold path (see the module's docstring); ``known`` as bench/replay.py's
    knowledge (cold: {}), so the same path runs warm and seeded too."""

    def __init__(self, jobs, cores, mem_gib, known, order=None, rate="model", sample=SAMPLE, poll=POLL,
                 launcher_bytes=0.0, limits=()):
        replay.Sim.__init__(self, jobs, cores, mem_gib, Wide(), known, order)
        self.limits = sorted(limits)    # [(seconds, GiB)]: the node's memory changes (the live budget, issue 35 item 2)
        self.rate_mode, self.sample, self.horizon, self.launcher_bytes = rate, sample, 2 * sample + poll, launcher_bytes
        self.first, self.counts, self.lost, self.pids, self.frozen_seq, self.most, self.top = set(), {}, 0.0, 0, 0, 0, 0.0
        self.ceiling = self.limit - settings.ALONE_RESERVE

    def set_limit(self, mem_gib):
        """The cgroup's limit changed: the launcher's next decision reads it (budget and ceiling); the kernel acts now,
        killing the largest while what is held is over it."""
        self.limit = mem_gib * replay.GIB
        self.budget, self.ceiling = self.limit - replay.RESERVE, self.limit - settings.ALONE_RESERVE
        while self.running and sum(r.memory() for r in self.running) + self.overhead() > self.limit + EPS:
            self.kill(max(self.running, key=lambda r: (r.memory(), r.started)))

    # -- what the ledger says ------------------------------------------------------------------------------------
    def learned(self, name):
        peak, seconds = self.known.get(name, (None, None))
        return bool(peak) and seconds is not None   # a killed one keeps its partial peak, unlearned

    def overhead(self):
        return self.launcher_bytes * (len(self.waiting) + len(self.running))

    def waiting_entries(self):
        found = []
        for entry in self.waiting:
            job = entry[2]
            peak, seconds = self.known.get(job.name, (None, None))
            learned = self.learned(job.name)
            need = (peak * replay.MARGIN if learned else max(peak * replay.MARGIN if peak else 0, replay.DEFAULT_BYTES))
            if job.name in self.first:
                need, learned = self.budget, False
            found.append({"pid": entry[0], "bytes": need, "threads": 1, "seconds": seconds if learned else None,
                          "learned": learned, "since": entry[0], "first": job.name in self.first, "budget": self.budget,
                          "ceiling": self.ceiling, "cpus": self.cores, "entry": entry})
        return found

    # -- the launcher's decision ---------------------------------------------------------------------------------
    def schedule(self):
        """``_admission.schedule``: relieve what runs (``decide``), then start what ``pick_next`` picks."""
        by_pid = dict((run.pid, run) for run in self.running)
        for action, pid in pressure.decide([r.entry() for r in self.running], self.budget, self.horizon, self.now,
                                           self.overhead(), replay.MARGIN):
            self.act(action, by_pid[pid])
        while pressure.admitting([r.entry() for r in self.running]) and self.waiting:
            pick = policy.pick_next(self.waiting_entries(), [r.entry() for r in self.running], self.budget, self.cores,
                                    replay.MARGIN, self.now, self.overhead())
            if pick is None:
                return
            entry = pick["entry"]
            self.waiting.remove(entry)
            self.first.discard(entry[2].name)
            self.pids += 1
            self.running.append(ColdRun(entry[2], self.now, pick["bytes"], entry[1], pick["learned"], pick["seconds"], self.pids,
                                        self.sample))
            self.trace.append((self.now, "start", entry[2].name))
            self.most = max(self.most, len(self.running))

    def act(self, action, run):
        self.counts[action] = self.counts.get(action, 0) + 1
        self.trace.append((self.now, action, run.job.name))
        if action == "freeze":
            self.frozen_seq += 1
            run.frozen = self.frozen_seq
        elif action == "thaw":
            run.frozen = None
        else:   # evict: killed, its work lost, queued again first and alone
            self.running.remove(run)
            self.lost += run.work
            self.first.add(run.job.name)
            self.waiting.append((self.seq, self.now, run.job))
            self.seq += 1

    def sampled(self, run):
        """What its launcher writes at a sample: live, rate, the reservation grown to live x margin."""
        live = run.memory()
        if self.rate_mode == "model" and not run.frozen:
            growing = run.growing()
            run.rate = run.job.peak * self.rate() / (run.job.grow * run.job.seconds) if growing else 0.0
        elif self.rate_mode != "model":
            window = max(1.0, 3 * self.sample)
            run.history = [p for p in run.history if self.now - p[0] <= window + EPS] + [(self.now, live)]
            if not run.frozen:   # the lower of the window's rate and the last interval's, as the launcher
                run.rate = min(policy.growth_rate(run.history[0], run.history[-1], self.sample),
                               policy.growth_rate(run.history[-2], run.history[-1], self.sample))
            else:
                run.history = [(self.now, live)]
        run.live, run.fresh = live, False
        run.reserved = max(run.reserved, live * replay.MARGIN)
        run.next_sample += self.sample

    # -- the model -----------------------------------------------------------------------------------------------
    def rate(self):
        demand = sum(r.job.cpu for r in self.running if not r.frozen)
        return min(1.0, self.cores / (demand + self.background)) if demand > 0 else 1.0

    def step(self):
        rate, active = self.rate(), [r for r in self.running if not r.frozen]
        dt, oom = min([r.next_sample for r in self.running] + [t for t, dummy in self.limits[:1]]) - self.now, False
        for run in active:
            dt = min(dt, (run.job.seconds - run.work) / rate)
            if run.growing():
                dt = min(dt, (run.job.grow * run.job.seconds - run.work) / rate)
        held = sum(r.memory() for r in self.running) + self.overhead()
        slope = sum(r.job.peak * rate / (r.job.grow * r.job.seconds) for r in active if r.growing())
        if slope > 0 and (self.limit - held) / slope < dt - EPS:
            dt, oom = max((self.limit - held) / slope, 0.0), True
        dt = max(dt, 0.0)
        self.now += dt
        for run in active:
            run.work = min(run.job.seconds, run.work + rate * dt)
        self.top = max(self.top, sum(r.memory() for r in self.running) + self.overhead())
        if oom:
            self.kill(max(self.running, key=lambda r: (r.memory(), r.started)))
        changed = self.limits and self.limits[0][0] <= self.now + EPS
        if changed:
            self.set_limit(self.limits.pop(0)[1])
        ended = [r for r in self.running if r.work >= r.job.seconds - EPS]
        for run in ended:
            self.running.remove(run)
            self.known[run.job.name] = (run.job.peak, run.job.seconds)
            self.trace.append((self.now, "end", run.job.name))
        due = [r for r in self.running if r.next_sample <= self.now + EPS]
        for run in due:
            self.sampled(run)
        if oom or changed or ended or due:
            self.schedule()

    def kill(self, run):
        self.running.remove(run)
        self.trace.append((self.now, "oom", run.job.name))
        self.oom_kills += 1
        name = run.job.name
        self.kills[name] = self.kills.get(name, 0) + 1
        if self.kills[name] >= replay.MAX_KILLS:
            self.failed = "%s killed %d times" % (name, self.kills[name])
        self.known[name] = (max(self.known.get(name, (0.0, None))[0] or 0.0, run.memory()), None)
        self.waiting.append((self.seq, self.now, run.job))
        self.seq += 1

    def run(self, max_events=400000):
        self.launch()
        self.schedule()
        for dummy in range(max_events):
            if self.failed or not (self.running or self.waiting or self.pending):
                break
            if not self.running:
                raise replay.ReplayError("the product's cold path started nothing with %d compiles waiting (at %.0f s)"
                                         % (len(self.waiting), self.now))
            self.step()
        else:
            raise replay.ReplayError("the product's cold path: no end after %d events (at %.0f s)" % (max_events, self.now))
        return {"makespan": float("inf") if self.failed else self.now, "oom_kills": self.oom_kills, "failed": self.failed,
                "freezes": self.counts.get("freeze", 0), "thaws": self.counts.get("thaw", 0),
                "evictions": self.counts.get("evict", 0), "lost_seconds": self.lost,
                "most_running": self.most, "top_bytes": self.top, "final_jobs": self.jobs}


def cold(jobs, cores, mem_gib, kind="cold", rng=None, **options):
    """One build through the product's cold path: bench/replay.py's result, with freezes, thaws, evictions and the
    compile-seconds evictions threw away."""
    return ColdSim(jobs, cores, mem_gib, replay.knowledge(jobs, kind, rng), **options).run()
