"""A fresh embedded session (tests/test_trust.py): the second CREATE DATABASE IF NOT EXISTS, and a
Python UDF in a merge's source, as a user's first script would run them."""

import sys

from merge_core import merge
from merge_core.spark.session import get_session

spark = get_session(warehouse=sys.argv[1])
for _ in range(2):
    spark.sql("CREATE DATABASE IF NOT EXISTS fresh")
spark.sql("CREATE TABLE fresh.t (id INT, v STRING) USING parquet")
spark.sql("INSERT INTO fresh.t VALUES (1, 'a')")
spark.udf.register("shout", lambda s: s.upper() + "!", "string")
result = merge(
    spark,
    "MERGE INTO fresh.t t USING (SELECT 1 AS id, shout('b') AS v) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v",
)
print("ROWS", sorted(tuple(r) for r in spark.table("fresh.t").collect()))
