"""kafka_call: retriable errors are tried again with back-off until the deadline, others raise at once."""

from __future__ import annotations

import threading

import pytest
from kafka import errors

from ragmon.collectors.kafka_calls import KafkaCallFailed, is_retriable, kafka_call


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(*outcomes):
    """A call that raises (or returns) each of ``outcomes`` in turn, counting its calls."""
    outcomes = list(outcomes)
    calls = []

    def call():
        calls.append(1)
        outcome = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return call, calls


def test_a_retriable_error_is_tried_again_until_it_succeeds():
    time = FakeTime()
    call, calls = failing(errors.CoordinatorLoadInProgressError(), errors.CoordinatorNotAvailableError(),
                          errors.NotCoordinatorError(), {"offsets": 3})
    assert kafka_call(call, "listing offsets", clock=time.clock, sleep=time.sleep) == {"offsets": 3}
    assert len(calls) == 4
    assert time.sleeps == [0.1, 0.2, 0.4]  # doubling back-off


def test_errors_retriable_in_practice_but_not_flagged_are_tried_again():
    time = FakeTime()
    call, calls = failing(errors.BrokerNotAvailableError(), errors.RebalanceInProgressError(), "done")
    assert kafka_call(call, "x", clock=time.clock, sleep=time.sleep) == "done"
    assert len(calls) == 3
    for error in (errors.KafkaTimeoutError(), errors.NodeNotReadyError(), errors.KafkaConnectionError(),
                  errors.UnknownTopicOrPartitionError(), errors.RequestTimedOutError()):
        assert is_retriable(error), error


def test_a_non_retriable_error_is_raised_at_once_unchanged():
    time = FakeTime()
    for error in (errors.TopicAlreadyExistsError("t"), errors.GroupAuthorizationFailedError(), ValueError("bug")):
        call, calls = failing(error, "never")
        with pytest.raises(type(error)) as raised:
            kafka_call(call, "x", clock=time.clock, sleep=time.sleep)
        assert raised.value is error and len(calls) == 1
    assert time.sleeps == []


def test_at_the_deadline_the_last_error_is_raised_naming_what_was_being_done():
    time = FakeTime()
    first, last = errors.CoordinatorLoadInProgressError("first"), errors.CoordinatorNotAvailableError("last")
    call, calls = failing(*[first] * 5, last)
    with pytest.raises(KafkaCallFailed) as raised:
        kafka_call(call, "listing the offsets of group g", deadline=5.0, maximum=1.0, clock=time.clock,
                   sleep=time.sleep)
    message = str(raised.value)
    assert "listing the offsets of group g" in message and "CoordinatorNotAvailableError" in message
    assert raised.value.last is last and raised.value.__cause__ is last
    assert time.now == pytest.approx(5.0)  # slept up to the deadline, no further
    assert max(time.sleeps) == 1.0  # back-off capped at `maximum`
    assert len(calls) == len(time.sleeps) + 1
    assert not is_retriable(raised.value)  # an outer kafka_call does not start it over


def test_a_stop_ends_the_waiting_at_once():
    stop = threading.Event()
    stop.set()
    call, calls = failing(errors.CoordinatorNotAvailableError())
    with pytest.raises(KafkaCallFailed, match="stopped"):
        kafka_call(call, "x", deadline=60, initial=30, stop=stop)
    assert len(calls) == 1
