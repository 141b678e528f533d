"""The commit's visible step in as few metastore calls as the session allows.

A classic SparkSession reaches Spark's external catalog (through py4j), whose
``alterPartitions`` changes the locations of many partitions in one call, which the
Hive metastore applies in one transaction (HiveAlterHandler.alterPartitions): a
reader that lists the partitions sees all of them at the old or all at the new
location. Partitions the commit creates follow in one ``ALTER TABLE ... ADD``
statement (one createPartitions call), after their data is complete.

A Spark Connect session has no such path (the client sends SQL and plans, not calls
into the server's catalog), and the dbt materialization can only send SQL: both
repoint with one ``ALTER TABLE ... PARTITION (...) SET LOCATION`` per partition.
"""

from __future__ import annotations

import json
import logging
import re
import time
import weakref
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.spark import faults

log = logging.getLogger("spark_merge")


def _catalog(spark: SparkSession) -> Any | None:
    """Spark's external catalog of a classic session, or None (Spark Connect)."""
    jss = getattr(spark, "_jsparkSession", None)
    if jss is None:
        return None
    try:
        return jss.sessionState().catalog().externalCatalog()
    except Exception as e:  # an unusual session: fall back to SQL
        log.debug("external catalog not reachable: %s", e)
        return None


def jvm(spark: SparkSession) -> Any:
    """The classic session's view of its JVM (typed Optional by pyspark: a Connect session has none,
    and the callers here run only in classic sessions)."""
    view = spark._jvm
    assert view is not None, "a classic SparkSession (this one has no JVM)"
    return view


def batch_available(spark: SparkSession) -> bool:
    return _catalog(spark) is not None


class _Handles:
    """The JVM classes the catalog calls below use, looked up once per session (_session_handles):
    every attribute step of ``spark._jvm`` (``scala``, ``collection``, ...) is a py4j round trip of its
    own, which at 10,000 partitions cost more than the metastore itself."""

    def __init__(self, spark: SparkSession):
        view = jvm(spark)
        self.array_list = view.java.util.ArrayList
        self.hash_map = view.java.util.HashMap
        self.converters = view.scala.jdk.javaapi.CollectionConverters
        self.maps = getattr(getattr(view.scala.collection.immutable, "Map$"), "MODULE$")
        self.option = view.scala.Option
        self.to_string = view.org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString
        self.null_name = view.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.DEFAULT_PARTITION_NAME()

    def spec(self, values: dict) -> Any:
        java = self.hash_map()
        for k, v in values.items():
            java.put(k, v)  # None: the catalog's NULL partition value
        return getattr(self.maps, "from")(self.converters.asScala(java))

    def seq(self, items: Any) -> Any:
        return self.converters.asScala(items).toSeq()


class _Copier:
    """Copies of CatalogTablePartitions with a new location, in 11 py4j round trips each, where _Json
    cannot make them all at once: each case class's fields as one Java array
    (productIterator().toArray), one field replaced, and its ``copy`` called by reflection with the
    array, instead of a call per field. Field order is the constructor's, whatever the Spark version."""

    def __init__(self, j: _Handles, spark: SparkSession):
        view = jvm(spark)
        self.j = j
        self.tag = view.scala.reflect.ClassTag.Object()
        catalog = view.org.apache.spark.sql.catalyst.catalog
        self.copy_partition = self._copy_method(catalog.CatalogTablePartition)
        self.copy_storage = self._copy_method(catalog.CatalogStorageFormat)
        self.to_uri = catalog.CatalogUtils.stringToURI

    @staticmethod
    def _copy_method(cls: Any) -> Any:
        java_class = cls._java_lang_class
        return next(m for m in java_class.getMethods() if m.getName() == "copy")

    def __call__(self, partition: Any, location: str) -> Any:
        storage = partition.storage()
        fields = storage.productIterator().toArray(self.tag)
        fields[0] = self.j.option.apply(self.to_uri(location))
        parts = partition.productIterator().toArray(self.tag)
        parts[1] = self.copy_storage.invoke(storage, fields)
        return self.copy_partition.invoke(partition, parts)


