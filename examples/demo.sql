-- The main demo job: the four-clause example of Trino's MERGE documentation on a
-- table partitioned by region. Kim Park and Ann Lee move to another region, so
-- their rows change partition; only the regions that hold a changed row are rewritten.
MERGE INTO demo.accounts t USING demo.monthly_accounts_update s
    ON (t.customer = s.customer)
    WHEN MATCHED AND s.address = 'Berkeley' THEN
        DELETE
    WHEN MATCHED AND s.customer = 'Joe Shmoe' THEN
        UPDATE SET purchases = t.purchases + 100.0
    WHEN MATCHED THEN
        UPDATE SET purchases = s.purchases + t.purchases, address = s.address, region = s.region
    WHEN NOT MATCHED THEN
        INSERT (customer, purchases, address, region)
        VALUES (s.customer, s.purchases, s.address, s.region)
