"""The spark_merge dbt package (macros/ and dbt_project.yml), shipped as package data.

dbt projects install it with a `local:` or git entry in packages.yml; merge_core
renders the very same macro files with jinja2 (see merge_core/common/macros.py).
"""

import sys
from pathlib import Path

if "dbt.plugins.manager" in sys.modules:  # dbt is looking for plugins (dbt_plugin.py); anyone else is not
    from dbt_macros.dbt_plugin import plugins as plugins

PACKAGE_DIR = Path(__file__).resolve().parent
MACRO_DIR = PACKAGE_DIR / "macros"
