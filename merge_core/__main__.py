import sys

from merge_core.api.cli import main

sys.exit(main())
