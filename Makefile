# Two commands on a fresh machine (Python 3.11 + Java 17):
#   make demo   - create .venv, install, run a real MERGE on a local Spark warehouse
#   make test   - create/update .venv, run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo unit test test-all lint docs bench bench-cli bench-delta bench-matrix bench-s3 bench-feed bench-partitions bench-aging clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv resolves the same versions pip does, and installs them in under a minute instead of several
	$(BIN)/pip install --quiet 'uv<1'
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[all]' -C editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# the unit tier (tests/unit): no JVM, dbt run or server; seconds, and the pre-commit hook runs it
unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

# ruff (lint and format) over the code, mypy over all of merge_core (pyproject.toml configures both)
lint: $(STAMP)
	$(BIN)/ruff check merge_core airflow_provider dags bench tests
	$(BIN)/ruff format --check merge_core airflow_provider dags bench tests
	$(BIN)/mypy

# the options table of docs/python-and-cli.md, from the declarations (dbt_macros/macros/core/options.sql)
docs: $(STAMP)
	$(BIN)/python -c 'from merge_core.request.options import write_docs; write_docs("docs/python-and-cli.md")'

# everything, the extended tier too (README: Tests); longer than CI's hour
test-all: $(STAMP) lint
	SPARK_MERGE_SOAK_ITERATIONS=8 SPARK_MERGE_APPS_SOAK_MERGES=6 SPARK_MERGE_DIFF_CASES=200 SPARK_MERGE_PG_DIFF_CASES=30 \
	  SPARK_MERGE_CORRUPTION_CASES=18 SPARK_MERGE_READER_MERGES=4 SPARK_MERGE_CATALOG_STEPS=150 SPARK_MERGE_STREAM_KILLS=10 \
	  $(BIN)/python -m pytest -m '' $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/merge_cost.py
	$(BIN)/python bench/upsert_modes.py

# The peers: Delta Lake and Iceberg, beside spark-merge in one Spark session (bench/peers.py). The newest
# Spark both are built for is 4.1 (delta-spark 4.3.1, iceberg-spark-runtime-4.1 1.12.0), so the benches
# that compare run on pyspark 4.1.4, fetched with the jars into var/peers (not committed)
PEERS := var/peers
MAVEN := https://repo1.maven.org/maven2
PEER_JARS := delta-spark_2.13-4.3.1.jar delta-storage-4.3.1.jar iceberg-spark-runtime-4.1_2.13-1.12.0.jar
DELTA_ARGS ?=
$(PEERS)/ready: $(STAMP)
	mkdir -p $(PEERS)
	test -d $(PEERS)/py41/pyspark || $(BIN)/pip install --quiet --no-deps --target $(PEERS)/py41 pyspark==4.1.4
	test -f $(PEERS)/delta-spark_2.13-4.3.1.jar || curl -fsSL -o $@.part $(MAVEN)/io/delta/delta-spark_2.13/4.3.1/delta-spark_2.13-4.3.1.jar
	test -f $(PEERS)/delta-spark_2.13-4.3.1.jar || mv $@.part $(PEERS)/delta-spark_2.13-4.3.1.jar
	test -f $(PEERS)/delta-storage-4.3.1.jar || curl -fsSL -o $@.part $(MAVEN)/io/delta/delta-storage/4.3.1/delta-storage-4.3.1.jar
	test -f $(PEERS)/delta-storage-4.3.1.jar || mv $@.part $(PEERS)/delta-storage-4.3.1.jar
	test -f $(PEERS)/iceberg-spark-runtime-4.1_2.13-1.12.0.jar || curl -fsSL -o $@.part \
		$(MAVEN)/org/apache/iceberg/iceberg-spark-runtime-4.1_2.13/1.12.0/iceberg-spark-runtime-4.1_2.13-1.12.0.jar
	test -f $(PEERS)/iceberg-spark-runtime-4.1_2.13-1.12.0.jar || mv $@.part $(PEERS)/iceberg-spark-runtime-4.1_2.13-1.12.0.jar
	touch $@

PEER_RUN = PYTHONPATH=$(PEERS)/py41:. PEER_JARS=$(subst $(space),$(comma),$(addprefix $(CURDIR)/$(PEERS)/,$(PEER_JARS))) $(BIN)/python
comma := ,
space := $(subst ,, )
# a merge's commit against the partitions it rewrites and the table has (bench/partitions.py), on the
# embedded and a service metastore, Delta beside it (so on the peers' Spark, as bench-delta)
PARTS_ARGS ?=
bench-partitions: $(PEERS)/ready
	$(PEER_RUN) bench/partitions.py $(PARTS_ARGS)

# S3 requests per merge (bench/s3_requests.py), on moto's S3 server; S3A's jars are fetched into var/s3a
S3_ARGS ?=
bench-s3: $(STAMP)
	$(BIN)/python bench/s3_requests.py $(S3_ARGS)

# what recording the change feed costs a merge (bench/change_feed.py)
FEED_ARGS ?= --write-docs
bench-feed: $(STAMP)
	$(BIN)/python bench/change_feed.py $(FEED_ARGS)

# the command line against a warm `spark-merge server` (bench/warm_cli.py)
bench-cli: $(STAMP)
	$(BIN)/python bench/warm_cli.py --write-docs

bench-delta: $(PEERS)/ready
	$(PEER_RUN) bench/delta_spark.py $(DELTA_ARGS)

# Delta Lake's own MERGE benchmark (its 16 MergeTestCases), spark-merge beside Delta copy-on-write, Delta
# with deletion vectors, Iceberg copy-on-write and Iceberg merge-on-read (bench/delta_matrix.py); --write-docs puts the table into docs/performance.md
MATRIX_ARGS ?= --write-docs
bench-matrix: $(PEERS)/ready
	$(PEER_RUN) bench/delta_matrix.py $(MATRIX_ARGS)

# a table after 100 CDC merges (bench/aging.py): files, bytes, a full scan and a point lookup every 10
# merges, spark-merge with and without auto compaction beside Delta with auto compaction and a fresh copy
AGING_ARGS ?=
bench-aging: $(PEERS)/ready
	$(PEER_RUN) bench/aging.py $(AGING_ARGS)

clean:
	rm -rf var .pytest_cache
