"""The checkout the suite runs from: its root, whichever folder of tests/ a test lives in (the
README, docs/, examples/, pyproject.toml and the package are read from there)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/checkout.py
