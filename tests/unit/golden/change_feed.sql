-- changes
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_t0, __sm_t1, __sm_t2, __sm_key0, __sm_old0, __sm_case, __sm_op,
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
  `t`.`id` AS __sm_t0,
  `t`.`v` AS __sm_t1,
  `t`.`dt` AS __sm_t2,
  `t`.`id` AS __sm_key0,
  `t`.`dt` AS __sm_old0,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN 0 WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL THEN 1 WHEN `t`.__sm_file IS NULL THEN 2 WHEN `s`.__sm_srow IS NULL THEN 3 ELSE -1 END AS __sm_case,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN 2 WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL THEN 3 WHEN `t`.__sm_file IS NULL THEN 1 WHEN `s`.__sm_srow IS NULL THEN 2 ELSE -1 END AS __sm_op,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN NULL WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL THEN `t`.`id` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`id`) AS int) WHEN `s`.__sm_srow IS NULL THEN NULL END AS __sm_x0,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN NULL WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL THEN CAST((s.v) AS string) WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`v`) AS string) WHEN `s`.__sm_srow IS NULL THEN NULL END AS __sm_x1,
  CASE WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL AND (s.v IS NULL) THEN NULL WHEN `t`.__sm_file IS NOT NULL AND `s`.__sm_srow IS NOT NULL THEN `t`.`dt` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`dt`) AS date) WHEN `s`.__sm_srow IS NULL THEN NULL END AS __sm_x2
FROM (SELECT *, _metadata.file_path AS __sm_file, _metadata.row_index AS __sm_row FROM `db`.`acc` AS `t`) AS `t`
FULL JOIN `__sm_source_20261129000000_golden` AS `s`
  ON ((t.id = s.id))
) AS __sm_j0

