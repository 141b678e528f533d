"""Write tests/fixtures/release-<version>.zip: tables a released spark-merge wrote, for test_upgrade.py.

Run with the release's own code first on the path (not this checkout's), e.g. for 0.1.0 (commit
ffd6cbb, the last one of that release):

    rm -rf /tmp/rel && mkdir /tmp/rel && git archive ffd6cbb | tar -x -C /tmp/rel
    PYTHONPATH=/tmp/rel .venv/bin/python tests/release_fixture.py 0.1.0

The tables live under ROOT, a fixed path, because a release records absolute locations in the
table's properties and history; test_upgrade.py unpacks the files there again. The zip holds the
files under ROOT and manifest.json: the statements that rebuild the catalog entries (the metastore
DDL), the files' modification times, and each table's rows after each of the release's merges.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path("/tmp/spark-merge-release-fixture")
DATABASE = "sm_release"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

SETUP = [
    f"CREATE DATABASE {DATABASE} LOCATION '{ROOT}/db'",
    f"CREATE TABLE {DATABASE}.orders (id INT, status STRING, amount DOUBLE, region STRING) USING parquet "
    "PARTITIONED BY (region)",
    f"INSERT INTO {DATABASE}.orders VALUES (1, 'new', 10.0, 'eu'), (2, 'new', 20.0, 'eu'), (3, 'new', 30.0, 'us'), "
    "(4, 'paid', 40.0, 'us'), (5, 'new', NULL, NULL)",
    f"CREATE TABLE {DATABASE}.accounts (id INT, v STRING) USING parquet",
    f"INSERT INTO {DATABASE}.accounts VALUES (1, 'a'), (2, 'b'), (3, 'c')",
]
MERGES = {
    "orders": [
        f"MERGE INTO {DATABASE}.orders t USING (SELECT * FROM VALUES (1, 'paid', 11.0, 'eu'), (6, 'new', 60.0, 'ap') "
        "AS s(id, status, amount, region)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        f"DELETE FROM {DATABASE}.orders WHERE id = 3",
        f"UPDATE {DATABASE}.orders SET status = 'late' WHERE region IS NULL",
    ],
    "accounts": [f"UPDATE {DATABASE}.accounts SET v = upper(v) WHERE id < 3"],
}


def rows(spark, table: str) -> list[list]:
    return [list(r) for r in spark.sql(f"SELECT * FROM {DATABASE}.{table} ORDER BY id").collect()]


def catalog_ddl(spark, table: str) -> list[str]:
    """The statements that give the catalog this table again: its schema and location, its
    partitions' locations, and spark-merge's table properties."""
    name = f"{DATABASE}.{table}"
    desc = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {name} AS JSON").collect()[0][0])
    columns = ", ".join(f"`{c['name']}` {c['type']['name']}" for c in desc["columns"])
    parts = desc.get("partition_columns") or []
    partitioned = f" PARTITIONED BY ({', '.join(parts)})" if parts else ""
    out = [f"CREATE TABLE {name} ({columns}) USING parquet{partitioned} LOCATION '{desc['location']}'"]
    for (spec,) in spark.sql(f"SHOW PARTITIONS {name}").collect() if parts else []:
        part = json.loads(
            spark.sql(f"DESCRIBE TABLE EXTENDED {name} PARTITION ({_spec(spec)}) AS JSON").collect()[0][0]
        )
        out.append(f"ALTER TABLE {name} ADD PARTITION ({_spec(spec)}) LOCATION '{part['location']}'")
    props = {k: v for k, v in spark.sql(f"SHOW TBLPROPERTIES {name}").collect() if k.startswith("spark_merge.")}
    literal = ", ".join(f"'{k}' = {json.dumps(v)}" for k, v in sorted(props.items()))
    out.append(f"ALTER TABLE {name} SET TBLPROPERTIES ({literal})")
    return out


def _spec(spec: str) -> str:
    """SHOW PARTITIONS' region=eu as a partition spec; Hive's NULL partition as NULL."""
    key, value = spec.split("=", 1)
    return f"{key} = NULL" if value == "__HIVE_DEFAULT_PARTITION__" else f"{key} = '{value}'"


def main(version: str) -> None:
    from merge_core import get_session, history, merge

    shutil.rmtree(ROOT, ignore_errors=True)
    spark = get_session(master="local[2]", warehouse=tempfile.mkdtemp(prefix="sm-release-"))
    for sql in SETUP:
        spark.sql(sql)
    manifest: dict = {"version": version, "root": str(ROOT), "database": DATABASE, "tables": {}}
    for table, statements in MERGES.items():
        after = [rows(spark, table)]
        for sql in statements:
            merge(spark, sql)
            after.append(rows(spark, table))
        merge_ids = [e["merge_id"] for e in reversed(history(spark, f"{DATABASE}.{table}"))]
        manifest["tables"][table] = {"rows_after": after, "merge_ids": merge_ids}
    manifest["ddl"] = [f"CREATE DATABASE {DATABASE} LOCATION '{ROOT}/db'"]
    for table in MERGES:
        manifest["ddl"] += catalog_ddl(spark, table)
    spark.stop()
    FIXTURES.mkdir(exist_ok=True)
    kept = [p for p in sorted((ROOT / "db").rglob("*")) if p.is_file() and not p.name.endswith(".crc")]
    # rollback and vacuum read the files' modification times: kept exactly (a zip keeps them to 2 s)
    manifest["mtimes_ns"] = {p.relative_to(ROOT).as_posix(): p.stat().st_mtime_ns for p in kept}
    with zipfile.ZipFile(FIXTURES / f"release-{version}.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=1))
        for path in kept:
            z.write(path, path.relative_to(ROOT).as_posix())
    print(f"wrote {FIXTURES / f'release-{version}.zip'}")


if __name__ == "__main__":
    main(sys.argv[1])
