"""The harness: many runs at once (compare, sweep, the Ray backend), their specs, calibration,
reports, TensorBoard logs and trace statistics.
"""
