"""Traffic executors: each builds an argv and parses the tool's output; no transport inside."""
