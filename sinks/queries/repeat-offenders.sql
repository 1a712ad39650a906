-- name: repeat-offenders
-- answers: Which node, GPU, switch port, network segment, image, driver version or storage
--   path is in more interruptions than the fleet's baseline over a window? One row per
--   (dimension, subject): incidents it was part of, incidents whose root cause names it
--   (blamed), its exposure (job attempts that ran on it or through it), its interruption
--   rate per attempt and the dimension's fleet rate beside it (ratio = rate / fleet_rate),
--   ranked within the dimension by incidents, then blamed.
--   Incident side: affected nodes/GPUs/ports/paths and the root-cause component; segments
--   from the affected ports through the topology (and the affected nodes' segments for
--   network_* causes); driver versions from the affected nodes' inventory. Exposure side:
--   attempts' nodes joined to topology (ports, segments, mounts) and inventory. A GPU's
--   exposure is its node's. Driver = each node's latest reported version.
-- param: since_ms Int64 = 0          window start, epoch ms (0 = from the beginning)
-- param: until_ms Int64 = 0          window end, epoch ms (0 = open)
-- param: exclude Array(String) = ["application", "scheduler"]   root-cause categories that are not infrastructure
-- param: top UInt32 = 10             rows per dimension
WITH
    fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC') AS w_from,
    if({until_ms:Int64} = 0, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'), fromUnixTimestamp64Milli({until_ms:Int64}, 'UTC')) AS w_to,
    -- topology and inventory as maps (scalar subqueries: computed once per query)
    (SELECT CAST((groupArray(node), groupArray(v)), 'Map(String, Array(String))')
       FROM (SELECT node, groupUniqArray(swport) AS v FROM
               (SELECT node, concat(argMax(switch, ts), '/', argMax(port, ts)) AS swport FROM topology_links GROUP BY node, nic)
             GROUP BY node)) AS node_ports,
    (SELECT CAST((groupArray(node), groupArray(v)), 'Map(String, Array(String))')
       FROM (SELECT node, groupUniqArray(seg) AS v FROM
               (SELECT node, argMax(segment, ts) AS seg FROM topology_links GROUP BY node, nic HAVING seg != '')
             GROUP BY node)) AS node_segs,
    (SELECT CAST((groupArray(p), groupArray(s)), 'Map(String, String)')
       FROM (SELECT concat(argMax(switch, ts), '/', argMax(port, ts)) AS p, argMax(segment, ts) AS s
             FROM topology_links GROUP BY node, nic)) AS port_seg,
    (SELECT CAST((groupArray(node), groupArray(v)), 'Map(String, Array(String))')
       FROM (SELECT node, groupUniqArray(path) AS v FROM topology_storage GROUP BY node)) AS node_paths,
    (SELECT CAST((groupArray(node), groupArray(d)), 'Map(String, String)')
       FROM (SELECT node, argMax(version, ts) AS d FROM inventory_versions WHERE component = 'driver' GROUP BY node)) AS node_drv,
inc AS
(
    SELECT id, category, image, affected_nodes, affected_gpus, affected_ports, affected_paths,
           multiIf(startsWith(component, 'gpu:'), 'gpu', startsWith(component, 'node:'), 'node',
                   startsWith(component, 'port:'), 'port', startsWith(component, 'segment:'), 'segment',
                   startsWith(component, 'path:'), 'path', startsWith(component, 'version:driver='), 'driver',
                   startsWith(component, 'version:image='), 'image', '') AS cdim,
           replaceRegexpOne(component, '^(version:[a-z_]+=|[a-z]+:)', '') AS csubj
    FROM incidents FINAL
    WHERE state != 'recovered' AND failure_ts >= w_from AND failure_ts < w_to AND category NOT IN {exclude:Array(String)}
),
hits AS
(
    SELECT pair.1 AS dimension, pair.2 AS subject,
           uniqExact(id) AS incidents,
           uniqExactIf(id, pair = (cdim, csubj) OR (cdim = 'gpu' AND pair = ('node', splitByChar('/', csubj)[1]))) AS blamed
    FROM
    (
        SELECT id, cdim, csubj,
               arrayJoin(arrayDistinct(arrayConcat(
                   arrayMap(x -> ('node', x), affected_nodes),
                   arrayMap(x -> ('gpu', x), affected_gpus),
                   arrayMap(x -> ('port', x), affected_ports),
                   arrayMap(x -> ('segment', port_seg[x]), arrayFilter(x -> port_seg[x] != '', affected_ports)),
                   if(startsWith(category, 'network_'),
                      arrayMap(x -> ('segment', x), arrayFlatten(arrayMap(n -> node_segs[n], affected_nodes))), []),
                   arrayMap(x -> ('path', x), affected_paths),
                   arrayMap(x -> ('driver', x), arrayFilter(x -> x != '', arrayMap(n -> node_drv[n], affected_nodes))),
                   if(image != '', [('image', image)], []),
                   if(cdim != '', [(cdim, csubj)], []),
                   if(cdim = 'gpu', [('node', splitByChar('/', csubj)[1])], [])
               ))) AS pair
        FROM inc
    )
    GROUP BY dimension, subject
),
exposure AS
(
    SELECT pair.1 AS dimension, pair.2 AS subject, uniqExact(aid) AS attempts
    FROM
    (
        SELECT concat(job, '#', toString(attempt)) AS aid,
               arrayJoin(arrayDistinct(arrayConcat(
                   arrayMap(x -> ('node', x), nodes),
                   arrayMap(x -> ('port', x), arrayFlatten(arrayMap(n -> node_ports[n], nodes))),
                   arrayMap(x -> ('segment', x), arrayFlatten(arrayMap(n -> node_segs[n], nodes))),
                   arrayMap(x -> ('path', x), arrayFlatten(arrayMap(n -> node_paths[n], nodes))),
                   arrayMap(x -> ('driver', x), arrayFilter(x -> x != '', arrayMap(n -> node_drv[n], nodes))),
                   if(image != '', [('image', image)], [])
               ))) AS pair
        FROM attempts
        WHERE end_ts >= w_from AND start_ts < w_to
    )
    GROUP BY dimension, subject
),
-- hits and exposure are each read once (a CTE referenced twice runs twice): one union, then
-- window functions give the per-dimension fleet totals and a GPU its node's exposure
per AS
(
    SELECT dimension, subject,
           sum(n_inc) AS incidents, sum(n_blamed) AS blamed, sum(n_att) AS attempts,
           if(dimension IN ('node', 'gpu'), splitByChar('/', subject)[1], '') AS key_node
    FROM
    (
        SELECT dimension, subject, incidents AS n_inc, blamed AS n_blamed, toUInt64(0) AS n_att FROM hits
        UNION ALL
        SELECT dimension, subject, toUInt64(0), toUInt64(0), attempts FROM exposure
    )
    GROUP BY dimension, subject
),
scored AS
(
    SELECT dimension, subject, incidents, blamed,
           if(dimension = 'gpu', maxIf(attempts, dimension = 'node') OVER (PARTITION BY key_node), attempts) AS att,
           sum(incidents) OVER (PARTITION BY dimension) AS dim_incidents,
           if(dimension = 'gpu', sumIf(attempts, dimension = 'node') OVER (),
              sum(attempts) OVER (PARTITION BY dimension)) AS dim_attempts
    FROM per
)
SELECT dimension,
       row_number() OVER (PARTITION BY dimension ORDER BY incidents DESC, blamed DESC, subject) AS rank,
       subject,
       incidents,
       blamed,
       att AS attempts,
       round(if(att > 0, incidents / att, NULL), 4) AS rate,
       round(dim_incidents / greatest(dim_attempts, 1), 4) AS fleet_rate,
       round(if(att > 0 AND dim_incidents > 0, (incidents / att) / (dim_incidents / greatest(dim_attempts, 1)), NULL), 2) AS ratio
FROM scored
WHERE incidents > 0
ORDER BY dimension, rank
LIMIT {top:UInt32} BY dimension
