"""Bundled sample data (see README.md here)."""
