"""The warm server's state file, without a server: a hint a user can copy or edit."""

from __future__ import annotations

import subprocess


def test_stop_signals_no_process_a_stale_state_file_names(tmp_path):
    """The state file is a hint a user can copy or edit, and after a reboot its pid may belong to another
    process: `server stop` forgets the state but signals only a merge service started for this warehouse."""
    import json

    from merge_core.spark import server

    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / server.STATE).write_text(json.dumps({"port": 1, "merges_port": 1, "pid": bystander.pid}))
        assert server.stop(str(tmp_path), timeout=1)
        assert not (tmp_path / server.STATE).exists()
        assert bystander.poll() is None  # still running: it was never signalled
    finally:
        bystander.kill()
        bystander.wait()
