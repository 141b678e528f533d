-- source
WITH __sm_in AS (
  SELECT CAST(__sm_src.`id` AS int) AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 1, 'i', __sm_src.__sm_i),
    '__sm_o', 1, '__sm_kind', '+I', '__sm_d', coalesce('+I' IN ('-U', '-D'), false),
    '__sm_c0', CAST(__sm_src.`id` AS int),
    '__sm_c1', CAST(__sm_src.`v` AS string),
    '__sm_c2', CAST(__sm_src.`dt` AS date)) AS __sm_r
  FROM (SELECT *, monotonically_increasing_id() AS __sm_i FROM src AS __sm_u) AS __sm_src
), __sm_old AS (
  SELECT __sm_t.`id` AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 0, 'i', CAST(0 AS BIGINT)),
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
FROM (SELECT __sm_p0, aggregate(__sm_rs,
  named_struct('__sm_c0', CAST(NULL AS int), '__sm_c1', CAST(NULL AS string), '__sm_c2', CAST(NULL AS date), '__sm_n', false, '__sm_t', false),
  (__sm_a, __sm_r) -> named_struct(
    '__sm_c0', CAST(__sm_r.__sm_c0 AS int),
    '__sm_c1', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c1 ELSE greatest(__sm_a.__sm_c1, __sm_r.__sm_c1) END AS string),
    '__sm_c2', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_r.__sm_c2 IS NULL THEN __sm_a.__sm_c2 END ELSE coalesce(__sm_r.__sm_c2, __sm_a.__sm_c2) END AS date),
    '__sm_n', __sm_a.__sm_n OR true,
    '__sm_t', __sm_a.__sm_t OR __sm_r.__sm_o = 0)) AS __sm_v
  FROM __sm_keys) AS __sm_f
WHERE(__sm_v.__sm_n OR __sm_v.__sm_t)

-- on
`t`.`id` <=> `s`.`id`

-- clauses
update when NOT (`t`.`v` <=> `s`.`v` AND `t`.`dt` <=> `s`.`dt`)
insert when NOT `s`.__sm_del

