-- name: ettr
-- answers: Effective training time ratio per job: productive time over scheduled time, summed
--   over its attempts. An interrupted attempt's time after its last succeeded checkpoint (or
--   its start, with none) is unproductive: that work is redone. wall_h is first start to
--   last end (requeue waits included), ettr_wall = productive / wall.
-- param: since_ms Int64 = 0          attempts that ended at or after this epoch ms (0 = all)
-- param: until_ms Int64 = 0          attempts that started before this epoch ms (0 = open)
WITH
    fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC') AS w_from,
    if({until_ms:Int64} = 0, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'), fromUnixTimestamp64Milli({until_ms:Int64}, 'UTC')) AS w_to,
att AS
(
    SELECT job, attempt, start_ts, end_ts, gpus,
           greatest(dateDiff('millisecond', start_ts, end_ts), 0) AS sched_ms
    FROM attempts
    WHERE end_ts >= w_from AND start_ts < w_to
),
inc AS
(
    SELECT job, attempt, 1 AS interrupted, last_checkpoint_ts
    FROM incidents FINAL
    WHERE state != 'recovered'
),
per AS
(
    SELECT att.job AS job, att.attempt AS attempt, att.start_ts AS start_ts, att.end_ts AS end_ts,
           att.sched_ms AS sched_ms, inc.interrupted AS interrupted,
           if(inc.interrupted = 1,
              least(att.sched_ms, greatest(dateDiff('millisecond',
                  if(isNull(inc.last_checkpoint_ts), att.start_ts, greatest(assumeNotNull(inc.last_checkpoint_ts), att.start_ts)),
                  att.end_ts), 0)),
              0) AS lost_ms
    FROM att LEFT JOIN inc ON inc.job = att.job AND inc.attempt = att.attempt
)
SELECT job,
       count() AS attempts,
       sum(interrupted) AS interruptions,
       round(sum(sched_ms) / 3600000, 4) AS scheduled_h,
       round(sum(lost_ms) / 3600000, 4) AS unproductive_h,
       round((sum(sched_ms) - sum(lost_ms)) / 3600000, 4) AS productive_h,
       round(if(sum(sched_ms) > 0, (sum(sched_ms) - sum(lost_ms)) / sum(sched_ms), NULL), 4) AS ettr,
       round(dateDiff('millisecond', min(start_ts), max(end_ts)) / 3600000, 4) AS wall_h,
       round(if(dateDiff('millisecond', min(start_ts), max(end_ts)) > 0,
                (sum(sched_ms) - sum(lost_ms)) / dateDiff('millisecond', min(start_ts), max(end_ts)), NULL), 4) AS ettr_wall
FROM per
GROUP BY job
ORDER BY ettr, job
