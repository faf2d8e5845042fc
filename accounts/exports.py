"""CSV downloads (the audit log, GPU-hours, usage): one place that writes them, so every export
neutralises spreadsheet formulas the same way."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from django.http import HttpResponse

# A cell starting with one of these is a formula (or starts one) in Excel, LibreOffice and Sheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """The value as a spreadsheet shows it and never runs it: text that would start a formula gets
    a leading apostrophe (numbers stay numbers; a negative number is not text)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_download(header: Sequence[str], rows: Iterable[Sequence[Any]], filename: str) -> HttpResponse:
    """Rows under a header as a CSV attachment named `filename`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
