"""``cronwheel jobs|runs|dlq|tenants|keys …``: the API from the terminal.

Human tables by default (ids and times never cut: see :mod:`cronwheel.cli.tables`),
tab-separated values in a pipe, ``--json`` for scripts. A job is named by its id, the
start of its id or its name (:mod:`cronwheel.cli.names`). One module per command family:
jobs, runs (and the dead-letter queue), admin (tenants and keys).

Exit codes scripts can rely on: 0 ok · 1 other error · 2 bad input (usage, 400, 422, a
job name that names several) · 3 not found (404) · 4 conflict (409, 412, 428) · 5 not
allowed (401, 403) · 6 server unreachable or store unavailable (503) · 7 over quota (429).
Each module is imported on its own when its command runs (see :mod:`cronwheel.cli`).
"""
