"""The all-in-one OpenStack the integration tests run against (tools/aio)."""
