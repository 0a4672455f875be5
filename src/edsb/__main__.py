from edsb.cli import main

main()
