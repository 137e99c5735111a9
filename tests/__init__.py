"""The test suite: one folder per wing of the code (see docs/layout.md "Tests")."""
