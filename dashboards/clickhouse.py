"""The store's queries (`mastwatch.exporter.store.queries`) as the dashboards' ClickHouse panels send them.

Written for Grafana's ClickHouse data source (grafana-clickhouse-datasource): time macros ($__timeFilter,
$__timeInterval) and variables (${service:sqlstring}) are expanded by Grafana and the plugin;
`macros.expand_sql` does the same for `mastwatch report` and the tests. Trace rows carry the models they
used, repeated-step rows the model that produced them; finding and judgement rows carry none.
"""

from __future__ import annotations

from dataclasses import replace

from mastwatch.exporter.store.queries import Dialect

# The fleet dashboards: $service (multi-value, with All).
FLEET = Dialect(range="$__timeFilter(started_at)", bucket="$__timeInterval(started_at)",
                match="$__conditionalAll(service IN (${service:sqlstring}), $service)")
# The agent drill-down: one $service and $agent, and its $model (multi-value, with All).
AGENT = replace(FLEET, match="service = ${service:sqlstring} AND agent = ${agent:sqlstring}",
                models="$__conditionalAll(hasAny(models, [${model:sqlstring}]), $model)",
                model="$__conditionalAll(model IN (${model:sqlstring}), $model)")

