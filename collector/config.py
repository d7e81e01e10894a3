"""The processor's settings (the `processor:` section of the config file), in one place: trace assembly, the
tools table and every built-in detector's settings (`processor.detectors.<code>`).

These are pydantic models in plain Python; the modules that run per span are compiled when the package is
built, and never define models themselves. A detector added as a module of its own may define its settings
beside it, subclassing `DetectorSettings`."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mastwatch.collector.durations import Duration

if TYPE_CHECKING:
    from .classify.tools import Globs

# Tools whose call is a run's last act by design: a run ending right after them has not stopped early.
FINAL_TOOLS = ["submit*", "final_answer*", "final_result*", "finish*", "exit*", "done", "task_complete*",
               "complete_task", "end_conversation*", "transfer_to_human*", "handoff*", "escalate*",
               "respond_to_user*", "answer"]
# Operations whose own result does not show the state they lead to: operations on running systems, and edits of
# code (a program changed is not a program that works until something runs it).
NEEDS_CHECK = ["*deploy*", "*restart*", "*rollout*", "*rollback*", "*reboot*", "*apply*", "*scale*", "*migrate*",
               "*install*", "*patch*", "*failover*", "*drain*", "*cordon*", "*update_config*", "*set_config*",
               "*feature_flag*", "edit", "edit_*", "*_edit", "*_edit_*", "str_replace*"]


def _globs(patterns: list[str], lower: bool = False) -> Globs:
    from .classify.tools import Globs  # the matcher is runtime code (compiled); these models only hold settings

    return Globs(patterns, lower)


class ToolsConfig(BaseModel):
    """`processor.tools`: how tools are told apart (see docs/classification.md)."""

    model_config = ConfigDict(extra="forbid")
    read_only: list[str] = Field(default_factory=list, description="glob patterns of read-only tools")
    state_changing: list[str] = Field(default_factory=list, description="glob patterns of state-changing tools")
    overrides: dict[str, Literal["read_only", "state_changing", "unknown"]] = Field(
        default_factory=dict, description="per tool name: its effect, over patterns and names")
    infer_from_names: bool = Field(True, description="classify other tools by the verb their name starts with")
    final: list[str] = Field(default_factory=lambda: list(FINAL_TOOLS),
                             description="glob patterns (lower case) of tools that end a run by design")


class DetectorSettings(BaseModel):
    """Base of each detector's settings (the `processor.detectors.<code>` section of the config)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    skip_agents: list[str] = Field(default_factory=list,
                                   description="glob patterns of agents whose runs this detector leaves alone")


class AgentDetectors(BaseModel):
    """`processor.agents[]`: detector settings for the agents matching `match`, over `processor.detectors`."""

    model_config = ConfigDict(extra="forbid")
    match: list[str] = Field(min_length=1, description="glob patterns of agent names (the service when none)")
    detectors: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                 description="per failure-mode code: settings that differ")


class ProcessorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision_wait: Duration = Field(5.0, gt=0, description="quiet time after the root span ended")
    max_trace_age: Duration = Field(300.0, gt=0, description="classify a trace open this long anyway")
    max_spans_per_trace: int = Field(10_000, ge=1)
    max_traces: int = Field(50_000, ge=1, description="traces in flight; the oldest is classified early")
    max_buffered_spans: int = Field(1_000_000, ge=1, description="spans held by the traces in flight; the oldest "
                                    "traces are classified early to stay within it")
    late_span_memory: int = Field(200_000, ge=0, description="completed trace ids remembered")
    journal: bool = Field(True, description="keep accepted requests on disk until their traces are classified, "
                          "and replay them at start (with a store)")
    journal_path: str | None = Field(None, description="the span journal's directory: accepted requests kept until "
                                     "their traces are classified, replayed at start (default: `journal` in the "
                                     "store's directory; none without a store)")
    late_span_memory_path: str | None = Field(None, description="a file keeping those ids across restarts (default: "
                                              "`classified-traces` in the store's directory; none without a store)")
    queue_spans: int = Field(200_000, ge=1, description="spans accepted but not yet processed")
    queue_mib: int = Field(256, ge=1, description="bytes of the requests accepted but not yet processed (content "
                           "captured makes spans large)")
    tick: Duration = Field(0.25, gt=0, description="how often completion is checked")
    detectors: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                 description="per failure-mode code: detector settings")
    agents: list[AgentDetectors] = Field(default_factory=list,
                                         description="detector settings for some agents, over `detectors`")
    tools: ToolsConfig = Field(default_factory=ToolsConfig, description="read-only vs state-changing tools")


