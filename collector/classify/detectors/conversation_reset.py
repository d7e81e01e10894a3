"""FM-2.1 Conversation reset: the dialogue restarts mid-run and its progress is lost.

Signals: an agent's prompt, after growing, falls back to the size of the conversation's first call and stays
there (see FM-1.4, whose settings it shares; structure); an agent switches to a new conversation id and redoes
a tool call it had already made in the previous one (structure)."""

from __future__ import annotations

from ...steps import LLM, TOOL, Finding, Step
from .history_loss import HistoryLoss


class ConversationReset(HistoryLoss):
    code = "FM-2.1"
    kinds = frozenset({LLM, TOOL})
    resets = True

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.conversation: dict[str | None, str] = {}  # agent -> its current conversation id
        self.before: dict[str | None, dict[tuple, Step]] = {}  # agent -> calls made in earlier conversations
        self.current: dict[str | None, list[Step]] = {}  # compared only once the agent switched
        self.agent: str | None = None  # of the last model call: the one that asked for the next tool calls

    def observe(self, step: Step) -> Finding | None:
        if step.kind is LLM:
            self.agent = step.agent
            if step.conversation_id is not None:
                self._switch(step)
            return HistoryLoss.observe(self, step)
        if self.found is not None or step.tool is None or step.args is None:
            return None
        agent = self.agent
        before = self.before.get(agent)
        earlier = None if before is None else before.get((step.tool, step.args_key))
        if earlier is not None:
            self.found = Finding(self.code, 0.6, [earlier.span_id, step.span_id],
                                 f"{agent or 'the agent'} started a new conversation and redid {step.tool} "
                                 "with the same arguments", "structure")
            return self.found
        self.current.setdefault(agent, []).append(step)
        return None

    def _switch(self, step: Step) -> None:
        conversation = step.conversation_id
        known = self.conversation.setdefault(step.agent, conversation)
        if known != conversation:
            self.conversation[step.agent] = conversation
            before = self.before.setdefault(step.agent, {})
            for call in self.current.pop(step.agent, ()):
                before.setdefault((call.tool, call.args_key), call)
