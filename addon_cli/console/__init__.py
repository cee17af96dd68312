"""The fleet console: the hub's intents and clusters in a web page, as the signed-in user.

``model-serving-addon console`` serves a PatternFly page (built from ``web/`` with the npm
registry's packages into ``static/``) and a small JSON and server-sent-events API that reads
the hub **with the user's own credentials**: the token an authenticating proxy in front of it
passes (``X-Forwarded-Access-Token``, ``Authorization: Bearer``), or, run by one person on
their machine, their kubeconfig. The console's own identity is never used to read or write the
hub, so the hub's RBAC and the add-on's tenancy decide what each user sees
(:mod:`addon_cli.console.credentials`). What a page shows is computed by the same pure views
as the command line's (:mod:`addon_cli.views`).

May import: :mod:`addon_cli` (its views), :mod:`addon_api`.
"""
