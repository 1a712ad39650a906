-- 003_jobs: derived tables the trend queries join on, all maintained by materialized views
-- from `ingest_events`, so they fill from the same insert in both backends.

-- Job attempts: one row per (job, attempt) once merged. AggregatingMergeTree folds every
-- sched.job state change of an attempt into min/max/argMax states; all of them are
-- idempotent, so a re-delivered state change changes nothing. Read through the view
-- `attempts` (GROUP BY job, attempt), which is right before merges.
CREATE TABLE IF NOT EXISTS job_attempts
(
    job String,
    attempt UInt16,
    tenant SimpleAggregateFunction(max, String),
    name SimpleAggregateFunction(max, String),
    user SimpleAggregateFunction(max, String),
    image SimpleAggregateFunction(max, String),
    gpus SimpleAggregateFunction(max, UInt32),
    first_ts SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_ts SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    start_ms SimpleAggregateFunction(max, Int64),    -- data.start_ts, 0 if never reported
    end_ms SimpleAggregateFunction(max, Int64),      -- data.end_ts, 0 if never reported
    running_ms SimpleAggregateFunction(min, Int64),  -- first 'running' event; max Int64 if none
    state AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), UInt8)),
    nodes AggregateFunction(argMax, Array(String), Tuple(DateTime64(3, 'UTC'), UInt8)),
    exit_code AggregateFunction(argMax, Nullable(Int32), Tuple(DateTime64(3, 'UTC'), UInt8))
)
ENGINE = AggregatingMergeTree
ORDER BY (job, attempt);

-- the tie-break in argMax's key ranks a terminal state above running above pending when two
-- state changes carry the same millisecond
CREATE MATERIALIZED VIEW IF NOT EXISTS mv_job_attempts TO job_attempts AS
SELECT ifNull(job, '') AS job,
       toUInt16(JSONExtractUInt(data, 'attempt')) AS attempt,
       max(ifNull(tenant, '')) AS tenant,
       max(JSONExtractString(data, 'name')) AS name,
       max(JSONExtractString(data, 'user')) AS user,
       max(JSONExtractString(data, 'image')) AS image,
       max(toUInt32(JSONExtractUInt(data, 'gpus'))) AS gpus,
       min(fromUnixTimestamp64Milli(ts, 'UTC')) AS first_ts,
       max(fromUnixTimestamp64Milli(ts, 'UTC')) AS last_ts,
       max(JSONExtractInt(data, 'start_ts')) AS start_ms,
       max(JSONExtractInt(data, 'end_ts')) AS end_ms,
       min(if(JSONExtractString(data, 'state') = 'running', ts, 9223372036854775807)) AS running_ms,
       argMaxState(JSONExtractString(data, 'state'),
                   (fromUnixTimestamp64Milli(ts, 'UTC'), toUInt8(multiIf(JSONExtractString(data, 'state') = 'pending', 0, JSONExtractString(data, 'state') = 'running', 1, 2)))) AS state,
       argMaxState(JSONExtract(data, 'nodes', 'Array(String)'),
                   (fromUnixTimestamp64Milli(ts, 'UTC'), toUInt8(multiIf(JSONExtractString(data, 'state') = 'pending', 0, JSONExtractString(data, 'state') = 'running', 1, 2)))) AS nodes,
       argMaxState(JSONExtract(data, 'exit_code', 'Nullable(Int32)'),
                   (fromUnixTimestamp64Milli(ts, 'UTC'), toUInt8(multiIf(JSONExtractString(data, 'state') = 'pending', 0, JSONExtractString(data, 'state') = 'running', 1, 2)))) AS exit_code
FROM ingest_events
WHERE kind = 'sched.job'
GROUP BY job, attempt;

-- One row per attempt, correct before merges. start/end fall back to the first running event
-- and the last event seen when the scheduler did not report them.
CREATE VIEW IF NOT EXISTS attempts AS
SELECT job, attempt, tenant, name, user, image, gpus, state, nodes, exit_code, first_ts, last_ts,
       multiIf(s_ms > 0, fromUnixTimestamp64Milli(s_ms, 'UTC'),
               r_ms < 9223372036854775807, fromUnixTimestamp64Milli(r_ms, 'UTC'),
               first_ts) AS start_ts,
       if(e_ms > 0, fromUnixTimestamp64Milli(e_ms, 'UTC'), last_ts) AS end_ts
