"""Benchmarks run by ``feedha bench``: each figure is printed beside a ceiling measured in the same run."""
