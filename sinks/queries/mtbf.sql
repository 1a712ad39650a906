-- name: mtbf
-- answers: Mean time between failures per node and per network segment: hours of job
--   attempts that ran on it (per segment: attempt hours with any node on the segment)
--   divided by the infrastructure interruptions that affected it. mtbf_h is NULL when it
--   had no failure in the window (it ran `hours` without one).
-- param: since_ms Int64 = 0          window start, epoch ms (0 = from the beginning)
-- param: until_ms Int64 = 0          window end, epoch ms (0 = open)
-- param: exclude Array(String) = ["application", "scheduler"]   root-cause categories that are not failures of the infrastructure
WITH
    fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC') AS w_from,
    if({until_ms:Int64} = 0, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'), fromUnixTimestamp64Milli({until_ms:Int64}, 'UTC')) AS w_to,
att AS
(
    SELECT concat(job, '#', toString(attempt)) AS aid, nodes,
           greatest(dateDiff('millisecond', greatest(start_ts, w_from), least(end_ts, w_to)), 0) / 3600000 AS hours
    FROM attempts
    WHERE end_ts >= w_from AND start_ts < w_to
),
inc AS
(
    SELECT id, affected_nodes FROM incidents FINAL
    WHERE state != 'recovered' AND failure_ts >= w_from AND failure_ts < w_to AND category NOT IN {exclude:Array(String)}
),
seg AS (SELECT DISTINCT node, argMax(segment, ts) AS segment FROM topology_links GROUP BY node, nic HAVING segment != ''),
up AS
(
    SELECT 'node' AS scope, n AS subject, sum(hours) AS hours FROM att ARRAY JOIN nodes AS n GROUP BY subject
    UNION ALL
    SELECT 'segment', segment, sum(hours) FROM
        (SELECT DISTINCT a.aid AS aid, s.segment AS segment, a.hours AS hours
         FROM (SELECT aid, hours, n FROM att ARRAY JOIN nodes AS n) AS a INNER JOIN seg AS s ON s.node = a.n)
    GROUP BY segment
),
down AS
(
    SELECT 'node' AS scope, n AS subject, uniqExact(id) AS failures FROM inc ARRAY JOIN affected_nodes AS n GROUP BY subject
    UNION ALL
    SELECT 'segment', s.segment, uniqExact(i.id)
    FROM (SELECT id, n FROM inc ARRAY JOIN affected_nodes AS n) AS i INNER JOIN seg AS s ON s.node = i.n
    GROUP BY s.segment
)
SELECT up.scope AS scope, up.subject AS subject,
       round(up.hours, 3) AS hours,
       down.failures AS failures,
       round(if(down.failures > 0, up.hours / down.failures, NULL), 3) AS mtbf_h
FROM up LEFT JOIN down ON down.scope = up.scope AND down.subject = up.subject
ORDER BY scope, isNull(mtbf_h), mtbf_h, subject
