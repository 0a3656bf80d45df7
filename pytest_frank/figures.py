"""Measured numbers as people write them: 2190 tok/s, 0.0024 s, never 2.19e+03."""

from __future__ import annotations

import math
from decimal import Decimal

COUNT = 15  # significant digits that print any count a server reports in full


def number(value: float, digits: int = 3) -> str:
    """`value` rounded to `digits` significant digits, in positional notation."""
    if not math.isfinite(value):
        return str(value)
    return format(Decimal(f"{value:.{digits}g}"), "f")
