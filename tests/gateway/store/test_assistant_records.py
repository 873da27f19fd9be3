"""The assistant record stores on real SQLite and PostgreSQL: ownership, the default agent,
session upserts and their 409s, guarded run transitions and per-run event numbering."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from twisted.trial.unittest import TestCase

from gateway.store import migrate, schema
from gateway.store.assistant import agents, run_starts, runs, sessions, skills, user_settings
from gateway.store.assistant.refused import Refused
from tests.support.postgres import postgres_url

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class AssistantRecordTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-assistant-")
        self.addCleanup(shutil.rmtree, directory, True)
        return f"sqlite:///{os.path.join(directory, 'db.sqlite3')}"

    def setUp(self) -> None:
        self.engine = create_engine(self.database_url())
        self.addCleanup(self.engine.dispose)
        migrate.upgrade(self.engine)
        self.alice = self.user("alice")
        self.bob = self.user("bob")

    def tx(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    def user(self, name: str) -> int:
        def insert(conn: Connection) -> int:
            group = conn.execute(select(schema.groups.c.id)).scalar()
            if group is None:
                group = conn.execute(schema.groups.insert().values(
                    name="default", created_at=NOW, updated_at=NOW)).inserted_primary_key[0]
            key = conn.execute(schema.users.insert().values(
                username=name, email=f"{name}@example.com", password_hash="x",
                group_id=group, referral_code=f"ref-{name}", created_at=NOW,
                updated_at=NOW)).inserted_primary_key
            assert key is not None
            return int(key[0])
        return int(self.tx(insert))

    def refused(self, fn: Any, *args: Any, **kwargs: Any) -> Refused:
        try:
            self.tx(fn, *args, **kwargs)
        except Refused as refusal:
            return refusal
        raise AssertionError("expected a refusal")

    def test_user_settings_are_created_once_and_saved(self) -> None:
        first = self.tx(user_settings.user_settings, self.alice, NOW)
        again = self.tx(user_settings.user_settings, self.alice, NOW + timedelta(seconds=1))
        assert first == again and first.title_generation_scope == "recent"
        assert first.custom_mcp_servers == []
        saved = self.tx(user_settings.save_user_settings, self.alice,
                        {"custom_mcp_servers": [{"id": "x", "name": "X"}]}, NOW)
        assert saved.custom_mcp_servers == [{"id": "x", "name": "X"}]
        assert self.tx(user_settings.custom_servers, self.bob) == []

    def test_default_agent_and_ownership(self) -> None:
        listed = self.tx(agents.list_agents, self.alice, NOW)
        assert [(a.key, a.name) for a in listed] == [("default", "Default")]
        assert len(self.tx(agents.list_agents, self.alice, NOW)) == 1  # never a second one
        values = {"name": "Coder", "skill_ids": [], "mcp_server_ids": []}
        coder = self.tx(agents.create_agent, self.alice, values, [], NOW)
        assert coder.key == str(coder.id) and not coder.is_default
        assert self.tx(agents.find_agent, self.bob, coder.key, NOW) is None
        assert self.refused(agents.create_agent, self.alice, values, [], NOW).status == 409
        # the same name is fine for another user
        assert self.tx(agents.create_agent, self.bob, values, [], NOW).name == "Coder"
        renamed = self.tx(agents.update_agent, self.alice, "default",
                          {**values, "name": "Other"}, [], NOW)
        assert renamed.name == "Default"  # the default agent keeps its name
        assert self.refused(agents.delete_agent, self.alice, "default", NOW).message == \
            "Default agent cannot be deleted"
        assert self.refused(agents.delete_agent, self.bob, coder.key, NOW).status == 404

    def test_skill_delete_removes_it_from_agents(self) -> None:
        skill = self.tx(skills.create_skill, self.alice, {
            "name": "Docs", "mcp_server_ids": []}, [], NOW)
        refusal = self.refused(agents.create_agent, self.alice, {
            "name": "A", "skill_ids": ["999"], "mcp_server_ids": []}, [], NOW)
        assert refusal.message == "Unknown skill"
        refusal = self.refused(agents.create_agent, self.alice, {
            "name": "A", "skill_ids": [], "mcp_server_ids": ["nope"]}, ["builtin"], NOW)
        assert refusal.message == "Unknown MCP server: nope"
        agent = self.tx(agents.create_agent, self.alice, {
            "name": "A", "skill_ids": [skill.key], "mcp_server_ids": ["builtin"]},
            ["builtin"], NOW)
        self.tx(skills.delete_skill, self.alice, skill.key, NOW)
        assert self.tx(agents.get_agent, self.alice, agent.key, NOW).skill_ids == []

    def save(self, user_id: int, session_id: str, **values: Any) -> Any:
        messages = [{"id": "m1", "role": "user", "content": "hi"}]
        return self.tx(sessions.save_session, user_id, session_id, values, messages, NOW)

    def test_each_listed_session_shows_its_newest_run(self) -> None:
        self.save(self.alice, "s1")
        self.save(self.alice, "s2")
        self.save(self.alice, "s3")
        for run_id, session_id, minutes in (("acr-a", "s1", 0), ("acr-c", "s1", 2),
                                            ("acr-b", "s1", 1), ("acr-d", "s2", 5),
                                            ("acr-f", "s2", 5), ("acr-e", "s2", 5)):
            self.tx(runs.create_run, {"id": run_id, "user_id": self.alice,
                                      "session_id": session_id, "assistant_message_id": "m",
                                      "mode": "assistant", "status": "completed"},
                    NOW + timedelta(minutes=minutes))
        listed = self.tx(sessions.list_sessions, self.alice, 0, 100)
        newest = {s.session.id: s.latest_run.id if s.latest_run else None for s in listed}
        # ties on the creation time: the greatest id
        assert newest == {"s1": "acr-c", "s2": "acr-f", "s3": None}
        assert self.tx(sessions.get_session, self.alice, "s2").latest_run.id == "acr-f"

    def test_session_upsert_ownership_and_running_run(self) -> None:
        stored = self.save(self.alice, "s1", title="One")
        assert stored.session.title == "One" and [m.id for m in stored.messages] == ["m1"]
        assert stored.latest_run is None
        # a client-chosen id another user owns is a 409, and is not found for them
        assert self.refused(sessions.save_session, self.bob, "s1", {}, [], NOW).message == \
            "Session id is already used"
        assert self.tx(sessions.find_session, self.bob, "s1") is None
        run = self.tx(runs.create_run, {"id": "acr-1", "user_id": self.alice,
                                        "session_id": "s1", "assistant_message_id": "m2",
                                        "mode": "assistant"}, NOW)
        assert run.status == "queued"
        assert self.refused(sessions.save_session, self.alice, "s1", {}, [], NOW).message == \
            "This session already has a running assistant run"
        assert self.tx(sessions.get_session, self.alice, "s1").latest_run.id == "acr-1"
        sessions_listed = self.tx(sessions.list_sessions, self.alice, 0, 100)
        assert [s.session.id for s in sessions_listed] == ["s1"]
        self.tx(sessions.delete_session, self.bob, "s1")  # foreign: nothing happens
        assert self.tx(sessions.find_session, self.alice, "s1") is not None
        self.tx(runs.append_event, "acr-1", "s1", "status", {"message": "x"}, NOW)
        self.tx(sessions.delete_session, self.alice, "s1")
        assert self.tx(sessions.find_session, self.alice, "s1") is None
        assert self.tx(runs.find_run, "acr-1") is None
        with self.engine.begin() as conn:
            assert conn.execute(select(schema.assistant_run_events)).all() == []

    def test_run_transitions_are_guarded_and_events_numbered(self) -> None:
        self.save(self.alice, "s1")
        self.tx(runs.create_run, {"id": "acr-1", "user_id": self.alice, "session_id": "s1",
                                  "assistant_message_id": "m2", "mode": "assistant"}, NOW)
        assert self.tx(runs.transition, "acr-1", {"status": "running"}, NOW,
                       from_statuses=["queued"])
        assert self.tx(runs.transition, "acr-1", {"status": "cancelled"}, NOW)
        # terminal states never change again
        assert not self.tx(runs.transition, "acr-1", {"status": "completed"}, NOW)
        assert self.tx(runs.find_run, "acr-1").status == "cancelled"
        seqs = [self.tx(runs.append_event, "acr-1", "s1", "text", {"delta": str(n)}, NOW).seq
                for n in range(3)]
        assert seqs == [1, 2, 3]
        after = self.tx(runs.events_after, "acr-1", 1)
        assert [(e.seq, e.payload["delta"]) for e in after] == [(2, "1"), (3, "2")]
        assert self.tx(runs.events_after, "acr-1", 0, self.bob) == []
        assert len(self.tx(runs.events_after, "acr-1", 0, self.alice, limit=2)) == 2

        def duplicate(conn: Connection) -> None:
            conn.execute(schema.assistant_run_events.insert().values(
                run_id="acr-1", session_id="s1", seq=3, event="text", payload={},
                created_at=NOW))
        self.assertRaises(IntegrityError, self.tx, duplicate)

    def test_a_run_start_answers_what_a_read_answers(self) -> None:
        """The 202's transaction reads nothing back: the session (new, then existing with an
        active run that it interrupts), its messages and the run it answers are what a read
        of the stored rows gives."""
        def start(run_id: str, title: str, minutes: int, session_id: str = "s1",
                  generated: bool = False) -> run_starts.RunStart:
            columns = {"title": title, "run_mode": "assistant", "agent_id": "default",
                       "skill_ids": ["3"], "temperature": 0.7, "max_tokens": 64,
                       "connector_command_prefixes": ["git status"], "internal": False}
            messages = [{"id": "m1", "role": "user", "content": "hi", "tool_calls": [],
                         "content_parts": []},
                        {"id": f"a-{run_id}", "role": "assistant", "content": ""}]
            when = NOW + timedelta(minutes=minutes)
            return self.tx(run_starts.start_run, self.alice, session_id, columns, messages, {
                "id": run_id, "user_id": self.alice, "session_id": session_id,
                "assistant_message_id": f"a-{run_id}", "mode": "assistant",
                "request": {"model": "m"}, "node_name": "n1",
                "lease_expires_at": when + timedelta(seconds=60),
                "deadline_at": when + timedelta(seconds=600)}, when, generated=generated)

        first = start("acr-1", "One", 0)
        assert first.events == [] and first.stopped == []
        assert first.session == self.tx(sessions.get_session, self.alice, "s1")
        assert first.run == self.tx(runs.find_run, "acr-1")
        second = start("acr-2", "Two", 1)
        assert second.stopped == ["acr-1"]
        assert [e.payload["message"] for e in second.events] == ["cancelled",
                                                                 "user_interrupted"]
        assert self.tx(runs.find_run, "acr-1").status == "cancelled"
        assert second.session == self.tx(sessions.get_session, self.alice, "s1")
        assert second.session.session.title == "Two"
        assert second.session.session.created_at == NOW
        assert second.run == self.tx(runs.find_run, "acr-2")
        assert self.refused(run_starts.start_run, self.bob, "s1", {}, [], {}, NOW).message \
            == "Session id is already used"
        # a session id the server just made up is not looked up first
        fresh = start("acr-3", "Three", 2, session_id="acs-generated", generated=True)
        assert fresh.session == self.tx(sessions.get_session, self.alice, "acs-generated")
        assert fresh.run == self.tx(runs.find_run, "acr-3")


class PostgresAssistantRecordTests(AssistantRecordTests):
    def database_url(self) -> str:
        return postgres_url()
