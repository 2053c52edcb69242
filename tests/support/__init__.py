"""Helpers shared by the tests (imported as ``support.<module>``; tests/ is on pytest's path).

No test module imports another test module: what two tests share lives here.
"""
