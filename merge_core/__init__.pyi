"""The public names of merge_core: what type checkers read, and what merge_core/__init__.py loads
on first use (lazy_loader.attach_stub reads this file)."""

from .api.functions import (
    adopt as adopt,
    compact as compact,
    drop_table as drop_table,
    explain as explain,
    history as history,
    jdbc_target as jdbc_target,
    merge as merge,
    read_as_of as read_as_of,
    recover as recover,
    repair_history as repair_history,
    repair_journal as repair_journal,
    rollback as rollback,
    table_changes as table_changes,
    to_spec as to_spec,
    vacuum as vacuum,
)
from .api.streaming import (
    foreach_batch as foreach_batch,
)
from .api.writer import (
    MergeIntoWriter as MergeIntoWriter,
    merge_into as merge_into,
)
from .common.errors import (
    ConflictError as ConflictError,
    CorruptJournal as CorruptJournal,
    DuplicateMatchError as DuplicateMatchError,
    EngineRejected as EngineRejected,
    LengthViolation as LengthViolation,
    MergeError as MergeError,
    MetadataError as MetadataError,
    NotNullViolation as NotNullViolation,
    ParseError as ParseError,
    PlanViolation as PlanViolation,
    SpecError as SpecError,
    TargetError as TargetError,
    TargetRefused as TargetRefused,
    UnsupportedError as UnsupportedError,
    ValidationError as ValidationError,
)
from .common.result import (
    MergeResult as MergeResult,
    parse_message as parse_message,
)
from .lifecycle.merge_run import (
    MergeRun as MergeRun,
)
from .request.options import (
    MergeOptions as MergeOptions,
)
from .request.parse import (
    parse as parse,
)
from .request.quoting import (
    sql_literal as sql_literal,
    sql_name as sql_name,
)
from .request.spec import (
    MergeSpec as MergeSpec,
    WhenClause as WhenClause,
)
from .spark.session import (
    get_session as get_session,
)
