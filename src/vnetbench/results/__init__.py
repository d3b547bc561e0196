"""Result records: one measured point with its labels, samples, spread and provenance.

record (the Result, SCHEMA_VERSION) -> store (appended as measured) -> load (the one
reader, against schemas/record.schema.json; conform: its fast verdict) -> stats/spread."""
