"""Shared by every layer: the errors users see, what a run returns, and the renderer of the dbt
package's macros (the one SQL compiler)."""
