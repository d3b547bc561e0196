"""RESULTS arguments -> runs, for the report: the records loader of
``vnetbench.results.load`` (one loader for every reader of records), re-exported so the
report's modules and callers keep their names. A run is one argument (a records.jsonl
file or a directory holding one): its name tells apart the same configuration measured
in several runs."""

from __future__ import annotations

from vnetbench.results.load import FIX, MAX_BYTES, RECORDS, Run, load, read, record, records_path

__all__ = ["FIX", "MAX_BYTES", "RECORDS", "Run", "load", "read", "record", "records_path"]
