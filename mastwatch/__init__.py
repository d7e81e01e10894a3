"""mastwatch: MAST failure modes and repeated-step spend from LLM-agent OpenTelemetry traces."""

__version__ = "0.1.0"
