"""PromQL shared by the dashboards and the rules: the failure-mode ratios, so that a panel draws exactly what
an alert evaluates."""

from __future__ import annotations

from .settings import RisingModeRule, RunLengthRule


def duration(seconds: float) -> str:
    """A PromQL duration: 90 -> 90s, 1800 -> 30m, 86400 -> 1d."""
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _braces(matchers: str) -> str:
    return f"{{{matchers}}}" if matchers else ""


def mode_selector(rule: RisingModeRule, extra: str = "") -> str:
    return f'failure_mode="{rule.failure_mode}"' + (f", {extra}" if extra else "")


def group(*labels: str) -> str:
    """A `by`/`on` label list, each label once, in order: the deployment's labels first, then the agent's."""
    return ", ".join(dict.fromkeys(label for label in labels if label))


AGENT = "service, agent"


def growth(series: str, window: str, shift: str = "", start: str = "") -> str:
    """What a counter grew by over `window` (ending `shift` ago; `start`: window + shift, as a PromQL duration):
    increase(), or the whole value of a series born within the window. A series appears at its first increment,
    already holding it, and increase() counts nothing before its second sample: an agent's first run, loop or
    failure would count for nothing."""
    if shift:
        return (f"({series} offset {shift} unless {series} offset {start})"
                f" or increase({series}[{window}] offset {shift})")
    return f"({series} unless {series} offset {window}) or increase({series}[{window}])"


def mode_ratio(rule: RisingModeRule, extra: str = "", by: str = AGENT) -> str:
    """Share of each agent's runs that showed the mode over the rule's window."""
    window = duration(rule.window)
    return (f"sum by ({by}) ({growth(f'mast_failure_mode_traces_total{{{mode_selector(rule, extra)}}}', window)})"
            f"\n/ sum by ({by}) ({growth(f'mast_traces_total{_braces(extra)}', window)})")


def mode_baseline(rule: RisingModeRule, extra: str = "", by: str = AGENT) -> str:
    """The same share over the baseline period just before the window. An agent whose mode counter did not
    exist then has a baseline of 0, not none (counters appear on their first increment)."""
    span, shift, start = duration(rule.baseline), duration(rule.window), duration(rule.baseline + rule.window)
    runs = f"sum by ({by}) ({growth(f'mast_traces_total{_braces(extra)}', span, shift, start)})"
    mode = growth(f"mast_failure_mode_traces_total{{{mode_selector(rule, extra)}}}", span, shift, start)
    return f"(sum by ({by}) ({mode})\n or on ({by}) 0 * {runs})\n/ {runs}"


def mode_runs(rule: RisingModeRule, extra: str = "", by: str = AGENT) -> str:
    return f"sum by ({by}) ({growth(f'mast_traces_total{_braces(extra)}', duration(rule.window))})"


def run_calls_quantile(rule: RunLengthRule, by: str = AGENT, baseline: bool = False, sel: str = "") -> str:
    """The rule's quantile of model calls per run, per agent, over its window (or over its baseline before it)."""
    bucket, window = f"mast_run_model_calls_bucket{_braces(sel)}", duration(rule.window)
    grown = growth(bucket, duration(rule.baseline), window, duration(rule.baseline + rule.window)) if baseline \
        else growth(bucket, window)
    return f"histogram_quantile({rule.quantile:g}, sum by ({by}, le) ({grown}))"
