"""The public API: the functions ``merge_core`` exports, the command line, the DataFrame builder."""
