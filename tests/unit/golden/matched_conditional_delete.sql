-- changes
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_key0, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a MERGE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  __sm_x1 AS __sm_c1,
  __sm_x2 AS __sm_c2
FROM (
SELECT
  '20261129000000_golden' AS __sm_merge,
  `t`.__sm_file AS __sm_file,
  `t`.__sm_row AS __sm_row,
  `t`.__sm_file IS NOT NULL AS __sm_matched,
  `s`.__sm_srow AS __sm_srow,
  `t`.`id` AS __sm_key0,
  `t`.`dt` AS __sm_old0,
  CASE WHEN `t`.__sm_file IS NOT NULL AND (s.v IS NULL) THEN 0 ELSE -1 END AS __sm_case,
  CASE WHEN `t`.__sm_file IS NOT NULL AND (s.v IS NULL) THEN 2 ELSE -1 END AS __sm_op,
  CAST(NULL AS int) AS __sm_x0,
  CAST(NULL AS string) AS __sm_x1,
  CAST(NULL AS date) AS __sm_x2
FROM (SELECT *, _metadata.file_path AS __sm_file, _metadata.row_index AS __sm_row FROM `db`.`acc`) AS `t`
INNER JOIN `__sm_source_20261129000000_golden` AS `s`
  ON ((t.id = s.id))
) AS __sm_j0

-- cache_source
CACHE LAZY TABLE `__sm_source_20261129000000_golden` OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
SELECT *, monotonically_increasing_id() AS __sm_srow, '20261129000000_golden' AS __sm_merge FROM src AS __sm_src

-- duplicates
WITH __sm_bad AS (
  SELECT __sm_file, __sm_row, first(__sm_key0) AS __sm_key0, sum(__sm_n) AS __sm_sources
  FROM (
    SELECT __sm_file, __sm_row, first(__sm_key0) AS __sm_key0, count(*) AS __sm_n, count_if(__sm_op IN (2, 3)) AS __sm_mods
    FROM `__sm_changes_20261129000000_golden`
    WHERE __sm_matched
    GROUP BY __sm_file, __sm_row, __sm_case
  )
  GROUP BY __sm_file, __sm_row
  HAVING sum(__sm_mods) > 1 OR max(__sm_n) > 1
  LIMIT 5
), __sm_pairs AS (
  SELECT DISTINCT __sm_bad.*, c.__sm_srow, c.__sm_case
  FROM __sm_bad JOIN `__sm_changes_20261129000000_golden` AS c
    ON c.__sm_matched AND c.__sm_file = __sm_bad.__sm_file AND c.__sm_row = __sm_bad.__sm_row
)
SELECT CAST(p.__sm_key0 AS STRING) AS `id`, p.__sm_sources AS source_rows, p.__sm_file, p.__sm_row, p.__sm_case AS __sm_clause, to_json(struct(s.*)) AS __sm_source
FROM (SELECT *, row_number() OVER (PARTITION BY __sm_file, __sm_row ORDER BY __sm_srow) AS __sm_i FROM __sm_pairs) AS p
JOIN `__sm_source_20261129000000_golden` AS s ON s.__sm_srow = p.__sm_srow
WHERE p.__sm_i <= 5
ORDER BY p.__sm_file, p.__sm_row, p.__sm_i

-- change_summary
SELECT op, bys, to_json(array(CAST(__sm_old0 AS STRING))) AS __sm_old, to_json(array(CAST(__sm_new0 AS STRING))) AS __sm_new,
       CAST(sum(__sm_targets) AS BIGINT) AS n, CAST(sum(__sm_dup) AS BIGINT) AS dups, CAST(sum(__sm_multi) AS BIGINT) AS multi,
       CAST(sum(__sm_checked) AS BIGINT) AS checked, to_json(collect_set(__sm_rf)) AS files
FROM (
  SELECT CASE WHEN __sm_matched AND (count_if(__sm_op IN (2, 3)) > 1 OR count(*) > bit_count(bit_or(shiftleft(1L, __sm_case + 1)))) THEN 1 ELSE 0 END AS __sm_dup,
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
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_touched, __sm_t0, __sm_t1, __sm_t2, __sm_key0, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a MERGE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  __sm_x1 AS __sm_c1,
  __sm_x2 AS __sm_c2
FROM (
SELECT
  '20261129000000_golden' AS __sm_merge,
  `t`.__sm_file AS __sm_file,
  `t`.__sm_row AS __sm_row,
  `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AS __sm_matched,
  `s`.__sm_srow AS __sm_srow,
  `t`.__sm_touched AS __sm_touched,
  `t`.`id` AS __sm_t0,
  `t`.`v` AS __sm_t1,
  `t`.`dt` AS __sm_t2,
  `t`.`id` AS __sm_key0,
  `t`.`dt` AS __sm_old0,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN 0 ELSE -1 END AS __sm_case,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN 2 ELSE -1 END AS __sm_op,
  CAST(NULL AS int) AS __sm_x0,
  CAST(NULL AS string) AS __sm_x1,
  CAST(NULL AS date) AS __sm_x2
FROM (SELECT *, '' AS __sm_file, 0L AS __sm_row, true AS __sm_j, coalesce((`dt` = CAST('2026-01-02' AS date)), false) AS __sm_touched
 FROM `db`.`acc` AS `t` WHERE (`dt` = CAST('2026-01-02' AS date))) AS `t`
LEFT JOIN `__sm_source_20261129000000_golden` AS `s`
  ON ((t.id = s.id))
) AS __sm_j0
  ) AS __sm_j
  WHERE __sm_op IN (1, 3) OR (__sm_op = -1 AND __sm_touched)
) AS __sm_new

