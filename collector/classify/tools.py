"""Read-only vs state-changing tools, from their names: configurable glob patterns, per-tool overrides, and
defaults inferred from the verb a tool's name starts with (get_order: read-only, cancel_order: state-changing).

A tool neither configured nor named by a known verb is `UNKNOWN`; detectors treat it as neither a write nor a
check they can rely on."""

from __future__ import annotations

import enum
import fnmatch
import re
from typing import Final

from ..bounded import remember
from ..config import ToolsConfig


class ToolEffect(enum.IntEnum):
    UNKNOWN = 0
    READ_ONLY = 1
    STATE_CHANGING = 2


# As globals for per-step checks (see steps.LLM).
UNKNOWN: Final = ToolEffect.UNKNOWN
READ_ONLY: Final = ToolEffect.READ_ONLY
STATE_CHANGING: Final = ToolEffect.STATE_CHANGING


READ_VERBS: Final = frozenset({
    "get", "list", "search", "read", "find", "check", "describe", "show", "view", "fetch", "query", "lookup",
    "look", "inspect", "count", "status", "cat", "ls", "grep", "head", "tail", "open", "verify", "validate",
    "watch", "poll", "retrieve", "browse", "explore", "locate", "calculate", "compute", "think", "print",
    "scroll", "goto", "diff", "test", "ping", "select", "load", "download", "summarize", "analyze", "lint",
})
WRITE_VERBS: Final = frozenset({
    "create", "update", "delete", "remove", "book", "cancel", "apply", "restart", "write", "send", "submit",
    "transfer", "set", "put", "post", "patch", "edit", "modify", "insert", "add", "deploy", "scale", "rollback",
    "reboot", "kill", "stop", "start", "exchange", "return", "pay", "charge", "refund", "move", "rename",
    "upload", "commit", "push", "merge", "install", "uninstall", "drop", "truncate", "revoke", "grant",
    "assign", "approve", "reject", "close", "reopen", "enable", "disable", "change", "replace", "reset",
    "save", "store", "register", "schedule", "reserve", "order", "purchase", "buy", "sell", "mark", "toggle",
    "upgrade", "downgrade", "migrate", "terminate", "suspend", "resume", "rm", "mv", "cp", "mkdir", "touch",
})
# Command-line tools a tool name may start with: the verb is the word after them (kubectl_scale, git_commit).
CLI_PREFIXES: Final = frozenset({"kubectl", "helm", "git", "gh", "docker", "aws", "gcloud", "az", "terraform", "npm",
                                 "pip", "systemctl"})
_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


class Globs:
    """Whether a name matches any of some glob patterns (optionally compared in lower case), cached per name
    (names come from spans: the cache is bounded)."""

    __slots__ = ("_known", "lower", "patterns")
    CACHE_LIMIT = 10_000

    def __init__(self, patterns: list[str], lower: bool = False) -> None:
        self.patterns = tuple(patterns)
        self.lower = lower
        self._known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        known = self._known.get(name)
        if known is None:
            value = name.lower() if self.lower else name
            known = remember(self._known, name, any(fnmatch.fnmatchcase(value, p) for p in self.patterns),
                             self.CACHE_LIMIT)
        return known


def name_words(tool: str) -> list[str]:
    """The words of a tool's name, in lower case (`kubectl_get_pods`, `getLogEvents`; a dotted prefix dropped)."""
    return [w.lower() for w in _WORD.findall(tool.rpartition(".")[2])]


def _from_name(tool: str) -> ToolEffect:
    words = name_words(tool)
    for word in words[1:] if len(words) > 1 and words[0] in CLI_PREFIXES else words:
        if word in WRITE_VERBS:
            return ToolEffect.STATE_CHANGING
        if word in READ_VERBS:
            return ToolEffect.READ_ONLY
        if len(word) > 1 and not word.isdigit():
            return ToolEffect.UNKNOWN  # only the leading verb decides: "ticket_update" is not known
    return ToolEffect.UNKNOWN


class ToolClassifier:
    """Tool name -> effect, cached (names come from spans: the cache is bounded)."""

    CACHE_LIMIT = 10_000

    def __init__(self, config: ToolsConfig | None = None) -> None:
        self.config = config or ToolsConfig()
        self._known: dict[str, ToolEffect] = {}
        self._final = Globs(self.config.final, lower=True)

    def effect(self, tool: str | None) -> ToolEffect:
        if tool is None:
            return UNKNOWN
        known = self._known.get(tool)
        if known is None:
            known = remember(self._known, tool, self._classify(tool), self.CACHE_LIMIT)
        return known

    def is_final(self, tool: str | None) -> bool:
        """Whether calling the tool ends the run by design (submit, final_answer, transfer_to_human...)."""
        return tool is not None and self._final(tool)

    def _classify(self, tool: str) -> ToolEffect:
        c = self.config
        override = c.overrides.get(tool)
        if override is not None:
            return ToolEffect[override.upper()]
        if any(fnmatch.fnmatchcase(tool, p) for p in c.state_changing):
            return ToolEffect.STATE_CHANGING
        if any(fnmatch.fnmatchcase(tool, p) for p in c.read_only):
            return ToolEffect.READ_ONLY
        return _from_name(tool) if c.infer_from_names else ToolEffect.UNKNOWN
