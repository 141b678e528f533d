-- source
WITH __sm_in AS (
  SELECT CAST(__sm_src.`id` AS int) AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 1, 'i', __sm_src.__sm_i),
    '__sm_o', 1, '__sm_kind', CAST(__sm_src.`op` AS STRING), '__sm_d', coalesce(CAST(__sm_src.`op` AS STRING) IN ('-U', '-D'), false),
    '__sm_c0', CAST(__sm_src.`id` AS int),
    '__sm_c1', CAST(__sm_src.`s1` AS int),
    '__sm_c2', CAST(__sm_src.`p1` AS double),
    '__sm_c3', CAST(__sm_src.`c1` AS bigint),
    '__sm_c4', CAST(__sm_src.`mx` AS date),
    '__sm_c5', CAST(__sm_src.`mn` AS string),
    '__sm_c6', CAST(__sm_src.`ba` AS boolean),
    '__sm_c7', CAST(__sm_src.`bo` AS boolean),
    '__sm_c8', CAST(__sm_src.`fv` AS string),
    '__sm_c9', CAST(__sm_src.`fn` AS string),
    '__sm_c10', CAST(__sm_src.`lv` AS string),
    '__sm_c11', CAST(__sm_src.`ln` AS string),
    '__sm_c12', CAST(__sm_src.`la` AS string),
    '__sm_c13', CAST(__sm_src.`co` AS array<string>),
    '__sm_c14', CAST(__sm_src.`mm` AS map<string,int>),
    '__sm_c15', CAST(__sm_src.`nu` AS array<struct<k:int,v:string>>),
    '__sm_c16', CAST(__sm_src.`op` AS string)) AS __sm_r
  FROM (SELECT *, to_json(struct(__sm_u.*)) AS __sm_i FROM src AS __sm_u) AS __sm_src
), __sm_old AS (
  SELECT __sm_t.`id` AS __sm_p0, named_struct(
    '__sm_s', named_struct('o', 0, 'i', ''),
    '__sm_o', 0, '__sm_kind', '+I', '__sm_d', false,
    '__sm_c0', __sm_t.`id`,
    '__sm_c1', __sm_t.`s1`,
    '__sm_c2', __sm_t.`p1`,
    '__sm_c3', __sm_t.`c1`,
    '__sm_c4', __sm_t.`mx`,
    '__sm_c5', __sm_t.`mn`,
    '__sm_c6', __sm_t.`ba`,
    '__sm_c7', __sm_t.`bo`,
    '__sm_c8', __sm_t.`fv`,
    '__sm_c9', __sm_t.`fn`,
    '__sm_c10', __sm_t.`lv`,
    '__sm_c11', __sm_t.`ln`,
    '__sm_c12', __sm_t.`la`,
    '__sm_c13', __sm_t.`co`,
    '__sm_c14', __sm_t.`mm`,
    '__sm_c15', __sm_t.`nu`,
    '__sm_c16', __sm_t.`op`) AS __sm_r
  FROM `db`.`acc` AS __sm_t
  LEFT SEMI JOIN (SELECT DISTINCT __sm_p0 FROM __sm_in) AS __sm_k
    ON __sm_t.`id` <=> __sm_k.__sm_p0
), __sm_keys AS (
  SELECT __sm_p0, array_sort(collect_list(__sm_r), (__sm_x, __sm_y) ->
    CASE WHEN __sm_x.__sm_s < __sm_y.__sm_s THEN -1 WHEN __sm_x.__sm_s > __sm_y.__sm_s THEN 1 ELSE 0 END) AS __sm_rs
  FROM (SELECT * FROM __sm_in UNION ALL SELECT * FROM __sm_old) AS __sm_all
  GROUP BY __sm_p0
)
SELECT __sm_v.__sm_c0 AS `id`, __sm_v.__sm_c1 AS `s1`, __sm_v.__sm_c2 AS `p1`, __sm_v.__sm_c3 AS `c1`, __sm_v.__sm_c4 AS `mx`, __sm_v.__sm_c5 AS `mn`, __sm_v.__sm_c6 AS `ba`, __sm_v.__sm_c7 AS `bo`, __sm_v.__sm_c8 AS `fv`, __sm_v.__sm_c9 AS `fn`, __sm_v.__sm_c10 AS `lv`, __sm_v.__sm_c11 AS `ln`, __sm_v.__sm_c12 AS `la`, __sm_v.__sm_c13 AS `co`, __sm_v.__sm_c14 AS `mm`, __sm_v.__sm_c15 AS `nu`, __sm_v.__sm_c16 AS `op`, NOT __sm_v.__sm_n AS __sm_del
FROM (SELECT __sm_p0, aggregate(__sm_rs,
  named_struct('__sm_c0', CAST(NULL AS int), '__sm_c1', CAST(NULL AS int), '__sm_c2', CAST(NULL AS double), '__sm_c3', CAST(NULL AS bigint), '__sm_c4', CAST(NULL AS date), '__sm_c5', CAST(NULL AS string), '__sm_c6', CAST(NULL AS boolean), '__sm_c7', CAST(NULL AS boolean), '__sm_c8', CAST(NULL AS string), '__sm_f8', false, '__sm_c9', CAST(NULL AS string), '__sm_c10', CAST(NULL AS string), '__sm_c11', CAST(NULL AS string), '__sm_c12', CAST(NULL AS string), '__sm_c13', CAST(NULL AS array<string>), '__sm_c14', CAST(NULL AS map<string,int>), '__sm_c15', CAST(NULL AS array<struct<k:int,v:string>>), '__sm_c16', CAST(NULL AS string), '__sm_n', false, '__sm_t', false),
  (__sm_a, __sm_r) -> named_struct(
    '__sm_c0', CAST(__sm_r.__sm_c0 AS int),
    '__sm_c1', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_a.__sm_c1 IS NULL THEN CAST(-__sm_r.__sm_c1 AS int) WHEN __sm_r.__sm_c1 IS NULL THEN __sm_a.__sm_c1 ELSE CAST(__sm_a.__sm_c1 - __sm_r.__sm_c1 AS int) END ELSE CASE WHEN __sm_a.__sm_c1 IS NULL THEN __sm_r.__sm_c1 WHEN __sm_r.__sm_c1 IS NULL THEN __sm_a.__sm_c1 ELSE CAST(__sm_a.__sm_c1 + __sm_r.__sm_c1 AS int) END END AS int),
    '__sm_c2', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_a.__sm_c2 IS NULL THEN NULL WHEN __sm_r.__sm_c2 IS NULL THEN __sm_a.__sm_c2 ELSE CAST(__sm_a.__sm_c2 / __sm_r.__sm_c2 AS double) END ELSE CASE WHEN __sm_a.__sm_c2 IS NULL THEN __sm_r.__sm_c2 WHEN __sm_r.__sm_c2 IS NULL THEN __sm_a.__sm_c2 ELSE CAST(__sm_a.__sm_c2 * __sm_r.__sm_c2 AS double) END END AS double),
    '__sm_c3', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_r.__sm_c3 IS NULL THEN __sm_a.__sm_c3 ELSE coalesce(__sm_a.__sm_c3, 0) - 1 END ELSE coalesce(__sm_a.__sm_c3, 0) + CASE WHEN __sm_r.__sm_o = 0 THEN coalesce(__sm_r.__sm_c3, 0) WHEN __sm_r.__sm_c3 IS NULL THEN 0 ELSE 1 END END AS bigint),
    '__sm_c4', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c4 ELSE greatest(__sm_a.__sm_c4, __sm_r.__sm_c4) END AS date),
    '__sm_c5', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c5 ELSE least(__sm_a.__sm_c5, __sm_r.__sm_c5) END AS string),
    '__sm_c6', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c6 ELSE CASE WHEN __sm_a.__sm_c6 IS NULL THEN __sm_r.__sm_c6 WHEN __sm_r.__sm_c6 IS NULL THEN __sm_a.__sm_c6 ELSE __sm_a.__sm_c6 AND __sm_r.__sm_c6 END END AS boolean),
    '__sm_c7', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c7 ELSE CASE WHEN __sm_a.__sm_c7 IS NULL THEN __sm_r.__sm_c7 WHEN __sm_r.__sm_c7 IS NULL THEN __sm_a.__sm_c7 ELSE __sm_a.__sm_c7 OR __sm_r.__sm_c7 END END AS boolean),
    '__sm_c8', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c8 ELSE CASE WHEN __sm_a.__sm_f8 THEN __sm_a.__sm_c8 ELSE __sm_r.__sm_c8 END END AS string),
    '__sm_f8', __sm_a.__sm_f8 OR (NOT __sm_r.__sm_d),
    '__sm_c9', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c9 ELSE coalesce(__sm_a.__sm_c9, __sm_r.__sm_c9) END AS string),
    '__sm_c10', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_r.__sm_c10 IS NULL THEN __sm_a.__sm_c10 END ELSE coalesce(__sm_r.__sm_c10, __sm_a.__sm_c10) END AS string),
    '__sm_c11', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_r.__sm_c11 IS NULL THEN __sm_a.__sm_c11 END ELSE coalesce(__sm_r.__sm_c11, __sm_a.__sm_c11) END AS string),
    '__sm_c12', CAST(CASE WHEN __sm_r.__sm_d THEN __sm_a.__sm_c12 ELSE CASE WHEN __sm_r.__sm_c12 IS NULL OR trim(__sm_r.__sm_c12) = '' THEN __sm_a.__sm_c12 WHEN __sm_a.__sm_c12 IS NULL OR trim(__sm_a.__sm_c12) = '' THEN array_join(array_distinct(filter(split(__sm_r.__sm_c12, '\\Q|\\E'), __sm_t12 -> trim(__sm_t12) != '')), '|')
    ELSE concat_ws('|', __sm_a.__sm_c12, array_join(filter(array_distinct(split(__sm_r.__sm_c12, '\\Q|\\E')), __sm_t12 -> trim(__sm_t12) != '' AND NOT array_contains(split(__sm_a.__sm_c12, '\\Q|\\E'), __sm_t12)), '|')) END END AS string),
    '__sm_c13', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_a.__sm_c13 IS NULL THEN NULL WHEN __sm_r.__sm_c13 IS NULL THEN __sm_a.__sm_c13 ELSE aggregate(__sm_r.__sm_c13, __sm_a.__sm_c13, (__sm_l13, __sm_x13) -> CASE WHEN array_position(__sm_l13, __sm_x13) > 0 THEN concat(slice(__sm_l13, 1, CAST(array_position(__sm_l13, __sm_x13) AS INT) - 1), slice(__sm_l13, CAST(array_position(__sm_l13, __sm_x13) AS INT) + 1, size(__sm_l13))) ELSE __sm_l13 END) END ELSE CASE WHEN __sm_a.__sm_c13 IS NULL AND __sm_r.__sm_c13 IS NULL THEN NULL ELSE array_distinct(concat(coalesce(__sm_a.__sm_c13, CAST(array() AS array<string>)), coalesce(__sm_r.__sm_c13, CAST(array() AS array<string>)))) END END AS array<string>),
    '__sm_c14', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_a.__sm_c14 IS NULL THEN NULL WHEN __sm_r.__sm_c14 IS NULL THEN __sm_a.__sm_c14 ELSE map_filter(__sm_a.__sm_c14, (__sm_k14, __sm_v14) -> NOT array_contains(map_keys(__sm_r.__sm_c14), __sm_k14)) END ELSE CASE WHEN __sm_a.__sm_c14 IS NULL THEN __sm_r.__sm_c14 WHEN __sm_r.__sm_c14 IS NULL THEN __sm_a.__sm_c14 ELSE map_concat(map_filter(__sm_a.__sm_c14, (__sm_k14, __sm_v14) -> NOT array_contains(map_keys(__sm_r.__sm_c14), __sm_k14)), __sm_r.__sm_c14) END END AS map<string,int>),
    '__sm_c15', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_a.__sm_c15 IS NULL OR __sm_r.__sm_c15 IS NULL THEN __sm_a.__sm_c15 ELSE filter(__sm_a.__sm_c15, __sm_y15 -> NOT exists(__sm_r.__sm_c15, __sm_x15 -> __sm_x15.`k` <=> __sm_y15.`k`)) END ELSE CASE WHEN __sm_r.__sm_c15 IS NULL THEN __sm_a.__sm_c15 ELSE concat(
      filter(coalesce(__sm_a.__sm_c15, CAST(array() AS array<struct<k:int,v:string>>)), __sm_y15 -> __sm_y15 IS NOT NULL AND NOT exists(filter(__sm_r.__sm_c15, __sm_x15 -> __sm_x15 IS NOT NULL), __sm_x15 -> __sm_x15.`k` <=> __sm_y15.`k`)),
      filter(filter(__sm_r.__sm_c15, __sm_x15 -> __sm_x15 IS NOT NULL), (__sm_y15, __sm_j15) -> NOT exists(slice(filter(__sm_r.__sm_c15, __sm_x15 -> __sm_x15 IS NOT NULL), __sm_j15 + 2, size(__sm_r.__sm_c15)), __sm_x15 -> __sm_x15.`k` <=> __sm_y15.`k`))) END END AS array<struct<k:int,v:string>>),
    '__sm_c16', CAST(CASE WHEN __sm_r.__sm_d THEN CASE WHEN __sm_r.__sm_c16 IS NULL THEN __sm_a.__sm_c16 END ELSE coalesce(__sm_r.__sm_c16, __sm_a.__sm_c16) END AS string),
    '__sm_n', __sm_a.__sm_n OR true,
    '__sm_t', __sm_a.__sm_t OR __sm_r.__sm_o = 0)) AS __sm_v,
  size(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1)) > 1 AND (size(array_distinct(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_d))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c8), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c9), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c10), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c11), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c12), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c14), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c15), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1 OR size(array_distinct(transform(filter(transform(filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1), __sm_z -> __sm_z.__sm_c16), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct('v', __sm_x))))) > 1) AS __sm_bad0,
  exists(__sm_rs, __sm_z -> __sm_z.__sm_kind IS NULL OR __sm_z.__sm_kind NOT IN ('+I', '-U', '+U', '-D')) AS __sm_bad1
  FROM __sm_keys) AS __sm_f
WHERE CASE
  WHEN __sm_bad0 THEN raise_error(concat('MERGE_ENGINE_REJECTED: a key repeats in this batch with records that differ, and no sequence_field orders them: the source is a query, whose row order Spark does not keep from one run to the next, so which record wins would depend on the run; give a sequence_field that tells them apart, or read the batch from a parquet table (its files and row positions) or a VALUES list (key ', to_json(named_struct('id', __sm_p0)), ')'))
  WHEN __sm_bad1 THEN raise_error(concat('MERGE_ENGINE_REJECTED: row_kind_field op must be one of +I, -U, +U, -D (key ', to_json(named_struct('id', __sm_p0)), ')'))
  ELSE (__sm_v.__sm_n OR __sm_v.__sm_t) END

