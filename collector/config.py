"""The processor's settings (the `processor:` section of the config file): trace assembly, the tools table, and
what every detector's settings share (`DetectorSettings`). Each detector's own settings are in its module, and are
validated against its `Settings` (`processor.detectors.<code>`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mastwatch.collector.durations import Duration

# Tools whose call is a run's last act by design: a run ending right after them has not stopped early.
FINAL_TOOLS = ["submit*", "final_answer*", "final_result*", "finish*", "exit*", "done", "task_complete*",
               "complete_task", "end_conversation*", "transfer_to_human*", "handoff*", "escalate*",
               "respond_to_user*", "answer"]


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
    """Base of each detector's settings (the `processor.detectors.<code>` section of the config), subclassed in the
    detector's own module as its `Settings`.

    The built-in detectors' modules are compiled by mypyc, which keeps a class's field annotations only as the
    class they name (`Annotated[int, Field(ge=2)]` becomes `int`, `list[str]` becomes `list`: constraints and
    descriptions gone) and checks a value assigned in a class body against its annotation (`x: int = Field(...)`
    fails at import). A string annotation it keeps as written, and pydantic reads it in the module's namespace. So
    a compiled module writes each field as a string, `min_calls: "Annotated[int, Field(ge=1, description=...)]" = 3`
    (`tests/test_docs.py` fails when a built-in setting lost its description). mypyc also makes a method decorated
    with `@cached_property` a plain property, computed again on every read: a value made once from the settings (a
    tool pattern matcher) is a `cached_property` assigned to a class variable annotated with a string,
    `limits: "ClassVar[cached_property[tuple[int, int, float]]]" = cached_property(_limits)`. A detector module that
    is not compiled, a plugin's, writes ordinary pydantic."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description="run this detector; a mode no enabled detector covers is listed in "
                          "`not_assessed`")
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
