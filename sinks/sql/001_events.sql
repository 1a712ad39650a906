-- 001_events: raw events, one table per layer, fed from one Null-engine landing table.
--
-- Ingest path: every contract event is inserted as its JSON line (JSONEachRow) into
-- `ingest_events` (ENGINE = Null: stores nothing). Materialized views route each row to its
-- layer table and extract the hot fields there, so the parsing runs in ClickHouse's C++ JSON
-- reader instead of Python, and chDB and a server ingest the same bytes the same way.
-- `data` arrives as a JSON string (input_format_json_read_objects_as_strings, default on).
--
-- Idempotency: every layer table is a ReplacingMergeTree whose sorting key ends in the event
-- id and whose other key columns are functions of the event itself, so a re-delivered event
-- (same id) collapses into one row on merge. Queries must be right BEFORE merges too: they
-- count with uniqExact(id) / GROUP BY id, or read with FINAL.
--
-- Partitioning: high-volume telemetry (gpu, hw, net, storage) by day so the TTL drops whole
-- parts (ttl_only_drop_parts = 1: no row-by-row TTL merges); the job history (sched,
-- runtime, inventory) is small and kept a year, by month. A day holds every copy of an event
-- (same id -> same ts -> same partition), so partitioning never splits duplicates.
-- TTLs count from arrival (ingested_at), not from the event's ts: live data is the same
-- either way, and a replayed or simulated history older than the TTL is kept for the TTL
-- instead of vanishing at its first merge. Parts are written per insert, so the rows of
-- a part arrive together and `ttl_only_drop_parts` still drops whole parts.

CREATE TABLE IF NOT EXISTS ingest_events
(
    v UInt8,
    id String,
    ts Int64,                          -- epoch ms, as on the wire
    kind LowCardinality(String),
    source String,
    node Nullable(String),
    job Nullable(String),
    tenant Nullable(String),
    data String                        -- the kind's object, kept verbatim as JSON text
)
ENGINE = Null;

