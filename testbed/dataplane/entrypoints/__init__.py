"""Scripts the data plane's own virtualenvs run by path (never imported by the testbed).

A package only so that the import contracts (``.importlinter``) see these files too.
"""
