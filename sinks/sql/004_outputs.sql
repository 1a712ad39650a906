-- 004_outputs: what the stream agents conclude: alerts, incidents (+ evidence), findings.
-- Low volume (thousands a day at most), read by id, job and time; kept long for trends.

-- Alerts: ReplacingMergeTree keyed by id (re-delivery collapses). Monthly partitions and a
-- year of retention; sorted by (5-minute window, id) because alerts are listed by time
-- window, and an id names its subject, kind and 5-minute window (streams/alert_gate.py):
-- copies of one id from two workers may differ in ts inside the window, and still collapse.
CREATE TABLE IF NOT EXISTS alerts
(
    id String,
    ts DateTime64(3, 'UTC'),
    severity LowCardinality(String),
    detector LowCardinality(String),
    node LowCardinality(String),
    job String,
    subject String,
    summary String,
    evidence Array(String),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (toStartOfInterval(ts, INTERVAL 5 MINUTE), id)
TTL toDateTime(ts) + INTERVAL 365 DAY;

-- Incidents: one row per (id, revision); ReplacingMergeTree(revision) keeps the highest
-- revision on merge, and every query reads `incidents FINAL` (view incidents_latest) so the
-- latest revision wins before merges too. Not partitioned: a later revision may move
-- failure_ts, and the table is small (a year of incidents fits in a few parts); ORDER BY id
-- makes FINAL a cheap sorted merge.
CREATE TABLE IF NOT EXISTS incidents
(
    id String,
    revision UInt32,
    job String,
    attempt UInt16,
    tenant LowCardinality(String),
    failure_ts DateTime64(3, 'UTC'),
    start_ts Nullable(DateTime64(3, 'UTC')),
    state LowCardinality(String),
    symptom String,
    category LowCardinality(String),
    component String,
    cause_summary String,
    confidence Float32,
    ruled_out Array(LowCardinality(String)),
    last_checkpoint_ts Nullable(DateTime64(3, 'UTC')),
    last_checkpoint_step Nullable(Int64),
    last_checkpoint_path String,
    lost_gpu_hours Float64,
    gpus UInt32,
    image String,
    affected_nodes Array(String),
    affected_gpus Array(String),
    affected_ports Array(String),
    affected_paths Array(String),
    retry_attempt Nullable(UInt16),
    retry_state LowCardinality(String),
    retry_ts Nullable(DateTime64(3, 'UTC')),
    retry_same_nodes Nullable(UInt8),
    hypotheses String CODEC(ZSTD(3)),  -- JSON list of causes
    record String CODEC(ZSTD(3)),      -- the whole Incident as JSON (explain renders it)
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY id;

CREATE VIEW IF NOT EXISTS incidents_latest AS
SELECT * FROM incidents FINAL;

-- Evidence items, one row each, for cross-layer timelines in SQL. Versioned like the incident;
-- keep rows of the incident's latest revision only (the join in queries does that), since an
-- item dropped by a later revision stays behind in older-revision rows.
CREATE TABLE IF NOT EXISTS incident_evidence
(
    incident_id String,
    revision UInt32,
    evidence_id String,
    ts DateTime64(3, 'UTC'),
    layer LowCardinality(String),
    node LowCardinality(String),
    summary String
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY (incident_id, evidence_id);

-- Findings: proactive (repeat offender, change regression, version drift). Same subject and
-- window give the same id; the latest emission wins.
CREATE TABLE IF NOT EXISTS findings
(
    id String,
    ts DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    dimension LowCardinality(String),
    subject String,
    window_start DateTime64(3, 'UTC'),
    window_end DateTime64(3, 'UTC'),
    count UInt32,
    exposure Float64,
    exposure_unit LowCardinality(String),
    fleet_rate Float64,
    score Float64,
    severity LowCardinality(String),
    summary String,
    action String,
    incidents Array(String)
)
ENGINE = ReplacingMergeTree(ts)
ORDER BY (kind, dimension, subject, id);
