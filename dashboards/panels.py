"""grafanalib building blocks with the defaults every mastwatch panel shares: data sources chosen with each
dashboard's `$datasource` (Prometheus) and `$clickhouse` variables, so the dashboards drop into an existing Grafana
(the provisioning files add two data sources whose uids the variables default to), current Grafana JSON
(fieldConfig, reduceOptions, thresholds steps), table legends, units, and a grid that places panels left to right
without overlaps."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attr
from grafanalib import core as g

from mastwatch.exporter.store.queries import Dialect, Query

from .settings import DashboardsConfig

SCHEMA_VERSION = 39  # Grafana 11; Grafana migrates older and accepts up to its own version
PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}
CLICKHOUSE = {"type": "grafana-clickhouse-datasource", "uid": "${clickhouse}"}
PROVISIONED = {"prometheus": "mastwatch-prometheus", "grafana-clickhouse-datasource": "mastwatch-clickhouse"}
TAG = "mastwatch"
AGENT_DASHBOARD_UID = "mastwatch-agent"  # the agent drill-down, which agent alerts link to

Steps = Sequence[tuple[str, float | None]]
GREEN_ONLY: Steps = (("green", None),)


def steps(*pairs: tuple[str, float | None]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in pairs]}


@attr.s
class PromTarget(g.Target):
    """A Prometheus query in the code editor; instant for stats, bar gauges and tables."""

    def to_json_data(self) -> dict[str, Any]:
        return {"datasource": PROMETHEUS, "refId": self.refId, "expr": self.expr, "legendFormat": self.legendFormat,
                "instant": self.instant, "range": not self.instant, "editorMode": "code",
                "format": "table" if self.format == "table" else "time_series", "interval": self.interval}


@attr.s
class ClickHouseTarget:
    """A raw SQL query of grafana-clickhouse-datasource (v4): format 0 = time series, 1 = table."""

    rawSql: str = attr.ib()
    queryType: str = attr.ib(default="table")
    refId: str = attr.ib(default="A")

    def to_json_data(self) -> dict[str, Any]:
        return {"datasource": CLICKHOUSE, "refId": self.refId, "editorType": "sql", "rawSql": self.rawSql,
                "queryType": self.queryType, "format": 0 if self.queryType == "timeSeries" else 1}


def prom(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table: bool = False) -> PromTarget:
    return PromTarget(expr=expr, legendFormat=legend or "__auto", refId=ref, instant=instant or table,
                      format="table" if table else "time_series")


def sql(query: Query, database: str, scope: Dialect, ref: str = "A") -> ClickHouseTarget:
    """A store query as the panel sends it, filtered by the dashboard's variables (`scope`)."""
    return ClickHouseTarget(rawSql=scope.render(query, database), refId=ref,
                            queryType="timeSeries" if query.format == "timeseries" else "table")


def _datasource(targets: Sequence[Any]) -> dict[str, str]:
    kinds = {isinstance(t, ClickHouseTarget) for t in targets}
    if len(kinds) != 1:
        raise ValueError("a panel queries one data source")
    return CLICKHOUSE if kinds.pop() else PROMETHEUS


def override(name: str, **props: Any) -> dict[str, Any]:
    """Field properties for one field (a series name or a table column)."""
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": key.replace("__", "."), "value": value} for key, value in props.items()]}


def regex_override(pattern: str, **props: Any) -> dict[str, Any]:
    return {**override(pattern, **props), "matcher": {"id": "byRegexp", "options": pattern}}


def trace_link(settings: DashboardsConfig) -> dict[str, Any]:
    """The trace_id column links to the trace in the user's trace UI (`trace_url`) and to the run's page mastwatch
    serves, its steps beside its findings (`trace_view_url`, unless empty)."""
    links = [{"title": "Open trace ${__value.raw}", "targetBlank": True,
              "url": settings.trace_url.replace("{trace_id}", "${__value.raw}")}]
    if settings.trace_view_url:
        links.append({"title": "mastwatch trace view", "targetBlank": True,
                      "url": settings.trace_view_url.replace("{trace_id}", "${__value.raw}")})
    return override("trace_id", links=links)


