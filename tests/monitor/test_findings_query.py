"""Numbers in a findings query are read strictly: ASCII digits within a BIGINT, finite times
between 1970 and the year 9999, each refusal naming the parameter."""

from __future__ import annotations

import pytest

from ragmon.monitor.findings.query import QueryError, parse_since, query_from

NOW = 1_796_000_000.0
MAX_BIGINT = 2**63 - 1  # what SQLite and PostgreSQL compare an id with


@pytest.mark.parametrize(("params", "named"), [
    ({"cursor": "99999999999999999999"}, "cursor"),  # was a 500: OverflowError in the database driver
    ({"cursor": str(MAX_BIGINT + 1)}, "cursor"),
    ({"cursor": "0" * 30 + "9" * 20}, "cursor"),
    ({"cursor": "9" * 5000}, "cursor"),
    ({"cursor": "-1"}, "cursor"), ({"cursor": "+5"}, "cursor"), ({"cursor": " 5"}, "cursor"),
    ({"cursor": "5_000"}, "cursor"), ({"cursor": "١٢"}, "cursor"), ({"cursor": "1e3"}, "cursor"),
    ({"limit": "١٢"}, "limit"), ({"limit": "５"}, "limit"), ({"limit": "10_0"}, "limit"),
    ({"since": "nan"}, "since"), ({"since": "inf"}, "since"), ({"since": "-inf"}, "since"),
    ({"since": "9" * 400}, "since"), ({"since": "1e400"}, "since"), ({"since": "-5"}, "since"),
    ({"since": "١٢h"}, "since"), ({"since": "١٧٩٦٠٠٠٠٠٠"}, "since"), ({"since": "99999999999999w"}, "since"),
    ({"since": "300000000000"}, "since"), ({"since": "1969-12-31T23:59:59Z"}, "since"),
])
def test_out_of_range_and_non_ascii_numbers_are_refused_by_name(params, named):
    with pytest.raises(QueryError, match=f"^{named}: "):
        query_from(params, NOW)


def test_good_numbers_still_read():
    assert query_from({"cursor": str(MAX_BIGINT), "limit": "0100"}, NOW).cursor == MAX_BIGINT
    assert query_from({"limit": "1000"}, NOW).limit == 1000
    assert parse_since("1796000000.5", NOW) == 1_796_000_000.5
    assert parse_since("1.5h", NOW) == NOW - 5400
    assert parse_since("9999-12-31T23:59:59Z", NOW) == 253402300799.0
    assert parse_since("2026-12-01T01:00:00+01:00", NOW) == 1_796_083_200.0
    assert query_from({"trace_id": "t1"}, NOW).trace_id == "t1"
