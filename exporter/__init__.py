"""Exporters: Prometheus metrics and the ClickHouse store."""
