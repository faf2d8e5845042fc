from typing import Any

from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


class Pagination(PageNumberPagination):
    """Every list answers {count, next, previous, results}; `page_size` up to 200. A `page_size` that
    is not a number from 1 to 200 is refused rather than silently replaced by the default."""

    page_size_query_param = "page_size"
    max_page_size = 200
    last_page_strings = ()  # the schema says `page` is a number; DRF's "last" is not one

    def get_page_size(self, request: Request) -> int | None:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            raise exceptions.ValidationError(
                {self.page_size_query_param: [f"A whole number from 1 to {self.max_page_size}."]}
            )
        return super().get_page_size(request)

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        self.check_query(request)
        return super().paginate_queryset(queryset, request, view)

    def check_query(self, request: Request) -> None:
        """Refuse a bad `page` or `page_size` also where the answer does not come in pages (a CSV)."""
        self.get_page_size(request)
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and not (raw.isdigit() and int(raw) >= 1) and raw not in self.last_page_strings:
            raise exceptions.ValidationError({self.page_query_param: ["A whole number from 1."]})

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """The bounds in the schema too, so a client (or a fuzzer) knows what is refused."""
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        bounds = {
            self.page_query_param: {"minimum": 1},
            self.page_size_query_param: {"minimum": 1, "maximum": self.max_page_size},
        }
        for parameter in parameters:
            parameter["schema"] = {**parameter["schema"], **bounds.get(parameter["name"], {})}
        return parameters