# A location whose URI form and Hadoop Path form are one string: a scheme, an optional plain
# authority, and path segments of characters no URI quotes and Path does not normalize.
_PLAIN_LOCATION = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//[A-Za-z0-9.:@_-]+)?(/(?!\.{1,2}(/|$))[A-Za-z0-9._=+-]+)+")


class _Json:
    """Many CatalogTablePartitions read, or copied with new locations, in one py4j round trip, as
    JSON by the Jackson ObjectMapper (with its Scala module) that Spark itself ships and uses: call
    by call, reading a partition's values and location took 5 round trips and a copy 11 (at 10,000
    partitions, 6 s for each reading of them and 17 s for the copies). A partition is the dict its
    case class's fields give ({"spec", "storage": {"locationUri", ...}, ...}); the location in it is
    the URI's own text, which location() and with_location() turn into and from the catalog's
    string form (CatalogUtils), in Python when the two are the same text and by the JVM when not."""

    def __init__(self, j: _Handles, spark: SparkSession):
        view = jvm(spark)
        self.j = j
        scala_module = getattr(getattr(view.com.fasterxml.jackson.module.scala, "DefaultScalaModule$"), "MODULE$")
        self.mapper = view.com.fasterxml.jackson.databind.ObjectMapper().registerModule(scala_module)
        partition = view.org.apache.spark.sql.catalyst.catalog.CatalogTablePartition._java_lang_class
        self.list_type = self.mapper.getTypeFactory().constructCollectionType(
            view.java.util.ArrayList._java_lang_class, partition
        )
        self.uri = view.java.net.URI.create
        self.to_uri = view.org.apache.spark.sql.catalyst.catalog.CatalogUtils.stringToURI

    def read(self, partitions: Any) -> list[dict]:
        """A Seq or java.util.List of CatalogTablePartitions as dicts."""
        return list(json.loads(self.mapper.writeValueAsString(partitions)))

    def read_each(self, partitions: list) -> list[dict]:
        """CatalogTablePartitions held one by one, as dicts (one round trip each to gather them)."""
        gathered = self.j.array_list()
        for p in partitions:
            gathered.add(p)
        return self.read(gathered)

    def partitions(self, found: list[dict]) -> Any:
        """The dicts as a Seq of CatalogTablePartitions, for alterPartitions."""
        return self.j.seq(self.mapper.readValue(json.dumps(found), self.list_type))

    def location(self, partition: dict) -> str:
        uri = partition["storage"]["locationUri"]
        return str(uri if _PLAIN_LOCATION.fullmatch(uri) else self.j.to_string(self.uri(uri)))

    def with_location(self, partition: dict, location: str) -> dict:
        uri = location if _PLAIN_LOCATION.fullmatch(location) else str(self.to_uri(location).toString())
        return {**partition, "storage": {**partition["storage"], "locationUri": uri}}


def _json(j: _Handles, spark: SparkSession) -> _Json | None:
    """_Json, or None when this JVM's Jackson cannot be set up (the callers then go call by call)."""
    try:
        return _Json(j, spark)
    except Exception as e:  # noqa: BLE001 - the call-by-call path reads and moves the same partitions
        log.info("partitions are read call by call (no JSON mapper: %s)", e)
        return None


_BY_SESSION: weakref.WeakKeyDictionary[SparkSession, tuple[_Handles, _Json | None]] = weakref.WeakKeyDictionary()


def _session_handles(spark: SparkSession) -> tuple[_Handles, _Json | None]:
    """The session's _Handles and _Json, looked up once per session, not per call: each costs about
    10 ms of py4j round trips (every attribute step of the JVM's view is one), and a merge reads the
    catalog twice."""
    found = _BY_SESSION.get(spark)
    if found is None:
        j = _Handles(spark)
        found = _BY_SESSION[spark] = (j, _json(j, spark))
    return found


