"""The examples of Trino's MERGE documentation, on partitioned and unpartitioned parquet tables."""

from __future__ import annotations

import pytest

from merge_core import ValidationError, merge

from .conftest import rows

ACCOUNTS = [
    ("Aaron Smith", 500, "San Jose"),
    ("Carla Ferrari", 1000, "Berkeley"),
    ("Joe Shmoe", 200, "Centreville"),
    ("Dave Jones", 300, "Menlo Park"),
    ("Ann Lee", 800, "Berkeley"),
]
UPDATES = [
    ("Aaron Smith", 100, "San Francisco"),
    ("Carla Ferrari", 50, "Berkeley"),
    ("Joe Shmoe", 25, "Centreville"),
    ("Eve Adams", 70, "Oakland"),
    ("Ann Lee", 5, "Centreville"),
]


@pytest.fixture(params=["partitioned", "unpartitioned"])
def accounts(request, spark, db):
    part = "PARTITIONED BY (address)" if request.param == "partitioned" else ""
    spark.sql(
        f"CREATE TABLE {db}.accounts (customer STRING, purchases DECIMAL(10,2), address STRING) USING parquet {part}"
    )
    spark.sql(
        f"CREATE TABLE {db}.monthly_accounts_update (customer STRING, purchases DECIMAL(10,2), address STRING) USING parquet"
    )

    def values(data):
        return ", ".join(f"('{c}', {p}, '{a}')" for c, p, a in data)

    spark.sql(f"INSERT INTO {db}.accounts VALUES {values(ACCOUNTS)}")
    spark.sql(f"INSERT INTO {db}.monthly_accounts_update VALUES {values(UPDATES)}")
    spark.sql(f"USE {db}")
    yield f"{db}.accounts"
    spark.sql("USE default")


def result(spark, table):
    return sorted((c, int(p), a) for c, p, a in rows(spark, table))


def test_delete_all_customers_mentioned_in_source(spark, accounts):
    r = merge(
        spark,
        """
        MERGE INTO accounts t USING monthly_accounts_update s
            ON t.customer = s.customer
            WHEN MATCHED
                THEN DELETE""",
    )
    assert result(spark, accounts) == [("Dave Jones", 300, "Menlo Park")]
    assert r.metrics["numTargetRowsDeleted"] == 4
    assert r.metrics["numSourceRows"] == 5


def test_increment_purchases_or_insert(spark, accounts):
    r = merge(
        spark,
        """
        MERGE INTO accounts t USING monthly_accounts_update s
            ON (t.customer = s.customer)
            WHEN MATCHED
                THEN UPDATE SET purchases = s.purchases + t.purchases
            WHEN NOT MATCHED
                THEN INSERT (customer, purchases, address)
                      VALUES(s.customer, s.purchases, s.address)""",
    )
    assert result(spark, accounts) == sorted(
        [
            ("Aaron Smith", 600, "San Jose"),
            ("Carla Ferrari", 1050, "Berkeley"),
            ("Joe Shmoe", 225, "Centreville"),
            ("Dave Jones", 300, "Menlo Park"),
            ("Ann Lee", 805, "Berkeley"),
            ("Eve Adams", 70, "Oakland"),
        ]
    )
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (4, 1)


def test_delete_centreville_update_others_insert_new(spark, accounts):
    merge(
        spark,
        """
        MERGE INTO accounts t USING monthly_accounts_update s
            ON (t.customer = s.customer)
            WHEN MATCHED AND s.address = 'Centreville'
                THEN DELETE
            WHEN MATCHED
                THEN UPDATE
                    SET purchases = s.purchases + t.purchases, address = s.address
            WHEN NOT MATCHED
                THEN INSERT (customer, purchases, address)
                      VALUES(s.customer, s.purchases, s.address)""",
    )
    assert result(spark, accounts) == sorted(
        [
            ("Aaron Smith", 600, "San Francisco"),
            ("Carla Ferrari", 1050, "Berkeley"),
            ("Dave Jones", 300, "Menlo Park"),
            ("Eve Adams", 70, "Oakland"),
        ]
    )


FOUR_CLAUSES = """
    MERGE INTO accounts t USING monthly_accounts_update s
        ON (t.customer = s.customer)
        WHEN MATCHED AND s.address = 'Berkeley' THEN
            DELETE
        WHEN MATCHED AND s.customer = 'Joe Shmoe' THEN
            UPDATE SET purchases = {purchases} + 100.0
        WHEN MATCHED THEN
            UPDATE
                SET purchases = s.purchases + t.purchases, address = s.address
        WHEN NOT MATCHED THEN
            INSERT (customer, purchases, address)
                  VALUES (s.customer, s.purchases, s.address)"""


def test_four_clauses_first_matching_clause_wins(spark, accounts):
    r = merge(spark, FOUR_CLAUSES.format(purchases="t.purchases"))
    assert result(spark, accounts) == sorted(
        [
            ("Aaron Smith", 600, "San Francisco"),  # third clause; moves to another partition
            ("Joe Shmoe", 300, "Centreville"),  # second clause only: address kept
            ("Dave Jones", 300, "Menlo Park"),  # not in source: untouched
            ("Ann Lee", 805, "Centreville"),  # third clause; moves partition
            ("Eve Adams", 70, "Oakland"),  # inserted
        ]
    )  # Carla (Berkeley in source): deleted
    m = r.metrics
    assert (m["numTargetRowsDeleted"], m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (1, 3, 1)


def test_four_clauses_as_documented_is_ambiguous(spark, accounts):
    """Trino's page writes `purchases + 100.0`; both tables have `purchases`, so it must be refused."""
    before = rows(spark, accounts)
    with pytest.raises(ValidationError) as e:
        merge(spark, FOUR_CLAUSES.format(purchases="purchases"))
    assert "WHEN MATCHED clause 2 (UPDATE) value for column purchases" in str(e.value)
    assert "AMBIGUOUS_REFERENCE" in str(e.value)
    assert rows(spark, accounts) == before


def test_trino_dialect_text_is_accepted(spark, accounts):
    """A Trino function in a SET expression is transpiled to Spark SQL."""
    merge(
        spark,
        """
        MERGE INTO accounts t USING monthly_accounts_update s ON t.customer = s.customer
        WHEN MATCHED AND s.customer = 'Joe Shmoe' THEN UPDATE SET address = element_at(split(s.address, 'e'), 1)""",
    )
    assert ("Joe Shmoe", 200, "C") in result(spark, accounts)
