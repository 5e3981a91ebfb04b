"""Own the experiment: launch a server, benchmark it, stop it, ingest what it wrote.

:func:`launch` is ``logpipe launch``: it writes the run's manifest before anything starts
(so the environment is captured by construction, with the packages of the interpreter
that runs the server), supervises the server as a process group, waits until it is
ready, asks it what it is (``/server_info``), runs the bench command, stops everything
(SIGINT, then SIGTERM, then SIGKILL of the whole group) and calls the same
:func:`logpipe.ingest.ingest_paths` the CLI uses.  :func:`run_plan` is ``logpipe ab``:
the arms of a plan launched in turn (ABBA or seeded random order), in one session, then
judged by :mod:`logpipe.analysis.compare` with the rounds of an arm pooled.

Invariants: no child process outlives :func:`launch` (Ctrl-C included); what the server
and the bench wrote is kept on disk whatever happens; the database is only written by
ingest, one transaction per file.

Rooms: :mod:`.supervise` (the process group), :mod:`.launch` (one launch and its ingest),
:mod:`.plan` (plans and schedules), :mod:`.run` (``ab``).
"""
