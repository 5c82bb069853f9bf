"""The fake's worker types."""


class WorkerTypes:
    MANUAL = "manual"
