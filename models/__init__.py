"""Pydantic models: the typed schema of every config file and of records crossing a boundary."""
