"""``rr console``: a local web page over the ``rr dlq`` operations (docs/reference/console.md).

``views/`` renders every page from plain data, one module per page (pure: everything shown is
escaped there, ``views/base.py``), ``routes/`` handles each page's requests, one module per
page, ``security.py`` holds the token, CSRF and host checks (pure) and ``access.py`` applies
them, ``jobs.py`` the group runs in progress, ``reads.py`` what the pages read from the
broker, and ``app.py`` the aiohttp application that puts them together (its routes).
aiohttp is an optional dependency: ``rr[console]``.
"""
