"""Structured merge: the field sets, typed merges and field ownership of server-side apply."""
