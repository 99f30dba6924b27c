"""A Python producer for reactive-delayed-events: enqueue, cancel and reschedule events
that a Node ``DelayedEventService`` handles. The wire format is docs/wire-format.md."""

from .client import WIRE_FORMAT, DelayedEvents
from .errors import (
    DelayedEventError,
    InvalidArgumentError,
    InvalidDelayError,
    InvalidEventError,
    InvalidOptionError,
    NotReplicatedError,
    PayloadTooLargeError,
    RedisCallTimeoutError,
    RedisConnectionError,
    SerializationError,
)

__version__ = "0.6.0"

__all__ = [
    "DelayedEvents",
    "WIRE_FORMAT",
    "DelayedEventError",
    "InvalidArgumentError",
    "InvalidDelayError",
    "InvalidEventError",
    "InvalidOptionError",
    "NotReplicatedError",
    "PayloadTooLargeError",
    "RedisCallTimeoutError",
    "RedisConnectionError",
    "SerializationError",
]
