"""The event forest (OASIS): a per-camera, AVL-balanced hierarchy of event summaries, searched
with greedy lineage pruning (tree.py), its retrieval matrices and node helpers (index.py), its
rows in SQLite (nodes.py), and its invariant check with the seed's merge policy for comparison
(check.py)."""
from .check import reference_policy_depth
from .nodes import ForestNodeRepository
from .tree import EventForest, ForestStructure

__all__ = ["EventForest", "ForestNodeRepository", "ForestStructure", "reference_policy_depth"]
