"""Exactly-once streaming merges (merge_core.foreach_batch): a real Structured Streaming query (a file
source, one micro-batch per file) merges each batch with an additive update; its process is SIGKILLed
at random moments and the query restarted from its checkpoint, until every file is merged. Every
batch must count once: a batch merged twice would add its amounts twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

DRIVER = Path(__file__).resolve().parent / "stream_driver.py"
KEYS = (1, 2, 3)
# kills before the query may run to its end: 1 in CI, 10 in make test-all (with more batches to kill)
KILLS = int(os.environ.get("SPARK_MERGE_STREAM_KILLS", "1"))
BATCHES = max(6, 3 * KILLS)


def _driver(home: Path, mode: str, *paths: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(home), mode, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_killed_and_restarted_query_merges_every_batch_exactly_once(tmp_path):
    home, source, checkpoint = tmp_path / "home", tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    for b in range(BATCHES):  # batch b adds b + 1 to every key
        (source / f"batch-{b:03d}.json").write_text(
            "".join(json.dumps({"id": k, "amount": b + 1}) + "\n" for k in KEYS)
        )
    paths = (source, checkpoint)
    _driver(home, "setup", *paths)
    seed = int(os.environ.get("SPARK_MERGE_STREAM_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    kills = 0
    while True:
        # its log goes to a file: a pipe nobody reads while the test waits fills up and stops the query
        log = tmp_path / f"run-{kills}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, str(DRIVER), str(home), "run", *map(str, paths)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        if kills < KILLS:
            _wait_for_spark(home, proc)
            time.sleep(rng.uniform(1.0, 12.0))  # somewhere in a batch: reading it, merging it, committing
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                kills += 1
                continue
        try:
            code = proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = None
        assert code == 0, f"seed {seed}, after {kills} kill(s), exit {code}: {log.read_text()[-3000:]}"
        break
    result = json.loads(_driver(home, "read", *paths).stdout.strip().splitlines()[-1])
    total = sum(range(1, BATCHES + 1))
    assert result["rows"] == [[k, total] for k in KEYS], f"seed {seed}, after {kills} kill(s): {result}"
    keys = [k for k in result["run_keys"] if k]
    assert len(keys) == len(set(keys)) == BATCHES and all(k.startswith("stream:") for k in keys), keys
    print(f"{kills} kill(s); {BATCHES} batches merged once each")


def _wait_for_spark(home: Path, proc: subprocess.Popen) -> None:
    """Until the query's process has its Spark up (its JVM holds the embedded metastore)."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not (home / "metastore_db" / "db.lck").exists():
        time.sleep(0.2)


def test_a_batch_replayed_from_the_checkpoint_is_merged_once(spark, db, tmp_path):
    """A restart after a crash, without the crash: the checkpoint loses its last batch's commit mark (as
    a process killed after that batch's merge committed, before the mark, leaves it), and the restarted
    query runs that batch again with the same id. The replay returns the first merge's commit; an
    additive update shows a second merge. (The kill itself: the test above, in make test-all.)"""
    from merge_core import foreach_batch, history

    table = f"{db}.acc"
    spark.sql(f"CREATE TABLE {table} (id INT, amount BIGINT) USING parquet")
    add = (
        f"MERGE INTO {table} t USING (SELECT id, sum(amount) AS amount FROM source GROUP BY id) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET amount = t.amount + s.amount WHEN NOT MATCHED THEN INSERT *"
    )
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    for b in range(3):  # batch b adds b + 1 to every key
        (source / f"batch-{b}.json").write_text("".join(json.dumps({"id": k, "amount": b + 1}) + "\n" for k in KEYS))

    def run() -> None:
        query = (
            spark.readStream.schema("id INT, amount BIGINT")
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.foreachBatch(foreach_batch(table, add))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(300), "the query did not finish in 300 s"
        assert query.exception() is None, query.exception()

    run()
    assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect()) == [(k, 6) for k in KEYS]
    marks = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [p.name for p in marks] == ["0", "1", "2"]
    marks[-1].unlink()  # the crash's effect: batch 2 merged, its mark never written
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    run()
    assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect()) == [(k, 6) for k in KEYS]
    keys = [e["run_key"] for e in history(spark, table, limit=100)]
    assert len(keys) == 3 and len(set(keys)) == 3 and all(k.startswith("stream:") for k in keys), keys
    assert (checkpoint / "commits" / "2").exists()  # the replay ran, and the query marked it done
