"""``merge_core.session.get_session``, the name earlier releases documented; ``merge_core.get_session``
is the same function (it lives in ``merge_core.spark.session``)."""

from merge_core.spark.session import embedded_conf, get_session, home_dir

__all__ = ["embedded_conf", "get_session", "home_dir"]
