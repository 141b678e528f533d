"""One lifecycle for every commit (run.py): a merge's begin and plan (merge_run.py), merge-on-read
upserts and compaction (merge_on_read.py), and the clean-up of what dead merges left."""
