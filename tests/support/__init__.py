"""Helpers shared by tests: real servers and fixtures, no mocks."""
