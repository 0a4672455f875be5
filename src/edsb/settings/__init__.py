"""A run's settings, declared once: each field's type, default, bound, help, panel, option and config-file key
(`run`), how a declaration is written and read (`declare`), and the fixed words they use (`vocab`). The ground
floor: every package may import it, and it imports nothing of edsb's but the version.

To add a setting: one field in `settings/run.py`, written with `setting(...)`. Its option of `edsb run` (and of
`check-model`, if `commands` says so), its config-file keys, its line in config.json and its resume hint follow;
`tests/settings/test_declaration.py` checks every reader against it."""
