"""Tests of lyra_gym.harness and the collector: compare, sweep, reports, Ray, benchmark scripts."""