def _values(partition: dict, columns: list[str]) -> tuple:
    """A partition ({column: string or None}) as the key _existing finds it by."""
    return tuple(partition[c] for c in columns)


def _spec_keys(stored: list[str], columns: list[str]) -> list[str]:
    """The table's partition columns as the catalog spells them in a listed partition's spec."""
    by_lower = {c.lower(): c for c in stored}
    return [by_lower.get(c.lower(), c) for c in columns]


def _keyed(j: _Handles, js: _Json | None, listed: Any, spec_keys: list[str]) -> list[tuple[tuple, Any]]:
    """The CatalogTablePartitions the catalog listed (a Seq), each with _values' key: its spec read by
    the stored names of the partition columns, the catalog's NULL partition name as None. Each as a
    dict (_Json) or, without ``js``, as the JVM's object."""

    def key(values: list) -> tuple:
        return tuple(None if v is None or v == j.null_name else v for v in values)

    if js is not None:
        return [(key([p["spec"].get(k) for k in spec_keys]), p) for p in js.read(listed)]
    return [(key([p.spec().apply(k) for k in spec_keys]), p) for p in j.converters.asJava(listed)]


def _location(j: _Handles, js: _Json | None, partition: Any) -> str:
    """A partition _existing found, as the catalog's location string."""
    if js is not None and isinstance(partition, dict):
        return js.location(partition)
    return str(j.to_string(partition.location()))


# Listing every partition of a table costs the metastore about what looking up a tenth of them one
# by one does (embedded Derby: 1.0 s for 1,000 partitions listed, 15 s for 1,000 looked up): from
# this many partitions, and a tenth of the table, the lookups below list the table instead. Fewer
# than LOOKUPS_MAX are found by one filter on their values. Not more: a metastore evaluates such a
# filter against every partition of the table, once per value (embedded Derby, a table of 100,000
# partitions: about 10 s a call for 100 values), where a lookup by name is one indexed read.
LOOKUPS_MAX = 64
LIST_SHARE = 10


def _existing(
    spark: SparkSession,
    j: _Handles,
    catalog: Any,
    table: dict,
    name: str,
    partitions: list[dict],
    total: int | None = None,
    js: _Json | None = None,
) -> dict[tuple, Any]:
    """_find's partitions, as dicts through ``js`` and, should that fail (a JVM whose mapper cannot
    write a partition), as the JVM's objects."""
    if js is not None:
        try:
            return _find(spark, j, catalog, table, name, partitions, total, js)
        except Exception as e:  # noqa: BLE001 - read call by call below; a catalog error recurs there
            log.info("the partitions of %s are read call by call (as JSON: %s)", name, e)
    return _find(spark, j, catalog, table, name, partitions, total, None)


def _find(
    spark: SparkSession,
    j: _Handles,
    catalog: Any,
    table: dict,
    name: str,
    partitions: list[dict],
    total: int | None,
    js: _Json | None,
) -> dict[tuple, Any]:
    """The catalog's CatalogTablePartition of each of ``partitions`` of ``name`` (``table``, or its
    staging copy) that exists, by its values (a tuple in the partition columns' order): one listing
    of the table, or one filter on the partitions' values, or a lookup each (above), and a lookup
    for a partition with a NULL value.
    ``total``: the table's partition count, when the caller has it already. Each partition found is
    a dict with ``js`` (_Json), else the JVM's object."""
    global reads
    database, columns = table["database"], table["partition_columns"]
    keys = {_values(part, columns) for part in partitions}
    none = j.option.empty()
    if len(keys) >= LOOKUPS_MAX and total is None:
        reads += 1
        total = catalog.listPartitionNames(database, name, none).size()
    if len(keys) >= LOOKUPS_MAX and len(keys) * LIST_SHARE >= (total or 0):
        reads += 2  # the stored names of the partition columns (the listing's spec keys), the listing
        stored = list(j.converters.asJava(catalog.getTable(database, name).partitionColumnNames()))
        listed = catalog.listPartitions(database, name, none)
        return {values: p for values, p in _keyed(j, js, listed, _spec_keys(stored, columns)) if values in keys}
    found = {}
    # a NULL value is a lookup of its own: the metastore cannot filter on IS NULL, and a filter with
    # it fetches every partition of the table (which the catalog then prunes)
    plain = sorted((k for k in keys if None not in k), key=str)
    if 1 < len(plain) < LOOKUPS_MAX:
        by_filter = _by_filter(spark, j, catalog, table, name, plain, js)
        if by_filter is not None:
            found = {k: p for k, p in by_filter.items() if k in keys}
            keys -= set(plain)
    reads += len(keys)
    hits, hit_keys = [], []
    for values in keys:
        p = catalog.getPartitionOption(database, name, j.spec(dict(zip(columns, values, strict=True))))
        if p.isDefined():
            hits.append(p.get())
            hit_keys.append(values)
    found.update(zip(hit_keys, js.read_each(hits) if js is not None and hits else hits, strict=True))
    return found


