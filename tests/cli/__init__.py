"""Tests of the lyra-gym command line and the rules every command follows (outputs, errors, paths)."""
