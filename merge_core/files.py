"""File-system work SQL cannot do, through pyarrow's file systems (local, HDFS, S3, GCS)."""
from __future__ import annotations

import logging
from urllib.parse import unquote, urlparse

from pyarrow import fs

log = logging.getLogger("spark_merge")


def _resolve(uri: str) -> tuple[fs.FileSystem, str]:
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return fs.LocalFileSystem(), unquote(parsed.path)
    return fs.FileSystem.from_uri(uri)


def remove_tree(uri: str) -> bool:
    """Delete a directory tree; False (with a warning) when it cannot be reached."""
    try:
        filesystem, path = _resolve(uri)
        if filesystem.get_file_info(path).type == fs.FileType.NotFound:
            return True
        filesystem.delete_dir(path)
        return True
    except (OSError, ValueError, NotImplementedError) as e:
        log.warning("could not remove %s: %s (vacuum will retry)", uri, e)
        return False


def exists(uri: str) -> bool | None:
    """Whether a path exists; None when its file system cannot be reached from here."""
    try:
        filesystem, path = _resolve(uri)
        return filesystem.get_file_info(path).type != fs.FileType.NotFound
    except (OSError, ValueError, NotImplementedError) as e:
        log.warning("cannot check %s: %s", uri, e)
        return None
