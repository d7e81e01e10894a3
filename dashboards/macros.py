"""Grafana's expansion of a panel query: dashboard variables, Grafana's interval macros, and the ClickHouse
data source's macros, done as Grafana and grafana-clickhouse-datasource do it, so that the report and the
tests run the very queries a dashboard sends."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ALL = "$__all"  # the value of a variable set to "All"


@dataclass(frozen=True)
class Variable:
    values: Sequence[str] | str  # a list, or ALL
    all_value: str | None = None  # the variable's custom "All" value (Grafana skips formatting it)
    options: Sequence[str] = ()  # every value, for an "All" without a custom value

    def selected(self) -> list[str]:
        if self.values == ALL:
            return list(self.options)
        return [self.values] if isinstance(self.values, str) else list(self.values)


@dataclass(frozen=True)
class TimeRange:
    start: int  # unix seconds
    end: int
    interval_s: int = 60  # Grafana's $__interval for the panel
    rate_interval: str = "1m"
    variables: Mapping[str, Variable] = field(default_factory=dict)

    @property
    def range_s(self) -> int:
        return self.end - self.start


def _quote_sql(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _regex_escape(value: str) -> str:
    return re.sub(r"([\\^$*+?.()|\[\]{}/])", r"\\\1", value)


def _format(var: Variable, fmt: str | None, promql: bool) -> str:
    if var.values == ALL and var.all_value is not None and fmt not in ("text", "percentencode", "queryparam"):
        return var.all_value
    values = var.selected()
    if fmt == "sqlstring":
        return ",".join(map(_quote_sql, values))
    if fmt == "singlequote":
        return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
    if fmt == "csv":
        return ",".join(values)
    if fmt == "regex" or (promql and fmt is None and (len(values) != 1 or var.values == ALL)):
        escaped = [_regex_escape(v) for v in values]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    if promql and fmt is None:
        return values[0].replace("\\", "\\\\").replace("'", "\\'") if values else ""
    return ",".join(values) if len(values) != 1 else values[0]


_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")


def _variables(text: str, variables: Mapping[str, Variable], promql: bool) -> str:
    def replace(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name.startswith("__") or name not in variables:
            return m.group(0)
        return _format(variables[name], m.group(2), promql)

    return _VARIABLE.sub(replace, text)


def _macro_calls(text: str, name: str):
    """Yield (start, end, args) of each `$__name(...)` call, with nested parentheses and top-level commas."""
    token = f"$__{name}("
    pos = text.find(token)
    while pos >= 0:
        depth, i, args, arg_start = 1, pos + len(token), [], pos + len(token)
        while depth:
            if i >= len(text):
                raise ValueError(f"unbalanced parentheses in $__{name}(")
            c = text[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "," and depth == 1:
                args.append(text[arg_start:i].strip())
                arg_start = i + 1
            i += 1
        args.append(text[arg_start:i - 1].strip())
        yield pos, i, args
        pos = text.find(token, pos + 1)


def _replace_calls(text: str, name: str, fn) -> str:
    for start, end, args in reversed(list(_macro_calls(text, name))):
        text = text[:start] + fn(args) + text[end:]
    return text


def _conditional_all(sql: str, variables: Mapping[str, Variable]) -> str:
    """grafana-clickhouse-datasource's $__conditionalAll(condition, $variable): 1=1 when the variable is All."""
    def expand(args: list[str]) -> str:
        condition, var = ",".join(args[:-1]), args[-1].lstrip("$").strip("{}")
        return "1=1" if variables[var].values == ALL else condition

    return _replace_calls(sql, "conditionalAll", expand)


def expand_sql(sql: str, time: TimeRange) -> str:
    """A ClickHouse panel query as the plugin sends it to the server."""
    sql = _variables(_conditional_all(sql, time.variables), time.variables, promql=False)
    start, end, step = time.start, time.end, max(time.interval_s, 1)

    def one(fn):
        def call(args: list[str]) -> str:
            if len(args) != 1:
                raise ValueError(f"expected 1 argument, got {len(args)}: {args}")
            return fn(args[0])
        return call

    sql = _replace_calls(sql, "timeFilter_ms", one(
        lambda c: f"{c} >= fromUnixTimestamp64Milli({start * 1000}) AND {c} <= fromUnixTimestamp64Milli({end * 1000})"))
    sql = _replace_calls(sql, "timeFilter", one(
        lambda c: f"{c} >= toDateTime({start}) AND {c} <= toDateTime({end})"))
    sql = _replace_calls(sql, "timeInterval_ms", one(
        lambda c: f"toStartOfInterval(toDateTime64({c}, 3), INTERVAL {step * 1000} millisecond)"))
    sql = _replace_calls(sql, "timeInterval", one(
        lambda c: f"toStartOfInterval(toDateTime({c}), INTERVAL {step} second)"))
    for macro, value in (("fromTime_ms", f"fromUnixTimestamp64Milli({start * 1000})"),
                         ("toTime_ms", f"fromUnixTimestamp64Milli({end * 1000})"),
                         ("fromTime", f"toDateTime({start})"), ("toTime", f"toDateTime({end})"),
                         ("interval_s", str(step))):
        sql = sql.replace(f"$__{macro}", value)
    if "$__" in sql:
        raise ValueError(f"unexpanded macro in: {sql[sql.index('$__'):][:40]}")
    return sql


def expand_promql(expr: str, time: TimeRange) -> str:
    """A Prometheus panel query as Grafana's Prometheus data source sends it."""
    expr = _variables(expr, time.variables, promql=True)
    for macro, value in (("$__rate_interval", time.rate_interval), ("$__interval_ms", str(time.interval_s * 1000)),
                         ("$__interval", f"{time.interval_s}s"), ("$__range_s", str(time.range_s)),
                         ("$__range_ms", str(time.range_s * 1000)), ("$__range", f"{time.range_s}s")):
        expr = expr.replace(macro, value)
    if "$" in expr:
        raise ValueError(f"unexpanded variable in: {expr}")
    return expr
