"""Subprocess side of the streaming test (test_streaming.py). Not a test module itself.

    python tests/stream_driver.py HOME setup|run|read INPUT CHECKPOINT
setup: create the target; run: merge every input file not yet processed, one micro-batch per file,
through merge_core.foreach_batch (the test SIGKILLs it at random moments and runs it again); read:
print the target's rows and its history's run keys (JSON).
"""

from __future__ import annotations

import json
import sys

from merge_core import foreach_batch, history
from merge_core.spark.session import get_session

TABLE = "stream.acc"
# additive: a batch merged twice shows in the totals
ADD = (
    f"MERGE INTO {TABLE} t USING (SELECT id, sum(amount) AS amount FROM source GROUP BY id) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET amount = t.amount + s.amount WHEN NOT MATCHED THEN INSERT *"
)


def main(home: str, mode: str, source: str, checkpoint: str) -> None:
    spark = get_session(master="local[1]", warehouse=home, conf={"spark.sql.shuffle.partitions": "1"})
    if mode == "setup":
        spark.sql("CREATE DATABASE IF NOT EXISTS stream")
        spark.sql(f"CREATE TABLE {TABLE} (id INT, amount BIGINT) USING parquet")
    elif mode == "run":
        query = (
            spark.readStream.schema("id INT, amount BIGINT")
            .option("maxFilesPerTrigger", 1)
            .json(source)
            .writeStream.foreachBatch(foreach_batch(TABLE, ADD))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    elif mode == "read":
        rows = sorted([list(r) for r in spark.sql(f"SELECT id, amount FROM {TABLE}").collect()])
        keys = [e.get("run_key") for e in history(spark, TABLE, limit=1000)]
        print(json.dumps({"rows": rows, "run_keys": keys}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
