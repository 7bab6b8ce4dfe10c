"""Master/local: the results folder's writes, guarded (`WriteGuard`). The first write that fails — disk full, the
folder removed (checked every tick: files open in a removed folder would take writes that go nowhere) — says so in one
line naming the file (`results.outcome.write_failure`), sets the exit code `EXIT_WRITE_FAILED` and stops the load; the
files written as the run goes are written no more, the final summary.json is still tried (whole or not at all)."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_locust.results.outcome import EXIT_WRITE_FAILED, write_failure

logger = logging.getLogger("llm_locust")


class WriteGuard:
    """The writes into `folder`; `stop_load()` ends the test (called once, at the first failure)."""

    def __init__(self, environment: Any, folder: Path, stop_load: Callable[[], None]) -> None:
        self.environment = environment
        self.folder = folder
        self._stop_load = stop_load
        self.error: str | None = None  # the line of the first failure

    def write(self, path: Path, job: Callable[[], Any], always: bool = False) -> bool:
        """Run `job`, which writes `path`: True when it did; False when it failed (`failed`) or was skipped, after an
        earlier failure, unless `always`."""
        if self.error is not None and not always:
            return False
        try:
            job()
        except OSError as e:
            self.failed(path, e)
            return False
        return True

    def check_folder(self) -> None:
        """A results folder removed (or replaced by a file) is a failed write."""
        if self.error is None and not self.folder.is_dir():
            self.failed(self.folder, FileNotFoundError(errno.ENOENT, "the results folder was removed"))

    def failed(self, path: Path, error: OSError) -> None:
        """Writing `path` failed: the first time, say so, set the exit code and stop the load."""
        if self.error is not None:
            return
        self.error = write_failure(path, error)
        logger.error("%s", self.error)
        self.environment.process_exit_code = EXIT_WRITE_FAILED
        self._stop_load()
