"""Failure signatures: findings grouped the way error trackers group exceptions. A signature is a stable hash of
the agent, the failure mode, the tools that show the finding and its reason with the values masked (ids,
numbers, quoted strings, paths), so that "kubectl_get_pods called 5 times with {"id":5935}" and "... called 7
times with {"id":18}" are one recurring problem. The hash is BLAKE2b over fixed bytes: the same on every process,
replica and restart."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache

from .model.steps import Finding

# One pass: quoted strings, paths, and every token holding a digit (numbers, ids, uuids, times, versions).
_VALUE = re.compile(r"""\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|“[^”]*”"""  # quoted
                    r"|(?<![\w.])(?:[A-Za-z]:)?(?:[\\/][\w.\-~]+){2,}[\\/]?"  # a path of two parts or more
                    r"|(?<![\w.\-+:%])(?=[\w.\-+:%]*\d)[\w.\-+:%]+")  # a token with a digit, from its start
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?(?:ms|s|min|h|[kMG]i?B|%)?")


def _placeholder(match: re.Match[str]) -> str:
    value = match.group()
    first = value[0]
    if first in "\"'“":
        return '"…"'
    if first in "/\\" or value[1:3] in (":/", ":\\"):
        return "<path>"
    return "N" if _NUMBER.fullmatch(value) else "<id>"


def mask(reason: str) -> str:
    """The reason with its values replaced by placeholders: what stays is what recurs."""
    return " ".join(_VALUE.sub(_placeholder, reason).split())


def signature(agent: str, failure_mode: str, tools: Iterable[str], reason: str) -> str:
    """16 hexadecimal digits naming the recurring problem."""
    return _signature(agent, failure_mode, ",".join(sorted(set(tools))), reason)


def finding_signature(agent: str, failure_mode: str, finding: Finding) -> str:
    """The signature of one of `agent`'s findings; "" for the judge's, another view of runs already grouped."""
    if finding.basis == "judge":
        return ""
    return signature(agent, failure_mode, [s.tool or "" for s in finding.repeated], finding.reason)


@lru_cache(maxsize=4096)  # the exporters of one verdict ask for the same findings' signatures in turn
def _signature(agent: str, failure_mode: str, tools: str, reason: str) -> str:
    parts = [agent, failure_mode, tools, mask(reason)]
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).hexdigest()
