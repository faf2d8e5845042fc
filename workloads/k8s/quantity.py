"""Kubernetes resource quantities ("500m", "64", "512Gi", "1e3") as CPU millicores and memory MiB.

Only the forms Nodes and Pods carry (apimachinery `resource.Quantity`): a decimal number, an
optional exponent, and a binary (Ki..Ei) or decimal (m, k, M..E) suffix. Unreadable values count as
0, like a missing one, so a malformed pod never stops the admission cycle.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE]?)$")


def value(text: object) -> Decimal:
    """The quantity as a number: the API server stores its canonical form ("10000" comes back "10k")."""
    match = _QUANTITY.match(str(text or "").strip())
    if match is None:
        return Decimal(0)
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        return Decimal(0)


def millicores(text: object) -> int:
    """CPU in millicores, rounded up (the API server rounds requests up too)."""
    return int((value(text) * 1000).to_integral_value(rounding="ROUND_CEILING"))


def mebibytes(text: object, *, up: bool = False) -> int:
    """Memory in MiB, rounded down (a node's allocatable) or `up` (a pod's request), so a node's
    free memory is never overstated."""
    rounding = "ROUND_CEILING" if up else "ROUND_FLOOR"
    return int((value(text) / 1024**2).to_integral_value(rounding=rounding))
