"""Tests of the project's shape: layering, imports, packaging, docs, examples, size limits."""
