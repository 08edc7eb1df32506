"""MLflow registry integration: URIs, loading, logging, tags, aliases, registry events."""
