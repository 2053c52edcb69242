"""The event forest (OASIS): a per-camera, AVL-balanced hierarchy of event summaries, searched
with greedy lineage pruning (tree.py), its retrieval matrices and node helpers (index.py), their
mirror on a torch device with the greedy run there (device.py, imported only for a torch
device), its rows in SQLite (nodes.py), and its invariant check with the seed's merge policy for
comparison (check.py)."""
from .check import reference_policy_depth
from .nodes import ForestNodeRepository
from .tree import EventForest, ForestStructure

__all__ = ["EventForest", "ForestNodeRepository", "ForestStructure", "reference_policy_depth"]
