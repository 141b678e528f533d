"""The merge service's HTTP side alone: no Spark is reached."""

from __future__ import annotations

import pytest


def test_the_merge_service_answers_only_with_its_token_and_refuses_a_malformed_submission():
    """The HTTP side alone (no Spark is reached): a request without the token, or with another one, is
    refused; a submission that is not an object naming its run key and request is a 400."""
    import threading
    import urllib.error
    import urllib.request
    from http.server import ThreadingHTTPServer

    from merge_core.api import service_client
    from merge_core.api.merge_service import MergeService, connect_sessions, handler

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(MergeService(connect_sessions("sc://127.0.0.1:1")), "s3cret"))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        for token in (None, "wrong"):
            with pytest.raises(service_client.MergeError, match="refused GET /merges/k: 401"):
                service_client.status(url, "k", token)
        assert service_client.status(url, "k", "s3cret") == {"run_key": "k", "state": "unknown"}
        for body in (b"[1]", b'{"run_key": "k"}', b"not json"):
            request = urllib.request.Request(
                f"{url}/merges", data=body, method="POST", headers={"Authorization": "Bearer s3cret"}
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 400
        assert service_client.status(url, "k", "s3cret")["state"] == "unknown"  # nothing was started
    finally:
        httpd.shutdown()
