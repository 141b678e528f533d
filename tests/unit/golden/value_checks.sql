-- changes
SELECT __sm_merge, __sm_file, __sm_row, __sm_matched, __sm_srow, __sm_key0, __sm_old0, __sm_case, __sm_op,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x0 IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a MERGE would write NULL into NOT NULL column id of db.acc') ELSE __sm_x0 END AS __sm_c0,
  CASE WHEN __sm_x1 IS NULL OR char_length(__sm_x1) <= 3 THEN __sm_x1 WHEN char_length(rtrim(__sm_x1)) <= 3 THEN substr(__sm_x1, 1, 3) ELSE raise_error('MERGE_EXCEED_LIMIT_LENGTH: a MERGE would write a string longer than 3 characters into column code VARCHAR(3) of db.acc (Spark: EXCEED_LIMIT_LENGTH)') END AS __sm_c1,
  CASE WHEN __sm_op IN (1, 3) AND __sm_x2 IS NOT NULL AND __sm_x2.`a` IS NULL THEN raise_error('MERGE_NOT_NULL_VIOLATION: a MERGE would write NULL into NOT NULL field s.a of db.acc') ELSE __sm_x2 END AS __sm_c2,
  __sm_x3 AS __sm_c3
FROM (
SELECT
  '20261129000000_golden' AS __sm_merge,
  `t`.__sm_file AS __sm_file,
  `t`.__sm_row AS __sm_row,
  `t`.__sm_file IS NOT NULL AS __sm_matched,
  `s`.__sm_srow AS __sm_srow,
  `t`.`id` AS __sm_key0,
  `t`.`dt` AS __sm_old0,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN 0 WHEN `t`.__sm_file IS NULL THEN 1 ELSE -1 END AS __sm_case,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN 3 WHEN `t`.__sm_file IS NULL THEN 1 ELSE -1 END AS __sm_op,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN `t`.`id` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`id`) AS int) END AS __sm_x0,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN CAST((s.code) AS string) WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`code`) AS string) END AS __sm_x1,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN CAST((s.s) AS struct<a:int,b:string>) WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`s`) AS struct<a:int,b:string>) END AS __sm_x2,
  CASE WHEN `t`.__sm_file IS NOT NULL THEN `t`.`dt` WHEN `t`.__sm_file IS NULL THEN CAST((`s`.`dt`) AS date) END AS __sm_x3
FROM (SELECT *, _metadata.file_path AS __sm_file, _metadata.row_index AS __sm_row FROM `db`.`acc`) AS `t`
RIGHT JOIN `__sm_source_20261129000000_golden` AS `s`
  ON ((t.id = s.id))
) AS __sm_j0

