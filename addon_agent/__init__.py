"""Spoke-side agent: installs the serving stack and reports status.

Its modules sit in four layers; a module imports only from its own layer's lower rows and
the layers below, never above (``agent.importlinter.ini``, ``docs/architecture.md``):

* **shell**: ``main`` and ``release`` (the programs), ``handlers`` (registers the kopf
  handlers, each calling one method), ``agent`` (the state and the reconciles: read,
  decide, write the one status) and ``background`` (the loops). May import every layer.
* **cluster I/O**: reads and writes of the cluster, the disk and the network, deciding
  nothing: ``planner`` (bundle + facts -> plan) and ``applier`` (plan -> writes, prune,
  uninstall), ``observe`` (the reads the decisions need), ``webhook_ca``, ``namespaces``,
  ``delivery``, ``identity``, ``ledger``, ``lease``, ``bundle_source``, ``login``,
  ``metrics``, ``namespace_waits``; below them ``inventory``, ``crd_cache``,
  ``bundle_render``, ``kustomize``; lowest ``kube``, the client. May import the pure and
  base layers.
* **pure**: decisions and planning, no I/O (no cluster client, no kopf): ``decisions`` (the
  ServingPlatform reconcile: what was read -> the status to write), ``planning`` (the
  generic planner), ``dataplane``, ``ownership``, ``removal``, ``status``, ``tenancy``,
  ``storage``, ``certs``; below them one module per stack, ``kserve_plan`` and
  ``modelmesh_plan`` (neither imports the other); lowest ``pod_security``, ``profiles``,
  ``manifests``. May import the base layer and ``addon_api``.
* **base**: ``stacks`` (the pins), ``labels``, ``config``. Import only ``addon_api``.
"""
