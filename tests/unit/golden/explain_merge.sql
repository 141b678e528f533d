-- part 1
-- 1. source: read the source once. Cached with this merge's id in its plan, or written once to `db`.`__sm_src_20261130000000_explain` when Spark will not serve the cache (as for rand()); its count is numSourceRows; for the ON equalities (t.id = s.id) its values' range (a partition column's list), to which every target scan below is narrowed

-- part 2
CACHE LAZY TABLE `__sm_source_20261130000000_explain` OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
SELECT *, monotonically_increasing_id() AS __sm_srow, '20261130000000_explain' AS __sm_merge FROM src AS __sm_src

-- part 3
EXPLAIN SELECT * FROM `__sm_source_20261130000000_explain`

-- part 4
SELECT count(*) AS numSourceRows, coalesce(CAST(shiftright(max(__sm_srow), 33) AS INT) + 1, 0) AS sourceSlices,
  to_json(named_struct('type', typeof(min(`id`)), 'lo', CAST(min(`id`) AS STRING), 'hi', CAST(max(`id`) AS STRING))) AS __sm_key0
FROM `__sm_source_20261130000000_explain`

-- part 5
-- 2. matched: the partitions holding matched rows come from the summary (its join reads the ON, condition and partition columns). Step 3 scans only these partitions. Skipped when step 1 listed every partition column; no join, only the range, for a dense integer key

-- part 6
-- 3. changes: join target and source, read by the summary and joined again by the write. The first matching WHEN clause of each joined row, its new values and their checks

-- part 7
-- 4. summary: in one aggregation the duplicate check (trino rule), the counts and the partitions the changes touch. No target row may receive two modifying actions under any rule (duplicate_rule=trino). A run on a classic session whose last WHEN MATCHED clause has no condition, with a small source, writes in one pass instead: a join of the ON columns names the files holding a match, and the write counts its own changes (docs/architecture.md)

-- part 8
SELECT op, bys, to_json(array(CAST(__sm_old0 AS STRING))) AS __sm_old, to_json(array(CAST(__sm_new0 AS STRING))) AS __sm_new,
       CAST(sum(__sm_targets) AS BIGINT) AS n, CAST(sum(__sm_dup) AS BIGINT) AS dups, CAST(sum(__sm_multi) AS BIGINT) AS multi,
       CAST(sum(__sm_checked) AS BIGINT) AS checked, to_json(collect_set(__sm_rf)) AS files, to_json(collect_set(__sm_mf)) AS matched_files
FROM (
  SELECT CASE WHEN __sm_matched AND (count_if(__sm_op IN (2, 3)) > 1 OR count(*) > bit_count(bit_or(shiftleft(1L, __sm_case + 1)))) THEN 1 ELSE 0 END AS __sm_dup,
         CASE WHEN coalesce(max(CASE WHEN __sm_op <> -1 THEN __sm_op END), -1) IN (2, 3) THEN __sm_file END AS __sm_rf,
         CASE WHEN __sm_matched AND min(__sm_srow) < max(__sm_srow) AND count_if(__sm_op <> 2) > 0 THEN 1 ELSE 0 END AS __sm_multi,
         count(__sm_c0) AS __sm_checked,
         1 AS __sm_targets,
         CASE WHEN __sm_matched THEN __sm_file END AS __sm_mf,
         coalesce(max(CASE WHEN __sm_op <> -1 THEN __sm_op END), -1) AS op,
         CAST(__sm_file IS NOT NULL AND NOT __sm_matched AS INT) AS bys, __sm_old0, CASE WHEN __sm_matched THEN __sm_old0 ELSE __sm_un0 END AS __sm_new0
  FROM (
    SELECT *, CASE WHEN NOT __sm_matched THEN __sm_srow END AS __sm_us, CASE WHEN NOT __sm_matched THEN __sm_c2 END AS __sm_un0
    FROM (SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_key0, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a MERGE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  __sm_x1 AS __sm_c1,
  __sm_x2 AS __sm_c2
FROM (
SELECT
  '20261130000000_explain' AS __sm_merge,
  `t`.__sm_file AS __sm_file,
  `t`.__sm_row AS __sm_row,
  `t`.__sm_file IS NOT NULL AS __sm_matched,
  `s`.__sm_srow AS __sm_srow,
  `t`.`id` AS __sm_key0,
  `t`.`dt` AS __sm_old0,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN 0 WHEN `t`.__sm_file IS NULL THEN 1 ELSE -1 END AS __sm_case,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN 3 WHEN `t`.__sm_file IS NULL THEN 1 ELSE -1 END AS __sm_op,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN `t`.`id` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`id`) AS int) END AS __sm_x0,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN CAST((s.v) AS string) WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`v`) AS string) END AS __sm_x1,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN `t`.`dt` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`dt`) AS date) END AS __sm_x2
FROM (SELECT /*+ BROADCAST(`s`) */ `t`.* FROM (SELECT *, _metadata.file_path AS __sm_file, _metadata.row_index AS __sm_row FROM `db`.`acc` WHERE (((`id` BETWEEN CAST('<min of s.id>' AS int) AND CAST('<max of s.id>' AS int))))) AS `t`
 LEFT SEMI JOIN `__sm_source_20261130000000_explain` AS `s` ON (t.id = s.id)) AS `t`
RIGHT JOIN `__sm_source_20261130000000_explain` AS `s`
  ON ((t.id = s.id))
) AS __sm_j0)
    WHERE __sm_matched OR __sm_op <> -1
  )
  GROUP BY __sm_file, __sm_row, __sm_us, __sm_matched, __sm_old0, __sm_un0
)
GROUP BY op, bys, to_json(array(CAST(__sm_old0 AS STRING))), to_json(array(CAST(__sm_new0 AS STRING)))

