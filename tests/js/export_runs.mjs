// Sends agent runs as a Node.js agent instrumented with the OpenTelemetry JavaScript SDK does: GenAI spans, a
// BatchSpanProcessor, the OTLP/HTTP exporter (protobuf or JSON; gzip or not), which streams its body chunked.
// Usage: node export_runs.mjs URL proto|json gzip|none RUNS
// Prints the trace ids sent, one a line; exits 1 if an export failed.
import { context, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

const [url, encoding, compression, runs] = process.argv.slice(2);
const Exporter = encoding === "json" ? JsonExporter : ProtoExporter;
const exporter = new Exporter({ url, compression, timeoutMillis: 10000 });
let failed = false;
const exportOnce = exporter.export.bind(exporter);
exporter.export = (spans, done) => exportOnce(spans, (result) => {
  if (result.code !== 0) {
    failed = true;
    console.error(`export failed: ${result.error}`);
  }
  done(result);
});
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "js-support-agent" }),
  spanProcessors: [new BatchSpanProcessor(exporter, { maxExportBatchSize: 64 })],
});
const tracer = provider.getTracer("js-agent");

for (let run = 0; run < Number(runs); run++) {
  const root = tracer.startSpan("invoke_agent js-support-agent", {
    attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "js-support-agent" },
  });
  const inRun = trace.setSpan(context.active(), root);
  for (let step = 0; step < 3; step++) {
    const chat = tracer.startSpan("chat gpt-4.1-mini", {
      attributes: {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1-mini",
        "gen_ai.usage.input_tokens": 100 + step, "gen_ai.usage.output_tokens": 10,
      },
    }, inRun);
    chat.end();
    const tool = tracer.startSpan(`execute_tool get_order_${step}`, {
      attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": `get_order_${step}` },
    }, inRun);
    tool.end();
  }
  root.end();
  console.log(root.spanContext().traceId);
}
await provider.forceFlush();
await provider.shutdown();
process.exit(failed ? 1 : 0);
