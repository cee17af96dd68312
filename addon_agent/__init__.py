"""Spoke-side agent: installs the serving stack and reports status."""
