-- changes
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a DELETE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  __sm_x1 AS __sm_c1,
  __sm_x2 AS __sm_c2
FROM (
SELECT
  '20261129000000_golden' AS __sm_merge,
  `acc`.__sm_file AS __sm_file,
  `acc`.__sm_row AS __sm_row,
  `acc`.__sm_file IS NOT NULL AS __sm_matched,
  CAST(NULL AS BIGINT) AS __sm_srow,
  `acc`.`dt` AS __sm_old0,
  CASE WHEN `acc`.__sm_file IS NOT NULL THEN 0 ELSE -1 END AS __sm_case,
  CASE WHEN `acc`.__sm_file IS NOT NULL THEN 2 ELSE -1 END AS __sm_op,
  CAST(NULL AS int) AS __sm_x0,
  CAST(NULL AS string) AS __sm_x1,
  CAST(NULL AS date) AS __sm_x2
FROM (SELECT *, _metadata.file_path AS __sm_file, _metadata.row_index AS __sm_row FROM `db`.`acc`) AS `acc`
WHERE (dt = CAST('2026-01-02' AS DATE))
) AS __sm_j0

-- change_summary
SELECT op, bys, to_json(array(CAST(__sm_old0 AS STRING))) AS __sm_old, to_json(array(CAST(__sm_new0 AS STRING))) AS __sm_new,
       CAST(sum(__sm_targets) AS BIGINT) AS n, CAST(sum(__sm_dup) AS BIGINT) AS dups, CAST(sum(__sm_multi) AS BIGINT) AS multi,
       CAST(sum(__sm_checked) AS BIGINT) AS checked, to_json(collect_set(__sm_rf)) AS files
FROM (
  SELECT 0 AS __sm_dup,
         CASE WHEN coalesce(max(CASE WHEN __sm_op <> -1 THEN __sm_op END), -1) IN (2, 3) THEN __sm_file END AS __sm_rf,
         CASE WHEN __sm_matched AND min(__sm_srow) < max(__sm_srow) AND count_if(__sm_op <> 2) > 0 THEN 1 ELSE 0 END AS __sm_multi,
         count(__sm_c0) AS __sm_checked,
         1 AS __sm_targets,
         coalesce(max(CASE WHEN __sm_op <> -1 THEN __sm_op END), -1) AS op,
         CAST(__sm_file IS NOT NULL AND NOT __sm_matched AS INT) AS bys, __sm_old0, CASE WHEN __sm_matched THEN __sm_old0 ELSE __sm_un0 END AS __sm_new0
  FROM (
    SELECT *, CASE WHEN NOT __sm_matched THEN __sm_srow END AS __sm_us, CASE WHEN NOT __sm_matched THEN __sm_c2 END AS __sm_un0
    FROM `__sm_changes_20261129000000_golden`
    WHERE __sm_matched OR __sm_op <> -1
  )
  GROUP BY __sm_file, __sm_row, __sm_us, __sm_matched, __sm_old0, __sm_un0
)
GROUP BY op, bys, to_json(array(CAST(__sm_old0 AS STRING))), to_json(array(CAST(__sm_new0 AS STRING)))

-- fused_stage
CREATE TABLE `db`.`__sm_stage_20261129000000_golden`
USING parquet
PARTITIONED BY (`dt`)
LOCATION 'file:/w/acc/_merge_20261129000000_golden'
AS SELECT * FROM (
  SELECT /*+ REBALANCE(`dt`) */ CASE WHEN __sm_op IN (1, 3) THEN __sm_c0 ELSE __sm_t0 END AS `id`, CASE WHEN __sm_op IN (1, 3) THEN __sm_c1 ELSE __sm_t1 END AS `v`, CASE WHEN __sm_op IN (1, 3) THEN __sm_c2 ELSE __sm_t2 END AS `dt`
  FROM (
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_touched, __sm_t0, __sm_t1, __sm_t2, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a DELETE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  __sm_x1 AS __sm_c1,
  __sm_x2 AS __sm_c2
FROM (
SELECT
  '20261129000000_golden' AS __sm_merge,
  `acc`.__sm_file AS __sm_file,
  `acc`.__sm_row AS __sm_row,
  coalesce(`acc`.__sm_j AND (dt = CAST('2026-01-02' AS DATE)), false) AS __sm_matched,
  CAST(NULL AS BIGINT) AS __sm_srow,
  `acc`.__sm_touched AS __sm_touched,
  `acc`.`id` AS __sm_t0,
  `acc`.`v` AS __sm_t1,
  `acc`.`dt` AS __sm_t2,
  `acc`.`dt` AS __sm_old0,
  CASE WHEN coalesce(`acc`.__sm_j AND (dt = CAST('2026-01-02' AS DATE)), false) THEN 0 ELSE -1 END AS __sm_case,
  CASE WHEN coalesce(`acc`.__sm_j AND (dt = CAST('2026-01-02' AS DATE)), false) THEN 2 ELSE -1 END AS __sm_op,
  CAST(NULL AS int) AS __sm_x0,
  CAST(NULL AS string) AS __sm_x1,
  CAST(NULL AS date) AS __sm_x2
FROM (SELECT *, '' AS __sm_file, 0L AS __sm_row, true AS __sm_j, coalesce((`dt` = CAST('2026-01-02' AS date)), false) AS __sm_touched
 FROM `db`.`acc` AS `acc` WHERE (`dt` = CAST('2026-01-02' AS date))) AS `acc`
) AS __sm_j0
  ) AS __sm_j
  WHERE __sm_op IN (1, 3) OR (__sm_op = -1 AND __sm_touched)
) AS __sm_new