# --- the built-in detectors' settings, by failure mode ---

class TaskSpecificationSettings(DetectorSettings):
    """FM-1.1"""

    confirm_tools: list[str] = Field(default_factory=list,
                                     description="tool patterns that need the user's confirmation first")

    @cached_property
    def confirm(self) -> Globs:  # shared by the detectors of every trace
        return _globs(self.confirm_tools)


class RoleSettings(DetectorSettings):
    """FM-1.2"""

    enabled: bool = False
    roles: dict[str, list[str]] = Field(default_factory=dict,
                                        description="agent name pattern -> tool name patterns it may use")


class StepRepetitionSettings(DetectorSettings):
    """FM-1.3"""

    min_occurrences: int = Field(3, ge=2, description="calls of one tool with equivalent arguments")
    polling_tools: list[str] = Field(default_factory=list, description="glob patterns of tools that poll")
    retry_limit: int = Field(2, ge=0, description="repeats right after a failure that count as retries")
    cycle_max_period: int = Field(3, ge=0, description="longest cycle looked for (0: off)")
    cycle_min_repeats: int = Field(2, ge=2)
    output_min_occurrences: int = Field(2, ge=2)
    output_min_chars: int = Field(32, ge=1)
    unknown_args_min_run: int = Field(0, ge=0, description="same tool in a row, arguments not captured (0: off); "
                                      "paging and batch lookups look the same, so it is off by default")
    unchanged_min_occurrences: int = Field(2, ge=2, description="calls of one read-only tool with equivalent "
                                           "arguments and the same result, no state-changing call between")

    @cached_property
    def polling(self) -> Globs:  # shared by the detectors of every trace
        return _globs(self.polling_tools)

    @cached_property
    def plain(self) -> tuple[int, int, int, int, int, int, int, Globs | None, int]:
        """min_occurrences, retry_limit, cycle_max_period, cycle_min_repeats, output_min_occurrences,
        output_min_chars, unknown_args_min_run, the polling tools (None: none) and unchanged_min_occurrences, read
        once: detectors are made per trace, and read a plain attribute for less than a model's."""
        return (self.min_occurrences, self.retry_limit, self.cycle_max_period, self.cycle_min_repeats,
                self.output_min_occurrences, self.output_min_chars, self.unknown_args_min_run,
                self.polling if self.polling_tools else None, self.unchanged_min_occurrences)


class HistoryLossSettings(DetectorSettings):
    """FM-1.4, and FM-2.1's prompt-size reset"""

    min_calls: int = Field(3, ge=1, description="model calls in the conversation before a drop counts")
    min_tokens: int = Field(2000, ge=1, description="smallest prompt whose collapse counts")
    drop_ratio: float = Field(0.5, gt=0, lt=1, description="a prompt below this share of the largest is a collapse")
    reset_ratio: float = Field(1.25, ge=1, description="a prompt within this factor of the first call's is a reset")

    @cached_property
    def limits(self) -> tuple[int, int, float]:
        """What a collapse is (min_calls, min_tokens, drop_ratio), read once: detectors are made per trace."""
        return self.min_calls, self.min_tokens, self.drop_ratio


class TerminationSettings(DetectorSettings):
    """FM-1.5"""

    limit_texts: bool = Field(True, description="also read frameworks' limit messages in captured content")
    cut_off: bool = Field(True, description="a run stopped before the model saw the tool result it asked for")


class VerificationSettings(DetectorSettings):
    """FM-3.2"""

    needs_check: list[str] = Field(default_factory=lambda: list(NEEDS_CHECK),
                                   description="glob patterns (lower case) of changes whose result needs a check")
    acknowledgements: bool = Field(True, description="a change whose result only acknowledges it needs a check")

    @cached_property
    def needs_check_globs(self) -> Globs:  # shared by the detectors of every trace
        return _globs(self.needs_check, lower=True)
