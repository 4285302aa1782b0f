"""Demonstrations that belong to one lesson and are not reusable building blocks."""
