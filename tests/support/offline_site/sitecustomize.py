"""Started with this directory on PYTHONPATH and $EDSB_TEST_OFFLINE naming a file, a Python process (`inspect eval`,
say) can open no connection and look up no name beyond loopback, and writes each attempt to that file: a child
process as offline as a machine without network, whatever the machine running the tests has."""

import atexit
import os

if os.environ.get("EDSB_TEST_OFFLINE"):
    from tests.support.network import guard_sockets

    _attempts = guard_sockets(setattr, allow_loopback=True)

    @atexit.register
    def _report() -> None:
        with open(os.environ["EDSB_TEST_OFFLINE"], "a", encoding="utf-8") as log:
            log.writelines(f"{attempt!r}\n" for attempt in _attempts)