def _by_filter(
    spark: SparkSession, j: _Handles, catalog: Any, table: dict, name: str, keys: list[tuple], js: _Json | None
) -> dict | None:
    """The partitions of ``keys`` that exist, found as Spark's own partition pruning finds them: the
    catalog's listPartitionsByFilter with the predicate partition_filter writes, resolved and folded
    against the table by Spark (the metastore filters what it can, the catalog the rest exactly),
    in one call. None when the catalog refuses the filter (a metastore that cannot filter on the
    partition columns' types): the caller looks each partition up instead."""
    global reads
    from pyspark.sql import functions as F

    database, columns = table["database"], table["partition_columns"]
    try:
        df = spark.table(macros.relation(database, name))
        spec_keys = _spec_keys([f.name for f in df.schema.fields], columns)
        time_zone = spark.conf.get("spark.sql.session.timeZone")
        where = macros.partition_filter(table, [dict(zip(columns, k, strict=True)) for k in keys])
        plan = df.select(F.expr(where).alias("__sm_in"))._jdf.queryExecution().optimizedPlan()
        predicate = plan.expressions().head().child()  # the folded predicate (In or InSet of literals)
        reads += 1
        predicates = j.array_list()
        predicates.add(predicate)
        listed = catalog.listPartitionsByFilter(database, name, j.seq(predicates), time_zone)
        return dict(_keyed(j, js, listed, spec_keys))
    except Exception as e:  # noqa: BLE001 - the lookups below find the same partitions, slower
        log.info("the catalog did not filter the partitions of %s.%s (%s): looking each up", database, name, e)
        return None


def repoint(spark: SparkSession, table: dict, repoints: list[dict], known: dict | None = None) -> float:
    """Point each partition (or the table) at its new location; returns the seconds between the
    first and the last visible change. Idempotent, so a recovery may replay it. ``known``: the
    catalog's partitions as locations() read them under the same commit lock ({"keys", "found",
    "json"}), used when they cover every partition moved (no second lookup of each)."""
    catalog = _catalog(spark) if table["partition_columns"] else None
    if catalog is None:
        return _repoint_by_statements(spark, table, repoints)
    db, name, columns = table["database"], table["table_name"], table["partition_columns"]
    j, js = _session_handles(spark)
    keys = {_values(r["partition"], columns) for r in repoints}
    if known is not None and keys <= known["keys"]:
        existing, js = known["found"], known["json"]
    else:
        existing = _existing(spark, j, catalog, table, name, [r["partition"] for r in repoints], js=js)
    moving, added = _split(existing, repoints, columns)
    moved = None
    if js is not None and all(isinstance(p, dict) for p, _ in moving):
        try:
            moved = js.partitions([js.with_location(p, location) for p, location in moving])
        except Exception as e:  # noqa: BLE001 - the same partitions, looked up and copied call by call
            log.info("the partitions of %s are moved call by call (as JSON: %s)", name, e)
            found = _existing(spark, j, catalog, table, name, [r["partition"] for r in repoints])
            moving, added = _split(found, repoints, columns)
    if moved is None:
        with_location, copies = _Copier(j, spark), j.array_list()
        for p, location in moving:
            copies.add(with_location(p, location))
        moved = j.seq(copies)
    t0 = time.monotonic()
    if moving:
        catalog.alterPartitions(db, name, moved)
    if moving and added:
        faults.reached("between_repoints")
    if added:
        spark.sql(macros.add_partitions_sql(table, added))
    return time.monotonic() - t0


