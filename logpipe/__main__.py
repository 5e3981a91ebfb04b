"""``python3 -m logpipe ...``: the command line without the installed script (a checkout on
``PYTHONPATH``, as on a locked-down GPU machine)."""

from logpipe.cli import main

main()
