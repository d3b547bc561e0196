"""Reproducing a seed's data-plane table: its figures (data files), claims and verdicts."""
