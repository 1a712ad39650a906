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
-- primary index narrows to a few granules; event_key last makes a re-delivered event collapse
-- (ReplacingMergeTree). event_key = cityHash64(event id): 8 bytes instead of a 26-40 byte
-- string in the sort of every insert (bench/sink.py: the samples view is the ingest hot
-- spot); find the source event with `WHERE cityHash64(id) = event_key`.
-- Daily partitions + 30-day TTL from arrival dropping whole parts, as for raw events.

CREATE TABLE IF NOT EXISTS samples
(
    ts DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1)),
    node LowCardinality(String),
    subject LowCardinality(String),
    metric LowCardinality(String),
    value Float64 CODEC(Gorilla, ZSTD(1)),
    event_key UInt64,
    ingested_at DateTime('UTC') DEFAULT now() CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (metric, node, subject, ts, event_key)
TTL ingested_at + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

-- Numeric fields of gpu.sample, net.port, storage.sample and runtime.progress: every key whose
-- JSON value is a number (strings, lists and nulls extract as NULL and are dropped), except
-- the identifying ones (gpu index, port, rank).
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_fields TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       multiIf(kind = 'gpu.sample', concat('gpu:', ifNull(node, ''), '/', toString(simpleJSONExtractInt(data, 'gpu'))),
               kind = 'net.port', concat('port:', JSONExtractString(data, 'device'), '/', JSONExtractString(data, 'port')),
               kind = 'storage.sample', concat('path:', JSONExtractString(data, 'path')),
               concat('job:', ifNull(job, ''))) AS subject,
       kv.1 AS metric,
       assumeNotNull(kv.2) AS value,
       cityHash64(id) AS event_key
-- filter in a subquery first, so the JSON is only parsed for the kinds that carry samples
FROM (SELECT ts, node, job, kind, id, data FROM ingest_events
      WHERE kind IN ('gpu.sample', 'net.port', 'storage.sample', 'runtime.progress'))
ARRAY JOIN JSONExtractKeysAndValues(data, 'Nullable(Float64)') AS kv
WHERE kv.2 IS NOT NULL
  AND kv.1 NOT IN ('gpu', 'port', 'rank');

-- net.rdma: the open-ended counter object (names as /sys/class/infiniband exposes them,
-- see shared/reference/rdma_counters.csv); subject port:<hca>/<port>.
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_rdma TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       concat('port:', JSONExtractString(data, 'device'), '/', toString(JSONExtractInt(data, 'port'))) AS subject,
       kv.1 AS metric,
       toFloat64(kv.2) AS value,
       cityHash64(id) AS event_key
FROM (SELECT ts, node, id, data FROM ingest_events WHERE kind = 'net.rdma')
ARRAY JOIN JSONExtractKeysAndValues(data, 'counters', 'Int64') AS kv;

-- hw.sensor: one reading; metric = sensor type (temperature, fan, ...), subject names the sensor.
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_sensor TO samples AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts,
       ifNull(node, '') AS node,
       concat('sensor:', ifNull(node, ''), '/', JSONExtractString(data, 'sensor')) AS subject,
       JSONExtractString(data, 'type') AS metric,
       JSONExtractFloat(data, 'value') AS value,
       cityHash64(id) AS event_key
FROM ingest_events
WHERE kind = 'hw.sensor' AND JSONType(data, 'value') IN ('Double', 'Int64', 'UInt64');

-- Hourly rollup (AggregatingMergeTree with SimpleAggregateFunction columns: plain values,
-- no serialized states, so the view costs little at insert; bench/sink.py measured
-- uniq/argMax states at 2-3x the cost of the whole rest of the ingest).
-- Dashboards over weeks read ~360x fewer rows (one sample every 10 s).
-- min/max are insensitive to re-delivered rows; n and sum count a re-delivered sample twice
-- (the rollup has no event key): use them for averages and volumes, and read `samples
-- FINAL` where an exact count matters. For cumulative counters, max - min within an hour is
-- the hour's growth (resets aside).
CREATE TABLE IF NOT EXISTS samples_hourly
(
    hour DateTime('UTC'),
    node LowCardinality(String),
    subject LowCardinality(String),
    metric LowCardinality(String),
    min_value SimpleAggregateFunction(min, Float64),
    max_value SimpleAggregateFunction(max, Float64),
    sum_value SimpleAggregateFunction(sum, Float64),
    n SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (metric, node, subject, hour)
TTL hour + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_samples_hourly TO samples_hourly AS
SELECT toStartOfHour(ts) AS hour, node, subject, metric,
       min(value) AS min_value, max(value) AS max_value, sum(value) AS sum_value, count() AS n
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
