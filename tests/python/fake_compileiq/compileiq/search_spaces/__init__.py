"""The fake's search spaces."""
