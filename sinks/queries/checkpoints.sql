-- name: checkpoints
-- answers: Per job: how many checkpoints started, succeeded and failed, the success rate,
--   when the last one succeeded, how old it was when the job was last seen (the work an
--   interruption at that moment would have cost), and the median interval between successes.
-- param: since_ms Int64 = 0          checkpoints at or after this epoch ms (0 = all)
WITH
ck AS
(
    SELECT c.job AS job, c.id AS id, any(c.ts) AS ts, any(c.phase) AS phase
    FROM checkpoints AS c
    WHERE c.ts >= fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
    GROUP BY c.job, c.id
),
seen AS (SELECT job, max(end_ts) AS last_seen FROM attempts GROUP BY job),
per AS
(
    SELECT job,
           countIf(phase = 'started') AS started,
           countIf(phase = 'succeeded') AS succeeded,
           countIf(phase = 'failed') AS failed,
           maxIf(ts, phase = 'succeeded') AS last_ok,
           max(ts) AS last_ck,
           arraySort(groupArrayIf(toUnixTimestamp64Milli(ts), phase = 'succeeded')) AS ok_ts
    FROM ck GROUP BY job
)
SELECT per.job AS job, started, succeeded, failed,
       round(if(succeeded + failed > 0, succeeded / (succeeded + failed), NULL), 4) AS success_rate,
       if(succeeded > 0, last_ok, NULL) AS last_success,
       round(if(succeeded > 0, dateDiff('millisecond', last_ok, greatest(last_ck, ifNull(seen.last_seen, last_ck))) / 60000, NULL), 2) AS age_min,
       round(if(length(ok_ts) > 1, arrayReduce('median', arrayPopFront(arrayDifference(ok_ts))) / 60000, NULL), 2) AS median_interval_min
FROM per LEFT JOIN seen ON seen.job = per.job
ORDER BY ifNull(success_rate, 0), job
