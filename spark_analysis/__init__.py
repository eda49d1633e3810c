"""PySpark reconciliation of message logs and fault logs."""
