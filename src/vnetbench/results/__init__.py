"""Result records: one measured point with its labels, samples, spread and provenance."""