def _split(existing: dict[tuple, Any], repoints: list[dict], columns: list[str]) -> tuple[list, list[dict]]:
    """The repoints of partitions that exist, each as (the catalog's partition, its new location),
    and the repoints of partitions to add."""
    moving, added = [], []
    for r in repoints:
        found = existing.get(_values(r["partition"], columns))
        if found is not None:
            moving.append((found, r["location"]))
        else:
            added.append(r)
    return moving, added


def _repoint_by_statements(spark: SparkSession, table: dict, repoints: list[dict]) -> float:
    statements = macros.repoint_statements(table, repoints)
    t0 = time.monotonic()
    for n, stmt in enumerate(statements, start=1):
        spark.sql(stmt)
        if n < len(statements):
            faults.reached("between_repoints")
    return time.monotonic() - t0


reads = 0  # catalog reads made by locations() and repoint() in this process (bench/counts.py reports them)


def locations(
    spark: SparkSession,
    table: dict,
    name: str,
    partitions: list[dict],
    count: bool = False,
    read: dict | None = None,
) -> tuple[list[tuple[dict, str]], int | None] | None:
    """Where the catalog says each of ``partitions`` ({column: string or None}) of ``name`` (the
    table, or its staging copy) lives, now: the (partition, location) pairs of those that exist,
    and (``count``) how many partitions it has in all; an unpartitioned table is one pair ({}, its
    location). None on Spark Connect. One metastore call per partition, one filter for a few of
    them, or one listing of them all (_existing), no Spark job. ``read``: filled with what
    repoint's ``known`` takes."""
    global reads
    database, partition_columns = table["database"], table["partition_columns"]
    catalog = _catalog(spark)
    if catalog is None:
        return None
    j, js = _session_handles(spark)
    if not partition_columns:
        reads += 1
        return [({}, j.to_string(catalog.getTable(database, name).location()))], 1
    total = None
    if count:
        reads += 1
        total = catalog.listPartitionNames(database, name, j.option.empty()).size()
    existing = _existing(spark, j, catalog, table, name, partitions, total, js)
    if read is not None:
        read.update(keys={_values(part, partition_columns) for part in partitions}, found=existing, json=js)
    found = []
    for part in partitions:
        p = existing.get(_values(part, partition_columns))
        if p is not None:
            found.append((part, _location(j, js, p)))
    return found, total


def all_locations(spark: SparkSession, table: dict, limit: int) -> list[tuple[dict, str]] | None:
    """(partition, location) of every partition of ``table`` as the catalog has them now ({column:
    string or None}; an unpartitioned table is one pair, ({}, its location)): one listing, no Spark
    job. None on Spark Connect, or when the table has more than ``limit`` partitions (not listed)."""
    global reads
    database, name, columns = table["database"], table["table_name"], table["partition_columns"]
    catalog = _catalog(spark)
    if catalog is None:
        return None
    j, js = _session_handles(spark)
    reads += 1
    if not columns:
        return [({}, j.to_string(catalog.getTable(database, name).location()))]
    if catalog.listPartitionNames(database, name, j.option.empty()).size() > limit:
        return None
    reads += 2
    stored = list(j.converters.asJava(catalog.getTable(database, name).partitionColumnNames()))
    listed = catalog.listPartitions(database, name, j.option.empty())
    return [
        (dict(zip(columns, values, strict=True)), _location(j, js, p))
        for values, p in _keyed(j, js, listed, _spec_keys(stored, columns))
    ]


