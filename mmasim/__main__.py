import sys

from mmasim.cli.main import main

sys.exit(main())
