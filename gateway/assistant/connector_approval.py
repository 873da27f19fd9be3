"""Whether a connector task needs the owner's decision (agents contract §1.13, [P-14]).

Pure rules, kept apart so the one security-relevant decision -- "may this command run without
asking?" -- is readable and tested on its own.  Nothing a tool result says reaches these
inputs: the mode and prefixes come from the session, the action from the tool's name.
"""

from __future__ import annotations

from collections.abc import Iterable

READ_ONLY_ACTIONS = frozenset({
    "list_files", "read_file", "file_sha256", "web_search", "web_fetch",
    "list_windows_drives", "list_static_sites", "list_agent_skills", "read_agent_skill",
    "read_agent_skill_resource", "sync_agent_skills"})
SHELL_METACHARACTERS = (";", "&", "|", "`", "$(", ">", "<", "\n", "\r")


def normalize_prefixes(prefixes: Iterable[str]) -> list[str]:
    out: list[str] = []
    for prefix in prefixes:
        text = prefix.strip()
        if text and text not in out:
            out.append(text)
    return out


def auto_approved(command: str, prefixes: Iterable[str]) -> bool:
    """[P-14]: a listed prefix that ends at a token boundary, and no shell metacharacters."""
    text = command.strip()
    if not text or any(mark in text for mark in SHELL_METACHARACTERS):
        return False
    for prefix in normalize_prefixes(prefixes):
        if text.startswith(prefix) and (len(text) == len(prefix)
                                        or text[len(prefix)].isspace()):
            return True
    return False


def needs_approval(action: str, mode: str, prefixes: Iterable[str], command: str = "") -> bool:
    if mode == "full_access" or action in READ_ONLY_ACTIONS:
        return False
    if action == "run_command":
        return mode == "assistant" or not auto_approved(command, prefixes)
    return True
