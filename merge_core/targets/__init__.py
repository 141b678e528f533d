"""Row-change paradigms: how planned changes reach a target (copy-on-write files; PostgreSQL tables
by primary key, with PostgreSQL's own MERGE)."""