def timeseries(title: str, description: str, targets: list[Any], unit: str, *, stack: bool = False,
               bars: bool = False, thresholds: Steps = GREEN_ONLY, threshold_style: str = "off",
               overrides: Iterable[dict[str, Any]] = (), calcs: Sequence[str] = ("mean", "max", "lastNotNull"),
               legend_right: bool = False, max_value: float | None = None, axis_label: str = "") -> g.TimeSeries:
    return g.TimeSeries(
        title=title, description=description, dataSource=_datasource(targets), targets=targets, unit=unit,
        drawStyle="bars" if bars else "line", fillOpacity=80 if bars else (35 if stack else 10),
        lineWidth=1, showPoints="never", spanNulls=False, gradientMode="opacity" if not bars else "none",
        stacking={"mode": "normal", "group": "A"} if stack else {"mode": "none"},
        legendDisplayMode="table", legendPlacement="right" if legend_right else "bottom", legendCalcs=list(calcs),
        tooltipMode="multi", tooltipSort="desc", thresholdsStyleMode=threshold_style, axisLabel=axis_label,
        overrides=list(overrides), maxDataPoints=None,
        extraJson={"fieldConfig": {"defaults": {"min": 0, "max": max_value, "thresholds": steps(*thresholds)}}})


def stat(title: str, description: str, targets: list[Any], unit: str, thresholds: Steps = GREEN_ONLY, *,
         decimals: int | None = None, no_value: str = "0", color_mode: str = "value", text_mode: str = "value",
         overrides: Iterable[dict[str, Any]] = ()) -> g.Stat:
    return g.Stat(
        title=title, description=description, dataSource=_datasource(targets), targets=targets, format=unit,
        decimals=decimals, graphMode="none", colorMode=color_mode, reduceCalc="lastNotNull", noValue=no_value,
        textMode=text_mode, thresholds=[], overrides=list(overrides), extraJson={"fieldConfig": {"defaults": {
            "color": {"mode": "thresholds"}, "thresholds": steps(*thresholds)}}})


@attr.s
class BarGauge(g.Panel):
    """grafanalib's BarGauge writes Grafana 6 `fieldOptions`; this writes the current options."""

    unit: str = attr.ib(default="short")
    max_value: float | None = attr.ib(default=None)
    bar_thresholds: dict[str, Any] = attr.ib(factory=lambda: steps(*GREEN_ONLY))

    def to_json_data(self) -> dict[str, Any]:
        return self.panel_json({
            "type": g.BARGAUGE_TYPE,
            "fieldConfig": {"defaults": {"unit": self.unit, "min": 0, "max": self.max_value,
                                         "color": {"mode": "thresholds"}, "thresholds": self.bar_thresholds},
                            "overrides": []},
            "options": {"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": True,
                        "valueMode": "color", "namePlacement": "left", "sizing": "auto",
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}})


def bargauge(title: str, description: str, targets: list[Any], unit: str, thresholds: Steps = GREEN_ONLY,
             max_value: float | None = None) -> BarGauge:
    return BarGauge(title=title, description=description, dataSource=_datasource(targets), targets=targets,
                    unit=unit, max_value=max_value, bar_thresholds=steps(*thresholds))


def table(title: str, description: str, targets: list[Any], *, overrides: Iterable[dict[str, Any]] = (),
          transformations: Sequence[dict[str, Any]] = (), sort_by: str | None = None) -> g.Table:
    return g.Table(
        title=title, description=description, dataSource=_datasource(targets), targets=targets,
        filterable=True, overrides=list(overrides), transformations=list(transformations),
        sortBy=[g.TableSortByField(displayName=sort_by, desc=True)] if sort_by else [],
        extraJson={"options": {"cellHeight": "sm", "footer": {"show": False}}})


class Grid:
    """Places panels left to right in rows of 24 columns; a panel that does not fit starts a new line."""

    def __init__(self) -> None:
        self.panels: list[g.Panel] = []
        self._x = self._y = self._line_height = 0

    def _newline(self) -> None:
        self._y += self._line_height
        self._x = self._line_height = 0

    def row(self, title: str) -> Grid:
        self._newline()
        self.panels.append(g.RowPanel(title=title, gridPos=g.GridPos(h=1, w=24, x=0, y=self._y)))
        self._y += 1
        return self

    def add(self, panel: g.Panel, w: int, h: int) -> Grid:
        if self._x + w > 24:
            self._newline()
        self.panels.append(attr.evolve(panel, gridPos=g.GridPos(h=h, w=w, x=self._x, y=self._y)))
        self._x += w
        self._line_height = max(self._line_height, h)
        return self


