from edsb.cli import entry

entry()
