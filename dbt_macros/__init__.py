"""The spark_merge dbt package (macros/ and dbt_project.yml), shipped as package data.

dbt projects install it with a `local:` or git entry in packages.yml; merge_core
renders the very same macro files with jinja2 (see merge_core/common/macros.py).
"""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
MACRO_DIR = PACKAGE_DIR / "macros"
