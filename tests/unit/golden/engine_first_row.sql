-- source
WITH __sm_in AS (
  SELECT CAST(__sm_src.`id` AS int) AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 1, 'i', __sm_src.__sm_i),
    '__sm_o', 1, '__sm_kind', '+I', '__sm_d', coalesce('+I' IN ('-U', '-D'), false),
    '__sm_c0', CAST(__sm_src.`id` AS int),
    '__sm_c1', CAST(__sm_src.`v` AS string),
    '__sm_c2', CAST(__sm_src.`dt` AS date)) AS __sm_r
  FROM (SELECT *, to_json(struct(__sm_u.*)) AS __sm_i FROM src AS __sm_u) AS __sm_src
), __sm_old AS (
  SELECT __sm_t.`id` AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 0, 'i', ''),
    '__sm_o', 0, '__sm_kind', '+I', '__sm_d', false,
    '__sm_c0', __sm_t.`id`,
    '__sm_c1', __sm_t.`v`,
    '__sm_c2', __sm_t.`dt`) AS __sm_r
  FROM `db`.`acc` AS __sm_t
  LEFT SEMI JOIN (SELECT DISTINCT __sm_p0 FROM __sm_in) AS __sm_k
    ON __sm_t.`id` <=> __sm_k.__sm_p0
), __sm_keys AS (
  SELECT __sm_p0, array_sort(collect_list(__sm_r), (__sm_x, __sm_y) ->
    CASE WHEN __sm_x.__sm_s < __sm_y.__sm_s THEN -1 WHEN __sm_x.__sm_s > __sm_y.__sm_s THEN 1 ELSE 0 END) AS __sm_rs
  FROM (SELECT * FROM __sm_in UNION ALL SELECT * FROM __sm_old) AS __sm_all
  GROUP BY __sm_p0
)
SELECT __sm_v.__sm_c0 AS `id`, __sm_v.__sm_c1 AS `v`, __sm_v.__sm_c2 AS `dt`, NOT __sm_v.__sm_n AS __sm_del
FROM (SELECT __sm_p0, named_struct('__sm_c0', element_at(__sm_rs, 1).__sm_c0, '__sm_c1', element_at(__sm_rs, 1).__sm_c1, '__sm_c2', element_at(__sm_rs, 1).__sm_c2, '__sm_n', NOT element_at(__sm_rs, 1).__sm_d, '__sm_t', exists(__sm_rs, __sm_z -> __sm_z.__sm_o = 0)) AS __sm_v,
  size(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1)) > 1 AND (size(array_distinct(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_d))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c1), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c2), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1) AS __sm_bad0
  FROM __sm_keys) AS __sm_f
WHERE CASE
  WHEN __sm_bad0 THEN raise_error(concat('MERGE_ENGINE_REJECTED: a key repeats in this batch with records that differ, and no sequence_field orders them: the source is a query, whose row order Spark does not keep from one run to the next, so which record wins would depend on the run; give a sequence_field that tells them apart, or read the batch from a parquet table (its files and row positions) or a VALUES list (key ', to_json(named_struct('id', __sm_p0)), ')'))
  ELSE (__sm_v.__sm_n OR __sm_v.__sm_t) END

-- on
`t`.`id` <=> `s`.`id`

-- clauses
update when NOT (`t`.`v` <=> `s`.`v` AND `t`.`dt` <=> `s`.`dt`)
insert when NOT `s`.__sm_del

