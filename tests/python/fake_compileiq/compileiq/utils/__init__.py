"""The fake's utilities."""
