"""Where the tests find the official benchmark files: $EDSB_DATA, else the steering repository's copy beside this
checkout (CI puts it at ../shared/edsb-data)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EDSB_DATA", REPO.parent / "shared" / "edsb-data"))
