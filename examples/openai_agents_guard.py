"""Stopping an OpenAI Agents SDK run that mastwatch flags, from a run hook. Needs `openai-agents` and an
OpenTelemetry instrumentation of it that exports to mastwatch (e.g. OpenInference's
`openinference-instrumentation-openai-agents` with an OTLP exporter), and OPENAI_API_KEY.

The hook asks mastwatch after every tool call; a run showing a loop (FM-1.3) or the turn limit (FM-1.5) is ended
by raising, which the SDK passes up from `Runner.run`."""

from __future__ import annotations

import asyncio

from agents import Agent, RunContextWrapper, RunHooks, Runner, Tool, function_tool

from mastwatch.guard import Guard

guard = Guard("http://localhost:9464")


class RunFlagged(RuntimeError):
    pass


class StopWhenFlagged(RunHooks):
    async def on_tool_end(self, context: RunContextWrapper, agent: Agent, tool: Tool, result: str) -> None:
        # the instrumentation's span for this run is current here: its trace is the run's
        flags = await asyncio.to_thread(guard.flags)
        if {"FM-1.3", "FM-1.5"} & flags.modes():
            raise RunFlagged(f"mastwatch flagged the run: {flags.findings[0]['reason']}")


@function_tool
def get_pods(namespace: str) -> str:
    return "api-1 CrashLoopBackOff"


async def main() -> None:
    agent = Agent(name="sre-bot", instructions="Find why the api pods crash.", tools=[get_pods])
    try:
        result = await Runner.run(agent, "Why is prod down?", hooks=StopWhenFlagged(), max_turns=20)
        print(result.final_output)
    except RunFlagged as stopped:
        print(stopped)


if __name__ == "__main__":
    asyncio.run(main())
