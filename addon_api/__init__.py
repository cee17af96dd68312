"""Shared API of the model-serving add-on: models, CRD generation, sealing, reasons, constants.

The contract between the roles: the manager (hub) and the agent (spoke) share only this
package, and the fleet command line and the ``model-serving-addon`` command build on it too.
It is the bottom floor and may import no other package of the project (no role, no command
line, no harness); every other product package may import it (``.importlinter``).
"""
