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
  HAVING sum(__sm_mods) > 1
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

