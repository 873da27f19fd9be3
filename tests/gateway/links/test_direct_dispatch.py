"""A task created for a device linked to this node goes straight onto its link (issue 18: the
round trip under 2 ms): it is born ``running`` in the creating transaction, so the round trip
costs two transactions (create, result) and nothing re-reads the queue; the dispatch rules of
agents contract §2.4 still hold (``created_at`` order, ``max_parallel``, a user device runs only
its owner's tasks, a task is handed out once across transports).  A hello that arrives in time
is welcomed however long its registration waits for a busy database."""

from __future__ import annotations

import threading
from typing import Any

from twisted.internet.defer import ensureDeferred

from gateway.store import connector_tasks as task_store
from tests.gateway.links.link_case import LinkTestCase
from tests.support.link_client import connect

CONNECTORS = "/api/advanced-chat/connectors"
#: where a round trip's transactions come from (the task queue, its links, the sandbox charge)
ROUND_TRIP_MODULES = ("gateway.links.", "gateway.store.connector_tasks",
                      "gateway.store.sandbox_settlement")
#: periodic jobs (the hub's, the storage settlement's: they run when the test clock moves)
PERIODIC = ("_recheck_once", "_refresh_now", "unbilled_tasks")


class DirectDispatchTests(LinkTestCase):
    def count_transactions(self) -> list[str]:
        """Names of the link functions run in a transaction from now on (the runner itself
        is untouched: each call is recorded, then passed on); other services' periodic jobs
        are left out."""
        names: list[str] = []
        db = self.app.db
        for path in ("transaction", "driver_transaction"):  # SQLAlchemy's and the lean one
            run = getattr(db, path)

            def recorded(fn: Any, *args: Any, run: Any = run, **kwargs: Any) -> Any:
                name = getattr(fn, "__qualname__", repr(fn))
                module = getattr(fn, "__module__", "")
                if (module.startswith(ROUND_TRIP_MODULES)
                        and not any(periodic in name for periodic in PERIODIC)):
                    names.append(name)
                return run(fn, *args, **kwargs)

            setattr(db, path, recorded)
            self.addCleanup(setattr, db, path, run)
        return names

    async def test_a_round_trip_is_two_transactions_and_the_task_is_born_running(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        user_id = await self.user_id(login)
        link = self.links_of().hub.links[device["id"]]
        await self.until(lambda: _true(link._queue_empty))
        # past the node's start by more than the clock slack: the waiter needs no read
        self.clock.advance(10)
        names = self.count_transactions()

        task = await self.task_for(device, user_id)
        assert task.status == task_store.RUNNING and task.claimed_by == link.link_id
        waiting = self.links_of().tasks.wait(task)
        frame = await client.next_of("task")
        assert frame["task"]["id"] == task.id
        client.send({"type": "task_result", "task_id": task.id, "success": True,
                     "result": "done"})
        finished = await waiting
        assert finished is not None and finished.status == task_store.COMPLETED
        await client.next_of("task_result_ack")
        assert len(names) == 2, names
        assert names[0].endswith("_insert") and names[1].endswith("_finish")

    async def test_created_at_order_and_max_parallel_hold(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token, max_parallel=1)
        user_id = await self.user_id(login)
        first = await self.task_for(device, user_id, payload={"command": "echo 1"})
        second = await self.task_for(device, user_id, payload={"command": "echo 2"})
        assert first.status == task_store.RUNNING
        assert second.status == task_store.QUEUED  # no room: it waits its turn
        assert (await client.next_of("task"))["task"]["id"] == first.id
        client.send({"type": "task_result", "task_id": first.id, "success": True})
        assert (await client.next_of("task"))["task"]["id"] == second.id
        # while the queue had a task, a new one was never born running ahead of it
        third = await self.task_for(device, user_id, payload={"command": "echo 3"})
        assert third.status == task_store.QUEUED
        client.send({"type": "task_result", "task_id": second.id, "success": True})
        assert (await client.next_of("task"))["task"]["id"] == third.id
        client.send({"type": "task_result", "task_id": third.id, "success": True})
        await self.until(lambda: _true(self.links_of().hub.links[device["id"]]._queue_empty))
        fourth = await self.task_for(device, user_id, payload={"command": "echo 4"})
        assert fourth.status == task_store.RUNNING
        assert (await client.next_of("task"))["task"]["id"] == fourth.id

    async def test_terminal_actions_skip_the_limit(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token, max_parallel=1)
        user_id = await self.user_id(login)
        busy = await self.task_for(device, user_id)
        terminal = await self.task_for(device, user_id, action="terminal_open", payload={})
        assert (busy.status, terminal.status) == (task_store.RUNNING, task_store.RUNNING)
        received = {(await client.next_of("task"))["task"]["id"] for _ in range(2)}
        assert received == {busy.id, terminal.id}

    async def test_another_users_task_is_not_handed_to_a_user_device(self) -> None:
        _, token, device = await self.user_with_device()
        await self.link(token)
        other_login = (await self.register("mallory"))["token"]
        other = await self.task_for(device, await self.user_id(other_login))
        assert other.status == task_store.QUEUED and other.claimed_by is None
        self.clock.advance(1)  # the re-check wakes the link: the claim still refuses it
        await self.until(lambda: _true(
            not self.links_of().hub.links[device["id"]]._pumping))
        assert (await self.task(other.id)).status == task_store.QUEUED

    async def test_a_long_poll_and_the_link_share_tasks_without_doubles(self) -> None:
        login, token, device = await self.user_with_device()
        poll = ensureDeferred(self.call("GET", f"{CONNECTORS}/tasks/next",
                                        headers={"X-Connector-Token": token}))
        await self.until(lambda: _true(device["id"] in self.links_of().hub._polls))
        client = await self.link(token, max_parallel=1)
        user_id = await self.user_id(login)
        tasks = [await self.task_for(device, user_id, payload={"command": f"echo {n}"})
                 for n in range(3)]
        assert tasks[0].status == task_store.RUNNING  # straight onto the idle link
        received = [(await client.next_of("task"))["task"]["id"]]
        received.append((await poll).json()["task"]["id"])
        client.send({"type": "task_result", "task_id": received[0], "success": True})
        received.append((await client.next_of("task"))["task"]["id"])
        assert sorted(received) == sorted(task.id for task in tasks)
        rows = [await self.task(task.id) for task in tasks]
        assert [row.status for row in rows].count(task_store.QUEUED) == 0
        assert sum(1 for row in rows if row.claimed_by == task_store.HTTP_CLAIM) == 1

    async def test_a_waiter_after_the_end_still_fires(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        self.clock.advance(10)
        task = await self.task_for(device, await self.user_id(login))
        await client.next_of("task")
        client.send({"type": "task_result", "task_id": task.id, "success": True})
        await client.next_of("task_result_ack")
        finished = await self.links_of().tasks.wait(task)
        assert finished is not None and finished.status == task_store.COMPLETED

    async def test_an_end_this_node_did_not_hear_of_is_found_by_the_recheck(self) -> None:
        login, token, device = await self.user_with_device()
        self.clock.advance(10)
        task = await self.task_for(device, await self.user_id(login))
        # ended behind the node's back (as on a node whose announcement was lost)
        await self.app.db.transaction(task_store.fail, task.id, "elsewhere", self.app.ctx.now())
        waiting = self.links_of().tasks.wait(task)
        assert not waiting.called
        self.clock.advance(1)
        await self.until(lambda: _true(waiting.called))
        finished = await waiting
        assert finished is not None and finished.error_message == "elsewhere"
        assert token


class BusyDatabaseHelloTests(LinkTestCase):
    async def test_a_hello_in_time_is_welcomed_however_long_registration_waits(self) -> None:
        _, token, _ = await self.user_with_device()
        client = await connect(self.base, token)
        self.addCleanup(client.transport.abortConnection)
        # the database thread is busy (thousands of links saying hello at once)
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        client.send({"type": "hello", "protocol": 1, "hostname": "box", "os": "linux",
                     "arch": "amd64", "version": "1", "kind": "cli", "mode": "platform"})
        await self.until(lambda: _true(not any(
            call.active() and getattr(call.func, "__name__", "") == "_hello_overdue"
            for call in self.clock.getDelayedCalls())))
        self.clock.advance(11)
        release.set()
        await busy
        welcome = await client.next()
        assert welcome["type"] == "welcome", welcome


async def _true(value: bool) -> bool:
    return value