def variable(name: str, label: str, query: str, *, multi: bool = True, include_all: bool = True,
             all_value: str | None = ".*") -> g.Template:
    return g.Template(name=name, label=label, query=query, dataSource=PROMETHEUS, multi=multi,
                      includeAll=include_all, allValue=all_value if include_all else None,
                      default="$__all" if include_all else None, refresh=g.REFRESH_ON_TIME_RANGE_CHANGE,
                      sort=g.SORT_ALPHA_ASC)


def topology(labels: Sequence[str], metric: str) -> tuple[list[g.Template], str]:
    """A variable per deployment label the scrape adds (cluster, namespace, job), each listing the values left by
    the ones before it, and the matchers that select with them. Set to All they match series without the label
    too, so the same dashboards serve a single Prometheus and a multi-cluster one."""
    variables: list[g.Template] = []
    matchers: list[str] = []
    for label in labels:
        title = label.replace("_", " ").capitalize()
        variables.append(variable(label, title, f"label_values({series(metric, *matchers)}, {label})"))
        matchers.append(f'{label}=~"${label}"')
    return variables, selector(*matchers)


def selector(*matchers: str) -> str:
    """Label matchers joined, the empty ones left out."""
    return ", ".join(m for m in matchers if m)


def series(metric: str, *matchers: str) -> str:
    """A vector selector: `metric{matchers}`, or the bare name when there are none (`{}` does not parse)."""
    within = selector(*matchers)
    return f"{metric}{{{within}}}" if within else metric


@attr.s
class DatasourceVariable:
    """A data source picker: `plugin` is the data source type; the provisioned one is the default."""

    name: str = attr.ib()
    label: str = attr.ib()
    plugin: str = attr.ib()

    def to_json_data(self) -> dict[str, Any]:
        uid = PROVISIONED[self.plugin]
        return {"name": self.name, "label": self.label, "type": "datasource", "query": self.plugin, "hide": 0,
                "refresh": 1, "regex": "", "multi": False, "includeAll": False, "options": [],
                "current": {"selected": False, "text": uid, "value": uid}}


DATASOURCES = (DatasourceVariable("datasource", "Prometheus", PROMETHEUS["type"]),
               DatasourceVariable("clickhouse", "ClickHouse", CLICKHOUSE["type"]))


def json_type(panel: Any) -> str | None:
    """The data source type a panel queries (rows query none)."""
    source = getattr(panel, "dataSource", None)
    return source.get("type") if isinstance(source, dict) else None


def marker(name: str, target: ClickHouseTarget, color: str = "purple") -> dict[str, Any]:
    """Events drawn on every time series of a dashboard: the rows (a `time` and a `text`) of a store query."""
    return {"name": name, "datasource": CLICKHOUSE, "enable": True, "iconColor": color,
            "target": target.to_json_data()}


def dashboard(title: str, uid: str, description: str, grid: Grid, variables: Sequence[g.Template] = (),
              time_from: str = "now-6h", markers: Sequence[dict[str, Any]] = ()) -> g.Dashboard:
    uses = {json_type(p) for p in grid.panels}
    pickers = [v for v in DATASOURCES if v.plugin in uses or (v.plugin == PROMETHEUS["type"] and variables)]
    return g.Dashboard(annotations=g.Annotations(list=list(markers)),
        title=title, uid=uid, description=description, tags=[TAG], panels=grid.panels,
        templating=g.Templating(list=[*pickers, *variables]), schemaVersion=SCHEMA_VERSION, timezone="browser",
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR, refresh="30s", time=g.Time(time_from, "now"),
        links=[g.DashboardLink(title="mastwatch", tags=[TAG], asDropdown=True, includeVars=False, keepTime=True)],
    ).auto_panel_ids()
