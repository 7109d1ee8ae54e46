"""The rejection a strict fake endpoint answers with, where the real API would reject too."""

from __future__ import annotations


class StrictAPIError(Exception):
    """A request the real API would refuse: ``status`` and the API's own wording."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