-- ---------------------------------------------------------------- gpu (gpu.sample, gpu.xid)
-- Read by node and time window ("what did the GPUs of n17 do before 14:02"), then by GPU.
CREATE TABLE IF NOT EXISTS events_gpu
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    tenant LowCardinality(String),
    gpu Int16,                         -- -1 when the report names no GPU
    xid UInt16,                        -- 0 for samples
    throttle Array(LowCardinality(String)),
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (node, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_gpu TO events_gpu AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant,
       -- simpleJSON* (a flat scan, ~4x cheaper than JSONExtract) for the numeric hot fields:
       -- ingest of this table is dominated by JSON extraction (bench/sink.py)
       toInt16OrDefault(simpleJSONExtractRaw(data, 'gpu'), toInt16(-1)) AS gpu,
       toUInt16(simpleJSONExtractUInt(data, 'xid')) AS xid,
       if(position(data, '"throttle":[]') > 0, [], JSONExtract(data, 'throttle', 'Array(String)')) AS throttle,
       data
FROM ingest_events WHERE startsWith(kind, 'gpu.');

-- ---------------------------------------------------------------- hw (hw.sensor, hw.sel)
CREATE TABLE IF NOT EXISTS events_hw
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    tenant LowCardinality(String),
    sensor LowCardinality(String),     -- sensor name (hw.sensor) or sensor_type (hw.sel)
    status LowCardinality(String),     -- ok | warning | critical (status / severity)
    message String,
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (node, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_hw TO events_hw AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant,
       if(kind = 'hw.sel', JSONExtractString(data, 'sensor_type'), JSONExtractString(data, 'sensor')) AS sensor,
       if(kind = 'hw.sel', JSONExtractString(data, 'severity'), JSONExtractString(data, 'status')) AS status,
       JSONExtractString(data, 'message') AS message,
       data
FROM ingest_events WHERE startsWith(kind, 'hw.');

-- ---------------------------------------------------------------- net (net.port, net.link, net.rdma)
-- Net events are about a device port, often with no node (switch side): key by device/port.
CREATE TABLE IF NOT EXISTS events_net
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    tenant LowCardinality(String),
    device LowCardinality(String),
    port LowCardinality(String),
    state LowCardinality(String),      -- oper_status (net.port) or state (net.link); '' for rdma
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (device, port, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_net TO events_net AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant,
       JSONExtractString(data, 'device') AS device,
       -- port is a string for net.port/net.link and an int for net.rdma
       if(JSONType(data, 'port') = 'String', JSONExtractString(data, 'port'), toString(JSONExtractInt(data, 'port'))) AS port,
       multiIf(kind = 'net.port', JSONExtractString(data, 'oper_status'), kind = 'net.link', JSONExtractString(data, 'state'), '') AS state,
       data
FROM ingest_events WHERE startsWith(kind, 'net.');

-- ---------------------------------------------------------------- storage (storage.sample, storage.mount)
CREATE TABLE IF NOT EXISTS events_storage
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    tenant LowCardinality(String),
    path LowCardinality(String),
    state LowCardinality(String),      -- mount state; '' for samples
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (path, node, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 30 DAY
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_storage TO events_storage AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant,
       JSONExtractString(data, 'path') AS path,
       JSONExtractString(data, 'state') AS state,
       data
FROM ingest_events WHERE startsWith(kind, 'storage.');

-- ---------------------------------------------------------------- sched (sched.job, sched.node)
-- Job history: read by job ("explain 48213"), kept a year for trends.
CREATE TABLE IF NOT EXISTS events_sched
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    job String,
    tenant LowCardinality(String),
    state LowCardinality(String),
    attempt UInt16,
    gpus UInt32,
    nodes Array(String),
    image LowCardinality(String),
    exit_code Nullable(Int32),
    reason String,
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (job, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 365 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_sched TO events_sched AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(job, '') AS job, ifNull(tenant, '') AS tenant,
       JSONExtractString(data, 'state') AS state,
       toUInt16(JSONExtractUInt(data, 'attempt')) AS attempt,
       toUInt32(JSONExtractUInt(data, 'gpus')) AS gpus,
       JSONExtract(data, 'nodes', 'Array(String)') AS nodes,
       JSONExtractString(data, 'image') AS image,
       JSONExtract(data, 'exit_code', 'Nullable(Int32)') AS exit_code,
       JSONExtractString(data, 'reason') AS reason,
       data
FROM ingest_events WHERE startsWith(kind, 'sched.');

-- ---------------------------------------------------------------- runtime (log, progress, checkpoint, container)
CREATE TABLE IF NOT EXISTS events_runtime
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    job String,
    tenant LowCardinality(String),
    rank Int32,                        -- -1 when not rank-specific
    step Int64,                        -- progress / checkpoint step, -1 otherwise
    phase LowCardinality(String),      -- checkpoint phase, container event, or log stream
    message String,                    -- log line / checkpoint error
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (job, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 365 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_runtime TO events_runtime AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(job, '') AS job, ifNull(tenant, '') AS tenant,
       ifNull(JSONExtract(data, 'rank', 'Nullable(Int32)'), -1) AS rank,
       ifNull(JSONExtract(data, 'step', 'Nullable(Int64)'), -1) AS step,
       multiIf(kind = 'runtime.checkpoint', JSONExtractString(data, 'phase'),
               kind = 'runtime.container', JSONExtractString(data, 'event'),
               kind = 'runtime.log', JSONExtractString(data, 'stream'), '') AS phase,
       multiIf(kind = 'runtime.log', JSONExtractString(data, 'message'),
               kind = 'runtime.checkpoint', JSONExtractString(data, 'error'), '') AS message,
       data
FROM ingest_events WHERE startsWith(kind, 'runtime.');

-- ---------------------------------------------------------------- inventory (versions, change, topology)
CREATE TABLE IF NOT EXISTS events_inventory
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    source LowCardinality(String),
    node LowCardinality(String),
    tenant LowCardinality(String),
    data String CODEC(ZSTD(1)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (node, ts, id)
TTL toDateTime(ingested_at) + INTERVAL 365 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS mv_events_inventory TO events_inventory AS
SELECT id, fromUnixTimestamp64Milli(ts, 'UTC') AS ts, kind, source, ifNull(node, '') AS node,
       ifNull(tenant, '') AS tenant, data
FROM ingest_events WHERE startsWith(kind, 'inventory.');