def properties(spark: SparkSession, database: str, name: str) -> dict[str, str] | None:
    """The properties of table ``database.name`` by the classic session's catalog (a look and a read:
    a few milliseconds, where ``SHOW TABLES`` and ``SHOW TBLPROPERTIES`` are two statements of 25-40
    ms each), None when there is no such table (or it was dropped between the two calls)."""
    catalog = _catalog(spark)
    assert catalog is not None, "a classic SparkSession (batch_available)"
    if not catalog.tableExists(database, name):
        return None
    j, js = _session_handles(spark)
    try:
        props = catalog.getTable(database, name).properties()
    except Exception as e:  # noqa: BLE001 - dropped since the look: no table
        if "NoSuchTable" in str(e) or "TABLE_OR_VIEW_NOT_FOUND" in str(e):
            return None
        raise
    if js is not None:
        return dict(json.loads(js.mapper.writeValueAsString(props)))
    return dict(j.converters.asJava(props))


def drop_table(spark: SparkSession, database: str, name: str) -> None:
    """Drop table ``database.name`` if it exists, by one catalog call (``DROP TABLE`` also resolves the
    table to uncache any query over it: 45 ms). For tables no query reads (the commit lock's marker):
    an external table's files stay, as they do for ``DROP TABLE``."""
    catalog = _catalog(spark)
    assert catalog is not None, "a classic SparkSession (batch_available)"
    catalog.dropTable(database, name, True, False)


def other_tables(spark: SparkSession, table: dict) -> list[dict]:
    """Every other table of the catalog, as {'name', 'location', 'root', 'table_id'}: what vacuum and
    adopt check the table's claim to its root against (a copy of its DDL carries its properties, a
    table created with a LOCATION inside its root reads its files). Tables of every database, read
    in one catalog call per database on a classic session; by SQL, a table at a time, elsewhere."""
    catalog = _catalog(spark)
    mine = (table["database"].lower(), table["table_name"].lower())
    out = []
    if catalog is not None:
        java = jvm(spark).scala.jdk.javaapi.CollectionConverters
        to_string = jvm(spark).org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString
        for db in java.asJava(catalog.listDatabases()):
            names = catalog.listTables(db)
            for t in java.asJava(catalog.getTablesByName(db, names)):
                name = t.identifier().table()
                if (db.lower(), name.lower()) == mine:
                    continue
                props = dict(java.asJava(t.properties()))
                location = to_string(t.location()) if t.storage().locationUri().isDefined() else ""
                out.append(
                    {
                        "name": f"{db}.{name}",
                        "location": location,
                        "root": props.get("spark_merge.root") or location,
                        "table_id": props.get("spark_merge.table_id"),
                    }
                )
        return out
    import json

    for (db,) in spark.sql(macros.show_databases_sql()).collect():
        for r in spark.sql(macros.show_tables_sql(db)).collect():
            if r["isTemporary"] or (db.lower(), r["tableName"].lower()) == mine:
                continue
            rel = macros.relation(db, r["tableName"])
            desc = json.loads(spark.sql(macros.describe_json_sql(rel)).collect()[0][0])
            props = desc.get("table_properties") or {}
            location = desc.get("location") or ""
            out.append(
                {
                    "name": f"{db}.{r['tableName']}",
                    "location": location,
                    "root": props.get("spark_merge.root") or location,
                    "table_id": props.get("spark_merge.table_id"),
                }
            )
    return out


def claims_on(spark: SparkSession, table: dict) -> list[str]:
    """Other tables that read files under ``table``'s root, or say they are ``table`` (its table id):
    one line each, for the error that stops vacuum."""
    from merge_core.spark import files

    root = files.key(table["root"])
    found = []
    for other in other_tables(spark, table):
        if other["location"] and files.is_inside(files.key(other["location"]), root):
            found.append(f"{other['name']} (location {other['location']})")
        elif other["table_id"] and table.get("table_id") and other["table_id"] == table["table_id"]:
            found.append(f"{other['name']} (table_id {other['table_id']}, copied from this table's DDL)")
    return found
