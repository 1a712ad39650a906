-- 005_deadletter: rejected input, so an SRE can see in SQL what was refused and why
-- (fl.deadletter records from the stream agents, and invalid lines of `faultline ingest`).
-- Keyed by where the record came from (topic, partition, offset; for a file the line), so a
-- re-delivered dead letter collapses like every other table (not partitioned by time: a
-- re-delivery is rejected again with a later ts). Raw bytes kept (base64 as on the topic),
-- compressed; 30 days like the topic.
CREATE TABLE IF NOT EXISTS deadletters
(
    ts DateTime64(3, 'UTC'),
    reason String,
    reason_key LowCardinality(String),  -- the reason without its position detail, for GROUP BY
    topic LowCardinality(String),
    partition Int32,
    offset Int64,
    raw_b64 String CODEC(ZSTD(3)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
ORDER BY (topic, partition, offset)
TTL toDateTime(ts) + INTERVAL 30 DAY;
