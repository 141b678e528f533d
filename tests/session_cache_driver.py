"""A Spark application of its own for test_layout.py: a second session reads a partition at its canonical
directory, a merge moves it, and vacuum's canonical-layout step refills that directory once retention
(3 s here) has passed. With spark.sql.metadataCacheTTLSeconds (2 s here, a static conf, hence the
separate application) no longer than the retention, the second session's next query lists again and
reads the new rows. Prints one JSON line: what each session read."""

from __future__ import annotations

import json
import sys
import time

from merge_core import merge, vacuum
from merge_core.spark.session import get_session

RETENTION_S, TTL_S = 3, 2


def main(home: str) -> None:
    a = get_session(master="local[1]", warehouse=home, conf={"spark.sql.metadataCacheTTLSeconds": str(TTL_S)})
    b = a.newSession()
    a.sql(
        "CREATE TABLE default.cached (id INT, v INT, p INT) USING parquet PARTITIONED BY (p) "
        f"TBLPROPERTIES ('spark_merge.retention_hours' = '{RETENTION_S / 3600}')"
    )
    a.sql("INSERT INTO default.cached VALUES (1, 1, 1), (2, 2, 1), (3, 3, 2)")

    def read(session):
        return [tuple(r) for r in session.sql("SELECT * FROM default.cached ORDER BY id").collect()]

    seen = {"before": read(b)}
    merge(a, "UPDATE default.cached SET v = v + 10 WHERE p = 1")
    seen["after_merge"] = read(b)
    time.sleep(RETENTION_S + 0.5)
    moved = vacuum(a, "default.cached").layout.planned
    seen.update(moved=[m["spec"] for m in moved], writer=read(a))
    try:
        seen["after_vacuum"] = read(b)
    except Exception as e:  # the stale listing this test rules out
        seen["after_vacuum"] = str(e)[:300]
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1])
