"""Handlers of this project's tools; importable because toolrt puts the project root on sys.path."""
