"""A looping agent that stops itself when mastwatch flags its run. Start mastwatch first (`make run`, or
`mastwatch serve`), then: python examples/guarded_loop.py

The agent asks for the same pods again and again, as a model that does not notice it already has the answer does;
after each step it asks mastwatch (`mastwatch.guard`) whether the run shows a loop, and breaks out when it does."""

from __future__ import annotations

import json
import os
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mastwatch.guard import Guard

provider = TracerProvider(resource=Resource.create({"service.name": "example-agents", "service.version": "1.0.0"}))
otlp = os.environ.get("OTLP_ENDPOINT", "localhost:4317")  # mastwatch's OTLP/gRPC receiver
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp, insecure=True)))
tracer = provider.get_tracer("guarded-loop")
guard = Guard(os.environ.get("MASTWATCH_URL", "http://localhost:9464"))  # its metrics port

with tracer.start_as_current_span("invoke_agent sre-bot") as run:
    run.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sre-bot"})
    for attempt in range(1, 21):
        with tracer.start_as_current_span("chat gpt-4.1-mini") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini",
                                 "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 1200,
                                 "gen_ai.usage.output_tokens": 40})
        with tracer.start_as_current_span("execute_tool kubectl_get_pods") as call:
            call.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kubectl_get_pods",
                                 "gen_ai.tool.call.arguments": json.dumps({"namespace": "prod"})})
        time.sleep(0.2)  # the step's spans reach mastwatch
        flags = guard.flags()
        if flags.flagged:
            print(f"step {attempt}: stopped, mastwatch says {sorted(flags.modes())}: {flags.findings[0]['reason']}")
            break
        print(f"step {attempt}: carrying on")
provider.shutdown()
