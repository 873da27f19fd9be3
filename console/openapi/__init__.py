"""``GET /openapi.json``: an OpenAPI 3.1 document generated from the live route tables.

Nothing here lists routes: ``routes`` walks the mounted resource tree (the console's Klein
url maps, the gateway's dispatch tables, the task routes, the probes), ``families`` derives
security and error shape from each path's mount point, ``shapes`` holds the request and
response shapes the contracts fix, and ``document`` puts them together.
"""
