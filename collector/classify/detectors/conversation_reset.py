"""FM-2.1 Conversation reset: the dialogue restarts mid-run and its progress is lost.

Looks for: an agent's prompt falls back to its first size; a new conversation, or a fresh invocation after a
  failed one, redoing earlier calls
Basis: structure
Content capture: no

Signals:
- an agent's prompt, after growing, falls back to the size of the conversation's first call and stays there (as
  FM-1.4 measures it, with the same settings);
- an agent switches to a new conversation id and redoes a tool call it had already made in the previous one;
- an agent invocation failed (a crashed worker, a limit) and a fresh invocation redoes its tool calls (the same
  arguments; the same tools when arguments are not captured): the work is started over. The redone calls are the
  finding's repeated steps, their spend wasted (FM-1.3 leaves them to this mode)."""

from __future__ import annotations

from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from .history_loss import HistoryLoss


class ConversationReset(HistoryLoss):
    code = "FM-2.1"
    kinds = frozenset({LLM, TOOL, AGENT})
    resets = True
    reusable = True  # its own state is reset by its `begin` too

    def __init__(self, settings, trace, tools=None) -> None:
        # emptied by `begin` (which HistoryLoss's __init__ calls), never handed out
        self.current: dict[str | None, list[Step]] = {}  # compared only once the agent switched
        self.calls_under: dict[bytes, list[Step]] = {}  # tool calls by parent span, until that invocation ends
        super().__init__(settings, trace, tools)

    def begin(self) -> None:
        HistoryLoss.begin(self)
        self.current.clear()
        self.calls_under.clear()
        self.agent: str | None = None  # of the last model call: the one that asked for the next tool calls
        # None until first needed: most runs keep one conversation and have no failed invocation
        self.conversation: dict[str | None, str | None] | None = None  # agent -> its current conversation id
        self.before: dict[str | None, dict[tuple, Step]] | None = None  # agent -> calls of earlier conversations
        self.failed_invocations: dict[bytes, Step] | None = None
        self.failed_calls: dict[tuple, Step] | None = None  # calls made in invocations that failed
        self.failed: Step | None = None  # the last invocation that failed having made calls
        self.repeated: list[Step] | None = None  # calls redone after it (append-only: the processor accounts)

    def observe(self, step: Step) -> Finding | None:
        if step.kind is AGENT:  # ends after its calls (live), or starts before them (classified again)
            calls = self.calls_under.pop(step.span_id, None)
            if step.error:
                if self.failed_invocations is None:
                    self.failed_invocations = {}
                self.failed_invocations[step.span_id] = step
                for call in calls or ():
                    self._failed_call(call, step)
            return None
        if step.kind is LLM:
            self.agent = step.agent
            if step.conversation_id is not None:
                self._switch(step)
            return HistoryLoss.observe(self, step)
        if step.tool is None:
            return None
        if self.failed_invocations is not None:
            invocation = self.failed_invocations.get(step.parent_span_id)
            if invocation is not None:
                self._failed_call(step, invocation)
                return None
        if self.failed_calls is not None:
            redone = self._redone(step)
            if redone is not None:
                return redone
        under = self.calls_under.get(step.parent_span_id)  # not setdefault: it makes a list on every call
        if under is None:
            under = self.calls_under[step.parent_span_id] = []
        under.append(step)
        if self.found is not None or step.args is None:
            return None
        agent = self.agent
        before = None if self.before is None else self.before.get(agent)
        earlier = None if before is None else before.get((step.tool, step.args_key))
        if earlier is not None:
            self.found = Finding(self.code, 0.6, [earlier.span_id, step.span_id],
                                 f"{agent or 'the agent'} started a new conversation and redid {step.tool} "
                                 "with the same arguments", "structure")
            return self.found
        current = self.current.get(agent)
        if current is None:
            current = self.current[agent] = []
        current.append(step)
        return None

    def _failed_call(self, call: Step, invocation: Step) -> None:
        self.failed = invocation
        if self.failed_calls is None:
            self.failed_calls = {}
        self.failed_calls.setdefault((call.tool, call.args_key), call)

    def _redone(self, step: Step) -> Finding | None:
        """A call of a failed invocation, made again by a later one."""
        failed_calls, failed = self.failed_calls, self.failed
        earlier = None if failed_calls is None else failed_calls.get((step.tool, step.args_key))
        if earlier is None or failed is None or step.parent_span_id == earlier.parent_span_id:
            return None
        if self.repeated is None:
            self.repeated = []
        self.repeated.append(step)
        if self.found is not None and self.found.repeated is self.repeated:
            self.found.evidence.append(step.span_id)
        else:
            same = "with the same arguments" if step.args is not None else "(arguments not captured)"
            self.found = Finding(self.code, 0.6 if step.args is not None else 0.5,
                                 [failed.span_id, earlier.span_id, step.span_id],
                                 f"{failed.agent or failed.name} failed ({failed.error_type}) and a fresh invocation "
                                 f"started the work over, redoing {step.tool} {same}", "structure", self.repeated)
        return self.found

    def _switch(self, step: Step) -> None:
        conversation = step.conversation_id
        if self.conversation is None:
            self.conversation = {}
        known = self.conversation.setdefault(step.agent, conversation)
        if known != conversation:
            self.conversation[step.agent] = conversation
            if self.before is None:
                self.before = {}
            before = self.before.setdefault(step.agent, {})
            for call in self.current.pop(step.agent, ()):
                before.setdefault((call.tool, call.args_key), call)
