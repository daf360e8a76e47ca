"""``python -m evalledger``: the same command as the ``evalledger`` script."""

import sys

from evalledger.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
