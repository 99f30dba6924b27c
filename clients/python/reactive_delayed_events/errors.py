"""The errors a producer raises: the classes and codes of the Node package's
(src/core/errors.ts), so a program that handles both matches on one ``code``."""

from typing import Optional


class DelayedEventError(Exception):
    """Base of every error raised on purpose; ``code`` is stable for programs to match on."""

    code = "DELAYED_EVENT"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidEventError(DelayedEventError):
    """The event itself is refused (its type name, id, payload or context); nothing was sent."""

    code = "INVALID_EVENT"

    def __init__(self, detail: str) -> None:
        super().__init__("Invalid event: %s." % detail)


class InvalidDelayError(DelayedEventError):
    """A delay or date out of range; nothing was sent."""

    code = "INVALID_DELAY"

    def __init__(self, detail: str) -> None:
        super().__init__(
            "Invalid delay: %s. Pass delay_ms, a whole number of milliseconds >= 0, "
            "or at, a timezone-aware datetime." % detail
        )


class InvalidArgumentError(DelayedEventError):
    """A call's argument or option is refused (an unknown option key too); nothing was sent."""

    code = "INVALID_ARGUMENT"

    def __init__(self, argument: str, detail: str) -> None:
        super().__init__("Invalid %s: %s." % (argument, detail))
        self.argument = argument


class InvalidOptionError(DelayedEventError):
    """A constructor option is refused."""

    code = "INVALID_OPTION"

    def __init__(self, option: str, detail: str) -> None:
        super().__init__("Invalid option %s: %s." % (option, detail))
        self.option = option


class SerializationError(InvalidEventError):
    """The payload cannot be written as the JSON the Node service reads; nothing was sent.

    An InvalidEventError too (the event as given cannot be stored), so one ``except`` takes
    every refused event; its ``code`` is Node's."""

    code = "SERIALIZATION_FAILED"

    def __init__(self, type_name: str, detail: str) -> None:
        DelayedEventError.__init__(
            self,
            "Event of type '%s' cannot be serialized to JSON (%s); remove values JSON cannot "
            "hold as the Node service reads them." % (type_name, detail)
        )


class PayloadTooLargeError(InvalidEventError):
    """The stored body would be larger than ``max_payload_bytes``; nothing was sent (an InvalidEventError too)."""

    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, type_name: str, size: int, limit: int) -> None:
        DelayedEventError.__init__(
            self,
            "Event of type '%s' serializes to %d bytes, over the limit of %d (option "
            "max_payload_bytes); store large data elsewhere and enqueue a reference."
            % (type_name, size, limit)
        )
        self.bytes = size
        self.limit = limit


class NotReplicatedError(DelayedEventError):
    """Stored on the master, but fewer replicas than ``wait_replicas`` confirmed in time."""

    code = "NOT_REPLICATED"

    def __init__(self, acknowledged: int, required: int, timeout_ms: int) -> None:
        super().__init__(
            "The event is stored on the master, but only %d of %d replicas confirmed it within "
            "%d ms (option wait_replicas); it may be lost if the master fails now. Enqueueing it "
            "again is safe: a stored event is left as it is." % (acknowledged, required, timeout_ms)
        )
        self.acknowledged = acknowledged
        self.required = required


class RedisCallTimeoutError(DelayedEventError):
    """Redis did not answer a call in time (the client's ``socket_timeout``); it may have run."""

    code = "REDIS_TIMEOUT"

    def __init__(self, detail: str, cause: Optional[BaseException] = None) -> None:
        super().__init__(
            "Redis did not answer in time (%s); it may be down, frozen or unreachable. An enqueue that "
            "timed out may still have been stored: enqueueing it again is safe." % detail
        )
        self.__cause__ = cause


class RedisConnectionError(DelayedEventError):
    """Redis cannot be used: ``reason`` is 'refused', 'auth', 'tls', 'timeout', 'permission' or 'other'."""

    code = "REDIS_CONNECTION"

    def __init__(self, reason: str, detail: str, cause: Optional[BaseException] = None) -> None:
        super().__init__("Redis cannot be used (%s): %s." % (reason, detail))
        self.reason = reason
        self.__cause__ = cause
