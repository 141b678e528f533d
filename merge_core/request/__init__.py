"""What the user asked for, independent of where it came from: the spec, its parser (sqlglot), the
options declared once, the quoting of user values, and schema evolution's rules for structs."""
