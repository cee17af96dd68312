"""The fleet command line: what runs where on the fleet, why not, and what a change would do.

``model-serving-addon status|explain|clusters|rollout ...`` (also the kubectl plugin
``kubectl modelserving ...``) reads the hub with the user's kubeconfig and context. The views
are pure functions of what it read (:mod:`addon_cli.views`); :mod:`addon_cli.hub` does the
reading; :mod:`addon_cli.main` parses the command line and maps failures to exit codes.

It may import :mod:`addon_api` and :mod:`addon_manager` (its rendering, so ``render`` and
``diff`` print what the manager writes), never :mod:`addon_agent`, the ``model_serving_addon``
command above it or the harness; of the product, only that command imports it
(``.importlinter``).
"""
