-- 002_samples: every numeric measurement as one narrow row (ts, node, subject, metric, value)
-- with hourly rollups.
--
-- Why narrow: metric sets differ per kind, per vendor and per collector version (RDMA
-- counters alone are open-ended); a narrow table needs no DDL when a metric appears, and
-- LowCardinality(metric/subject) + Gorilla/Delta codecs make it about as small as a wide one.
-- Subjects use the contract's component forms: gpu:<node>/<i>, port:<device>/<port>,
-- path:<mount>, sensor:<node>/<name>, job:<job>.
--
-- ORDER BY (metric, node, subject, ts): queries read one metric for a node/subject over a
-- time range ("temp_c of gpu:n1/3 last 6 h", "in_errors of port:leaf-03/Eth1/7"), so the
-- primary index narrows to a few granules; event_id last makes a re-delivered event collapse
-- (ReplacingMergeTree). Daily partitions + 30-day TTL dropping whole parts, as for raw events.

CREATE TABLE IF NOT EXISTS samples
(
    ts DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1)),
    node LowCardinality(String),
    subject LowCardinality(String),
    metric LowCardinality(String),
    value Float64 CODEC(Gorilla, ZSTD(1)),
    event_id String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (metric, node, subject, ts, event_id)
TTL toDateTime(ts) + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

-- Numeric fields of gpu.sample, net.port, storage.sample and runtime.progress: every key whose
-- raw JSON value is a number, except the identifying ones (gpu index, port, rank).
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_fields TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       multiIf(kind = 'gpu.sample', concat('gpu:', ifNull(node, ''), '/', toString(JSONExtractInt(data, 'gpu'))),
               kind = 'net.port', concat('port:', JSONExtractString(data, 'device'), '/', JSONExtractString(data, 'port')),
               kind = 'storage.sample', concat('path:', JSONExtractString(data, 'path')),
               concat('job:', ifNull(job, ''))) AS subject,
       kv.1 AS metric,
       toFloat64OrZero(kv.2) AS value,
       id AS event_id
FROM ingest_events
ARRAY JOIN JSONExtractKeysAndValuesRaw(data) AS kv
WHERE kind IN ('gpu.sample', 'net.port', 'storage.sample', 'runtime.progress')
  AND match(kv.2, '^-?[0-9]')
  AND kv.1 NOT IN ('gpu', 'port', 'rank');

-- net.rdma: the open-ended counter object (names as /sys/class/infiniband exposes them,
-- see shared/reference/rdma_counters.csv); subject port:<hca>/<port>.
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_rdma TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       concat('port:', JSONExtractString(data, 'device'), '/', toString(JSONExtractInt(data, 'port'))) AS subject,
       kv.1 AS metric,
       toFloat64(kv.2) AS value,
       id AS event_id
FROM ingest_events
ARRAY JOIN JSONExtractKeysAndValues(data, 'counters', 'Int64') AS kv
WHERE kind = 'net.rdma';

-- hw.sensor: one reading; metric = sensor type (temperature, fan, ...), subject names the sensor.
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_sensor TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       concat('sensor:', ifNull(node, ''), '/', JSONExtractString(data, 'sensor')) AS subject,
       JSONExtractString(data, 'type') AS metric,
       JSONExtractFloat(data, 'value') AS value,
       id AS event_id
FROM ingest_events
WHERE kind = 'hw.sensor' AND JSONType(data, 'value') IN ('Double', 'Int64', 'UInt64');

-- Hourly rollup (AggregatingMergeTree): dashboards over weeks read ~3600x fewer rows.
-- min/max/last are insensitive to re-delivered rows; the row count is uniq(event_id) so a
-- duplicate does not inflate it either. avg weights a re-delivered sample twice until the
-- raw table has merged; query `samples FINAL` when the exact mean matters.
-- For cumulative counters, max - min within the hour is the hour's growth (resets aside).
CREATE TABLE IF NOT EXISTS samples_hourly
(
    hour DateTime('UTC'),
    node LowCardinality(String),
    subject LowCardinality(String),
    metric LowCardinality(String),
    min_value AggregateFunction(min, Float64),
    max_value AggregateFunction(max, Float64),
    avg_value AggregateFunction(avg, Float64),
    last_value AggregateFunction(argMax, Float64, DateTime64(3, 'UTC')),
    n AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (metric, node, subject, hour)
TTL hour + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_hourly TO samples_hourly AS
SELECT toStartOfHour(ts) AS hour, node, subject, metric,
       minState(value) AS min_value, maxState(value) AS max_value, avgState(value) AS avg_value,
       argMaxState(value, ts) AS last_value, uniqState(event_id) AS n
FROM samples
GROUP BY hour, node, subject, metric;

-- Ingest volume per hour, kind and node (SummingMergeTree): monitoring of the pipeline
-- itself. It counts deliveries, so re-deliveries show up here on purpose.
CREATE TABLE IF NOT EXISTS ingest_hourly
(
    hour DateTime('UTC'),
    kind LowCardinality(String),
    node LowCardinality(String),
    deliveries UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, kind, node)
TTL hour + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_ingest_hourly TO ingest_hourly AS
SELECT toStartOfHour(fromUnixTimestamp64Milli(ts, 'UTC')) AS hour, kind, ifNull(node, '') AS node,
       count() AS deliveries
FROM ingest_events
GROUP BY hour, kind, node;
