from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """Every list answers {count, next, previous, results}; `page_size` up to 200."""

    page_size_query_param = "page_size"
    max_page_size = 200
