"""Shared API of the model-serving add-on: models, CRD generation, constants.

The manager (hub) and the agent (spoke) share only this package.
"""
