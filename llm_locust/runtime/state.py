"""llm-locust's state in one Locust process (`RunState`): the part every process shares and the parts of its role.

`shared.Shared` (every process: environment, settings, trace); `lead.Lead` (master, local runner: load control,
merged metrics, results, signals, live export and view); `users_part.UsersPart` (local runner, worker: what its
users reach — pacer, recorder, watchdog, replicas, model, request lines — and what it reports). A part exists only
in the processes it applies to: a local runner has both, a master only the lead, a worker only the users part.
The process's `Role` (`LocalRole`, `MasterRole`, `WorkerRole`) says which parts it has and registers only their
listeners.
"""

from __future__ import annotations

from typing import Any

from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from llm_locust.config.settings import Settings
from llm_locust.runtime.clock_sync import answer_pings, ping_master
from llm_locust.runtime.control import PLAN_MESSAGE
from llm_locust.runtime.lead import Lead
from llm_locust.runtime.master_watch import watch_master
from llm_locust.runtime.runner_ops import INTERRUPTED_MESSAGE, LAST_REPORT_MESSAGE, send_last_report
from llm_locust.runtime.secret_wire import WorkerGate, master_sends_no_secret
from llm_locust.runtime.shared import Shared
from llm_locust.runtime.users_part import UsersPart


class Role:
    """What one Locust process is in a run — which parts of the state it has (`runs_users`: a `UsersPart`;
    `leads`: a `Lead`) — and the Locust listeners only those parts need (`register`)."""

    name = ""
    runs_users = True  # records its users' requests and paces them
    leads = True  # controls the load, writes the results, watches the signals

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        """Add the listeners of `state`'s parts to Locust's `events` (and messages to `runner`)."""
        events.test_start.add_listener(state._on_test_start)

    def admits(self) -> bool:
        """Whether this process may start the test now beginning (its settings rebuilt, nothing sent yet)."""
        return True


def _users_listen(users: UsersPart | None, events: Any) -> None:
    """The listeners of a process running users (local runner, worker)."""
    assert users is not None
    events.request.add_listener(users._on_request)
    events.test_stopping.add_listener(users._on_users_stopping)
    events.test_stop.add_listener(users._on_users_stopped)
    events.quitting.add_listener(users.stop_auth)


def _lead_listens(lead: Lead | None, events: Any) -> None:
    """The listeners of the process leading the run (master, local runner)."""
    assert lead is not None
    events.test_stop.add_listener(lead._on_test_stop)
    events.quitting.add_listener(lead._on_quitting)


class LocalRole(Role):
    """A local runner: runs the users and leads the run."""

    name = "local"

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        _users_listen(state.users, events)
        _lead_listens(state.lead, events)


class WorkerRole(Role):
    """A worker: runs its users, reports to the master, follows the master's plans, measures its clock's offset from
    the master's, quits when the master is gone."""

    name = "worker"
    leads = False

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        users = state.users
        _users_listen(users, events)
        assert users is not None
        events.report_to_master.add_listener(users._on_report_to_master)
        runner.register_message(PLAN_MESSAGE, users._on_plan)
        runner.register_message(LAST_REPORT_MESSAGE, send_last_report)
        ping_master(runner, users.clock, users.clock_measured)
        events.quitting.add_listener(users._on_worker_quitting)
        watch_master(state.shared.environment, runner)
        self._gate = WorkerGate(state.shared, runner)

    def admits(self) -> bool:
        """A worker refuses a test aimed elsewhere than its own options say, or needing a secret it lacks."""
        return self._gate.admits()


class MasterRole(Role):
    """The master: runs no user; merges the workers' reports, answers their clock pings and leads the run."""

    name = "master"
    runs_users = False

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        lead = state.lead
        _lead_listens(lead, events)
        assert lead is not None
        events.worker_report.add_listener(lead._on_worker_report)
        runner.register_message(INTERRUPTED_MESSAGE, lead._on_worker_interrupted)
        answer_pings(runner)
        master_sends_no_secret(state.shared, runner)


def role_of(runner: Any) -> Role:
    """The role of the process whose runner is `runner`."""
    if isinstance(runner, MasterRunner):
        return MasterRole()
    return WorkerRole() if isinstance(runner, WorkerRunner) else LocalRole()


class RunState:
    """llm-locust's state in one Locust process, for one environment: `shared`, and the parts of its role — `lead`
    (None on a worker) and `users` (None on a master)."""

    def __init__(self, environment: Environment) -> None:
        runner = environment.runner
        self.role = role_of(runner)
        self.shared = Shared(environment, self.role.leads)
        self.users = UsersPart(self.shared) if self.role.runs_users else None
        self.lead = Lead(self.shared, self.users) if self.role.leads else None
        self.role.register(self, environment.events, runner)

    @property
    def settings(self) -> Settings:
        """The test's settings (`Shared.settings`)."""
        return self.shared.settings

    def _on_test_start(self, environment: Environment, **_: Any) -> None:
        """A test starts: the lead closes its previous test's results, the settings are rebuilt from the (now
        complete) options, then — unless the process refuses it (`Role.admits`) — the users part and the lead start
        the test."""
        if self.lead is not None:
            self.lead.close_previous()
        self.shared.rebuild(environment)
        if not self.role.admits():
            return
        if self.users is not None:
            self.users.start_test()
        if self.lead is not None:
            self.lead.start_test()
