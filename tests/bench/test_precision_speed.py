"""The table of bench/precision_speed.py; no model is loaded."""

from bench.precision_speed import table


def test_table_gives_each_backends_seconds_and_the_bfloat16_ratio():
    lines = [{"backend": "torch", "policy": "float32", "forward_seconds": 2.0},
             {"backend": "torch", "policy": "mixed_bfloat16", "forward_seconds": 44.0},
             {"backend": "jax", "policy": "float32", "forward_seconds": 1.6}]
    rows = table(lines).splitlines()
    assert rows[2] == "| torch | 2.000 | 44.000 | 22.0x |"
    assert rows[3] == "| jax | 1.600 | - | - |"