FROM
(
    SELECT job, attempt,
           max(a.tenant) AS tenant, max(a.name) AS name, max(a.user) AS user, max(a.image) AS image,
           max(a.gpus) AS gpus,
           argMaxMerge(a.state) AS state,
           argMaxMerge(a.nodes) AS nodes,
           argMaxMerge(a.exit_code) AS exit_code,
           min(a.first_ts) AS first_ts,
           max(a.last_ts) AS last_ts,
           max(a.start_ms) AS s_ms,
           min(a.running_ms) AS r_ms,
           max(a.end_ms) AS e_ms
    FROM job_attempts AS a
    GROUP BY job, attempt
);

-- Checkpoints (runtime.checkpoint): read per job in time order. Dedup by event id.
CREATE TABLE IF NOT EXISTS checkpoints
(
    id String,
    ts DateTime64(3, 'UTC'),
    job String,
    node LowCardinality(String),
    tenant LowCardinality(String),
    phase LowCardinality(String),      -- started | succeeded | failed
    step Int64,
    path String,
    bytes Nullable(Int64),
    duration_s Nullable(Float64),
    error String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (job, ts, id)
TTL toDateTime(ts) + INTERVAL 365 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_checkpoints TO checkpoints AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, ifNull(job, '') AS job, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant,
       JSONExtractString(data, 'phase') AS phase,
       JSONExtractInt(data, 'step') AS step,
       JSONExtractString(data, 'path') AS path,
       JSONExtract(data, 'bytes', 'Nullable(Int64)') AS bytes,
       JSONExtract(data, 'duration_s', 'Nullable(Float64)') AS duration_s,
       JSONExtractString(data, 'error') AS error
FROM ingest_events WHERE kind = 'runtime.checkpoint';

-- Inventory: every reported version (history, so "which driver did n17 run at 14:02" is an
-- ASOF JOIN). Key (node, component, ts): a re-report of the same state at the same ts collapses.
CREATE TABLE IF NOT EXISTS inventory_versions
(
    ts DateTime64(3, 'UTC'),
    node LowCardinality(String),
    component LowCardinality(String),
    version String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (node, component, ts);

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_inventory_versions TO inventory_versions AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts, ifNull(node, '') AS node,
       kv.1 AS component, kv.2 AS version
FROM (SELECT ts, node, data FROM ingest_events WHERE kind = 'inventory.versions')
ARRAY JOIN JSONExtractKeysAndValues(data, 'String') AS kv;

-- Changes (inventory.change): the before/after trend query reads them all; they are few.
CREATE TABLE IF NOT EXISTS changes
(
    id String,
    ts DateTime64(3, 'UTC'),
    node LowCardinality(String),
    component LowCardinality(String),
    from_version String,
    to_version String,
    actor String,
    ticket String
)
ENGINE = ReplacingMergeTree
ORDER BY (component, to_version, ts, node, id);

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_changes TO changes AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, ifNull(node, '') AS node,
       JSONExtractString(data, 'component') AS component,
       JSONExtractString(data, 'from') AS from_version,
       JSONExtractString(data, 'to') AS to_version,
       JSONExtractString(data, 'actor') AS actor,
       JSONExtractString(data, 'ticket') AS ticket
FROM ingest_events WHERE kind = 'inventory.change';

-- Topology: latest attachment per (node, nic) and per (node, path) wins (version = ts).
CREATE TABLE IF NOT EXISTS topology_links
(
    ts DateTime64(3, 'UTC'),
    node LowCardinality(String),
    nic String,
    switch LowCardinality(String),
    port String,
    segment LowCardinality(String)
)
ENGINE = ReplacingMergeTree(ts)
ORDER BY (node, nic);

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_topology_links TO topology_links AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts, ifNull(node, '') AS node,
       JSONExtractString(l, 'nic') AS nic, JSONExtractString(l, 'switch') AS switch,
       JSONExtractString(l, 'port') AS port, JSONExtractString(l, 'segment') AS segment
FROM (SELECT ts, node, data FROM ingest_events WHERE kind = 'inventory.topology')
ARRAY JOIN JSONExtractArrayRaw(data, 'links') AS l;

CREATE TABLE IF NOT EXISTS topology_storage
(
    ts DateTime64(3, 'UTC'),
    node LowCardinality(String),
    path String,
    backend LowCardinality(String),
    server String
)
ENGINE = ReplacingMergeTree(ts)
ORDER BY (node, path);

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_topology_storage TO topology_storage AS
SELECT fromUnixTimestamp64Milli(ts, 'UTC') AS ts, ifNull(node, '') AS node,
       JSONExtractString(s, 'path') AS path, JSONExtractString(s, 'backend') AS backend,
       JSONExtractString(s, 'server') AS server
FROM (SELECT ts, node, data FROM ingest_events WHERE kind = 'inventory.topology')
ARRAY JOIN JSONExtractArrayRaw(data, 'storage') AS s;
