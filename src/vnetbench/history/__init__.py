"""Runs kept in a database and judged over time (issue 49).

``db`` opens the store (SQLite by default, PostgreSQL by URL) and migrates its one schema;
``ingest`` imports run directories through the one records loader (``results.load``);
``query`` finds runs and their cells; ``compare`` judges two runs cell by cell with a test
fit for few repetitions; ``regress`` finds change points over each cell's series with
Apache Otava; ``thresholds`` reads the per-metric rules and the acknowledgement file;
``render`` prints tables, JSON and JUnit XML; ``commands`` is the CLI.
This package sits above ``results/`` and beside ``report/``; it imports no backend.
"""
