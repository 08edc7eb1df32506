"""Audit configuration: the pydantic schema and ready YAML configs."""
