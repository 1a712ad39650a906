-- name: lost-compute
-- answers: How many GPU-hours did interruptions cost, by root-cause category, per day or
--   per week? lost_gpu_hours is the incidents' own figure (GPUs x time since the last
--   succeeded checkpoint or the attempt's start), latest revision of each incident; an
--   incident the worker withdrew (latest revision state 'recovered') counts nowhere.
-- param: bucket String = "day"       day | week (weeks start on Monday)
-- param: since_ms Int64 = 0          window start, epoch ms (0 = from the beginning)
-- param: until_ms Int64 = 0          window end, epoch ms (0 = open)
SELECT if({bucket:String} = 'week', toMonday(failure_ts), toDate(failure_ts)) AS period,
       i.category AS category,
       count() AS incidents,
       round(sum(i.lost_gpu_hours), 6) AS gpu_hours_lost,
       round(sum(i.lost_gpu_hours) / count(), 6) AS per_incident
FROM incidents AS i FINAL
WHERE i.state != 'recovered'
  AND failure_ts >= fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
  AND ({until_ms:Int64} = 0 OR failure_ts < fromUnixTimestamp64Milli({until_ms:Int64}, 'UTC'))
GROUP BY period, i.category
ORDER BY period, gpu_hours_lost DESC, category
