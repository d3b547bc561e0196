"""The test guest image: recipe (data) and build (Debian packages only)."""
