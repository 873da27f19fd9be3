"""Running one dispatched task: pick the action, build its workspace, run it, keep a handle to
cancel it.

The catalog is a dispatch table (agents contract §2.7). A plain device runs commands on the
machine in the task's workspace; a sandbox host (``sandboxd``, §3.5) gives every sandbox its own
directory ``<data-dir>/sandboxes/<id>/work`` and runs its commands under bubblewrap or docker.
Every failure becomes a failed ``ActionResult``: a task always gets exactly one result.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from treq.client import HTTPClient
from twisted.internet.defer import Deferred, DeferredLock, maybeDeferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure

from connector.actions import files
from connector.actions.command import (
    OutputSink,
    RunningCommand,
    command_text,
    command_timeout,
)
from connector.actions.mcp_processes import McpProcesses
from connector.actions.outcome import ActionError, ActionResult
from connector.actions.web import web_fetch
from connector.config import ConnectorConfig
from connector.isolation.bubblewrap import BubblewrapRunner
from connector.isolation.docker import NO_DAEMON, DockerRunner
from connector.isolation.host import host_command
from connector.isolation.launch import LaunchSpec
from connector.isolation.policy import SandboxSpec, sandbox_spec
from connector.workspace import Workspace

log = Logger()

SANDBOX_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
FILE_ACTIONS = ("list_files", "read_file", "file_sha256", "write_file", "replace_text")
MCP_ACTIONS = ("mcp_list_tools", "mcp_call_tool", "list_mcp_processes", "stop_mcp_process")
DEVICE_ACTIONS = (*FILE_ACTIONS, "run_command", "web_fetch", *MCP_ACTIONS)
SANDBOX_ACTIONS = (*FILE_ACTIONS, "run_command", "cleanup_cloud_sandbox")


@dataclass
class TaskContext:
    """What an action handler gets: the task, its workspace, and where live output goes."""

    task_id: str
    action: str
    payload: dict[str, Any]
    workspace: Workspace
    on_output: OutputSink | None
    sandbox_id: str = ""


class TaskRunner:
    """Starts tasks and remembers the running ones so ``task_cancel`` can reach them."""

    def __init__(
        self,
        reactor: Any,
        config: ConnectorConfig,
        http: HTTPClient,
        docker: DockerRunner | None = None,
    ) -> None:
        self._reactor = reactor
        self._config = config
        self._http = http
        self._docker = docker
        self._bwrap = BubblewrapRunner(
            executable=config.bwrap_path, uid=config.sandbox_uid, gid=config.sandbox_gid
        )
        self._docker_fallback_logged = False
        self._commands: dict[str, RunningCommand] = {}
        self._locks: dict[str, DeferredLock] = {}
        self._waiting: set[str] = set()
        self._cancel_requested: dict[str, str] = {}
        self.mcp = McpProcesses(reactor)
        self._handlers: dict[str, Callable[[TaskContext], Any]] = {
            "list_files": lambda ctx: self._in_thread(files.list_files, ctx.workspace, ctx.payload),
            "read_file": lambda ctx: self._in_thread(files.read_file, ctx.workspace, ctx.payload),
            "file_sha256": lambda ctx: self._in_thread(
                files.file_sha256, ctx.workspace, ctx.payload
            ),
            "write_file": lambda ctx: self._in_thread(
                files.write_file, ctx.workspace, ctx.payload, self._chown
            ),
            "replace_text": lambda ctx: self._in_thread(
                files.replace_text, ctx.workspace, ctx.payload, self._chown
            ),
            "run_command": self._run_command,
            "web_fetch": lambda ctx: Deferred.fromCoroutine(
                web_fetch(self._http, self._reactor, ctx.payload)
            ),
            "cleanup_cloud_sandbox": self._cleanup_sandbox,
            "mcp_list_tools": lambda ctx: Deferred.fromCoroutine(self.mcp.list_tools(ctx.payload)),
            "mcp_call_tool": lambda ctx: Deferred.fromCoroutine(
                self.mcp.call_tool(ctx.payload, ctx.task_id)
            ),
            "list_mcp_processes": lambda ctx: self.mcp.listing(),
            "stop_mcp_process": lambda ctx: self.mcp.stop(ctx.payload),
        }

    @property
    def capabilities(self) -> list[str]:
        if not self._config.sandboxd:
            return ["web"]
        found = ["bubblewrap"] if self._bwrap.available() else []
        return [*found, "docker"] if self._docker is not None else found

    def start(self, task: dict[str, Any], on_output: OutputSink | None) -> Deferred[ActionResult]:
        """Run ``task`` (a dispatched ``task`` object); the Deferred never errbacks.

        On a sandbox host, tasks of one sandbox run one at a time: no command of the sandbox
        is alive while the (privileged) daemon resolves and touches paths in its directory,
        so a sandbox cannot swap a checked path for a symlink mid-action."""
        sandbox = self._sandbox_key(task)
        if sandbox is None:
            d = maybeDeferred(self._start, task, on_output)
        else:
            task_id = str(task.get("id", ""))
            self._waiting.add(task_id)
            lock = self._locks.setdefault(sandbox, DeferredLock())
            d = lock.run(self._start_queued, task, on_output)
            d.addBoth(self._forget_lock, sandbox, lock)
        d.addErrback(self._as_result)
        return d

    def cancel(self, task_id: str, reason: str) -> bool:
        if task_id in self._waiting:
            self._cancel_requested[task_id] = reason
            return True
        command = self._commands.get(task_id)
        if command is None:
            return self.mcp.cancel(task_id, reason)
        command.cancel(reason)
        return True

    def _start_queued(self, task: dict[str, Any], on_output: OutputSink | None) -> Any:
        task_id = str(task.get("id", ""))
        self._waiting.discard(task_id)
        if task_id in self._cancel_requested:
            return ActionResult.failed(self._cancel_requested.pop(task_id))
        return maybeDeferred(self._start, task, on_output)

    def _sandbox_key(self, task: dict[str, Any]) -> str | None:
        payload = task.get("payload")
        if not self._config.sandboxd or not isinstance(payload, dict):
            return None
        sandbox = payload.get("cloud_sandbox_id")
        return sandbox if isinstance(sandbox, str) and SANDBOX_ID.match(sandbox) else None

    def _forget_lock(self, result: Any, sandbox: str, lock: DeferredLock) -> Any:
        if not lock.locked and not lock.waiting and self._locks.get(sandbox) is lock:
            del self._locks[sandbox]
        return result

    def cancel_all(self, reason: str) -> Deferred[Any]:
        """Kill every running command and every stdio MCP server (the connector stops); fires
        once the MCP servers have ended."""
        for command in list(self._commands.values()):
            command.cancel(reason)
        return self.mcp.stop_all()

    def _start(self, task: dict[str, Any], on_output: OutputSink | None) -> Any:
        action = str(task.get("action", ""))
        allowed = SANDBOX_ACTIONS if self._config.sandboxd else DEVICE_ACTIONS
        if action not in allowed:
            if self._config.sandboxd:
                raise ActionError(f'sandboxd does not allow action "{action}"')
            raise ActionError(f'unsupported action "{action}"')
        payload = task.get("payload")
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            raise ActionError("payload must be an object")
        context = TaskContext(
            task_id=str(task.get("id", "")),
            action=action,
            payload=payload,
            workspace=Workspace(root=None, default_dir=self._config.default_dir),
            on_output=on_output,
        )
        if self._config.sandboxd:
            context.sandbox_id = self._sandbox_id(payload)
            if action != "cleanup_cloud_sandbox":
                context.workspace = self._sandbox_workspace(context.sandbox_id)
        else:
            workspace_path = task.get("workspace_path") or ""
            if not isinstance(workspace_path, str):
                raise ActionError("workspace_path must be a string")
            context.workspace = Workspace.for_task(workspace_path, self._config.default_dir)
        return self._handlers[action](context)

    def _in_thread(self, action: Callable[..., ActionResult], *args: Any) -> Deferred[ActionResult]:
        """File work off the reactor thread: hashing a large file must not stall the link's
        heartbeats and pings."""
        return deferToThreadPool(self._reactor, self._reactor.getThreadPool(), action, *args)

    def _run_command(self, ctx: TaskContext) -> Deferred[ActionResult]:
        command = command_text(ctx.payload)
        timeout = command_timeout(ctx.payload)
        launch = (
            self._sandbox_launch(ctx, command, timeout)
            if self._config.sandboxd
            else host_command(command, ctx.workspace.cwd)
        )
        running = RunningCommand(self._reactor, self._reactor, launch, timeout, ctx.on_output)
        self._commands[ctx.task_id] = running
        running.start()

        def forget(result: ActionResult) -> ActionResult:
            self._commands.pop(ctx.task_id, None)
            return result

        return running.done.addCallback(forget)

    def _sandbox_launch(self, ctx: TaskContext, command: str, timeout: int) -> LaunchSpec:
        spec = sandbox_spec(ctx.payload, self._config.default_runtime)
        workdir = ctx.workspace.cwd
        if spec.runtime in ("bwrap", "bubblewrap"):
            if not self._bwrap.available():
                raise ActionError(f"bubblewrap is not installed at {self._bwrap.executable}")
            return self._bwrap.command(command, workdir, spec, timeout)
        if spec.runtime == "docker":
            if self._docker is None:
                return self._docker_fallback(command, workdir, spec, timeout)
            if not spec.image:
                raise ActionError("Container image is required")
            return self._docker.command(command, workdir, spec, ctx.task_id)
        raise ActionError(f'unsupported sandbox runtime "{spec.runtime}" on this host')

    def _docker_fallback(
        self, command: str, workdir: str, spec: SandboxSpec, timeout: int
    ) -> LaunchSpec:
        """The policy says docker but no daemon answers: bubblewrap isolates instead (the
        empty policy means docker, §3.2, and a host without Docker must still work); an
        error only when bubblewrap is missing too."""
        if not self._bwrap.available():
            raise ActionError(NO_DAEMON)
        if not self._docker_fallback_logged:
            self._docker_fallback_logged = True
            log.warn("the host policy asks for docker but no Docker daemon is available: "
                     "sandbox commands run under bubblewrap instead")
        return self._bwrap.command(command, workdir, spec, timeout)

    def _sandbox_id(self, payload: dict[str, Any]) -> str:
        sandbox_id = payload.get("cloud_sandbox_id")
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise ActionError("cloud_sandbox_id is required")
        if not SANDBOX_ID.match(sandbox_id):
            raise ActionError("cloud_sandbox_id is not a valid sandbox id")
        return sandbox_id

    def _sandbox_root(self, sandbox_id: str) -> str:
        return os.path.join(self._config.data_dir, "sandboxes", sandbox_id)

    def _sandbox_workspace(self, sandbox_id: str) -> Workspace:
        """The sandbox's directory, created on its first task and owned by the sandbox user."""
        workdir = os.path.join(self._sandbox_root(sandbox_id), "work")
        if not os.path.isdir(workdir):
            os.makedirs(workdir, mode=0o755)
            self._chown(self._sandbox_root(sandbox_id))
            self._chown(workdir)
        return Workspace.for_task(workdir, workdir)

    def _cleanup_sandbox(self, ctx: TaskContext) -> ActionResult:
        root = self._sandbox_root(ctx.sandbox_id)
        if not os.path.lexists(root):
            return ActionResult.ok(f"Sandbox {ctx.sandbox_id} has no files on this host")
        shutil.rmtree(root)
        return ActionResult.ok(f"Removed sandbox {ctx.sandbox_id}")

    def _chown(self, path: str) -> None:
        uid, gid = self._config.sandbox_uid, self._config.sandbox_gid
        if not self._config.sandboxd or uid is None:
            return
        os.chown(path, uid, gid if gid is not None else -1, follow_symlinks=False)

    @staticmethod
    def _as_result(failure: Failure) -> ActionResult:
        if failure.check(ActionError):
            return ActionResult.failed(str(failure.value))
        if failure.check(OSError):
            error = failure.value
            assert isinstance(error, OSError)
            return ActionResult.failed(error.strerror or str(error))
        log.failure("task failed unexpectedly", failure)
        return ActionResult.failed(f"internal error: {failure.getErrorMessage()}")
