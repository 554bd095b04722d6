"""``rr console``: a local web page over the ``rr dlq`` operations (docs/reference/console.md).

``html.py`` renders every page from plain data (pure: everything shown is escaped there),
``security.py`` holds the token, CSRF and host checks (pure), ``jobs.py`` the group runs in
progress, ``reads.py`` what the pages read from the broker, and ``app.py`` the aiohttp
application that puts them together. aiohttp is an optional dependency: ``rr[console]``.
"""
