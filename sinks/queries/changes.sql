-- name: changes
-- answers: Did a change make things worse? For each change (component, from -> to, over all
--   nodes it rolled to): job attempts that started on a changed node within window_h hours
--   before the change and after it, how many of them were interrupted, and the two rates.
-- param: window_h UInt32 = 72        hours compared on each side of each node's change
-- param: exclude Array(String) = ["scheduler"]   root-cause categories that are not interruptions here
WITH
ch AS
(
    SELECT c.id AS id, any(c.ts) AS ts, any(c.node) AS node, any(c.component) AS component,
           any(c.from_version) AS from_version, any(c.to_version) AS to_version
    FROM changes AS c GROUP BY c.id
),
att AS (SELECT job, attempt, start_ts, n AS node FROM attempts ARRAY JOIN nodes AS n),
inc AS
(
    SELECT job, attempt, toUInt8(1) AS hit FROM incidents FINAL
    WHERE category NOT IN {exclude:Array(String)} AND state != 'recovered'
),
pairs AS
(
    SELECT ch.component AS component, ch.from_version AS from_version, ch.to_version AS to_version,
           ch.node AS node, ch.ts AS cts, att.job AS job, att.attempt AS attempt,
           att.start_ts < ch.ts AS before
    FROM ch INNER JOIN att ON att.node = ch.node
    WHERE att.start_ts >= ch.ts - toIntervalHour({window_h:UInt32})
      AND att.start_ts < ch.ts + toIntervalHour({window_h:UInt32})
),
agg AS
(
    SELECT p.component AS component, p.from_version AS from_version, p.to_version AS to_version,
           uniqExactIf((p.job, p.attempt), p.before) AS attempts_before,
           uniqExactIf((p.job, p.attempt), p.before AND inc.hit = 1) AS interrupted_before,
           uniqExactIf((p.job, p.attempt), NOT p.before) AS attempts_after,
           uniqExactIf((p.job, p.attempt), NOT p.before AND inc.hit = 1) AS interrupted_after
    FROM pairs AS p LEFT JOIN inc ON inc.job = p.job AND inc.attempt = p.attempt
    GROUP BY component, from_version, to_version
),
grp AS
(
    SELECT component, from_version, to_version, uniqExact(node) AS nodes, min(ts) AS first_change, max(ts) AS last_change
    FROM ch GROUP BY component, from_version, to_version
)
SELECT grp.component AS component, grp.from_version AS from_version, grp.to_version AS to_version,
       grp.nodes AS nodes, grp.first_change AS first_change, grp.last_change AS last_change,
       agg.attempts_before AS attempts_before, agg.interrupted_before AS interrupted_before,
       round(if(agg.attempts_before > 0, agg.interrupted_before / agg.attempts_before, NULL), 4) AS rate_before,
       agg.attempts_after AS attempts_after, agg.interrupted_after AS interrupted_after,
       round(if(agg.attempts_after > 0, agg.interrupted_after / agg.attempts_after, NULL), 4) AS rate_after,
       round(if(agg.attempts_before > 0 AND agg.interrupted_before > 0 AND agg.attempts_after > 0,
                (agg.interrupted_after / agg.attempts_after) / (agg.interrupted_before / agg.attempts_before), NULL), 2) AS ratio
FROM grp LEFT JOIN agg ON agg.component = grp.component AND agg.from_version = grp.from_version AND agg.to_version = grp.to_version
ORDER BY ifNull(rate_after, 0) - ifNull(rate_before, 0) DESC, first_change
