"""Grafana dashboards and Prometheus rules (generated)."""
