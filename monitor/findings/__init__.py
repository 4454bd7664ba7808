"""Findings: which passages of which trace broke which rule, kept for the people paged by a count
(``GET /api/v1/findings``, ``ragmon findings list``, ``ragmon trace show``)."""
