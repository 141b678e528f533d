"""Airflow provider for spark-merge (operator, hook, connection type): see the Airflow issue."""
