"""The benchmarks' task tables: which task is averaged in which group, and the names each
release (and OASIS's copies) spells them with."""
from __future__ import annotations

# OVO-Bench: task -> group (Real-Time visual perception, Backward tracing, Forward active responding)
OVO_GROUPS = {**{t: "RT" for t in ("OCR", "ACR", "ATR", "STU", "FPD", "OJR")},
              **{t: "BT" for t in ("EPM", "ASI", "HLD")}, **{t: "Fwd" for t in ("REC", "SSR", "CRR")}}
OVO_FORWARD = ("REC", "SSR", "CRR")

# StreamingBench: abbreviation (the paper's table columns) -> (axis, the release's name)
SB_TASKS = {
    "OP": ("Real-Time", "Object Recognition"), "CR": ("Real-Time", "Causal Reasoning"),
    "CS": ("Real-Time", "Clips Summarize"), "ATP": ("Real-Time", "Attribute Recognition"),
    "EU": ("Real-Time", "Event Understanding"), "TR": ("Real-Time", "Text-Rich Understanding"),
    "PR": ("Real-Time", "Prospective Reasoning"), "SU": ("Real-Time", "Spatial Understanding"),
    "ACP": ("Real-Time", "Action Recognition"), "CT": ("Real-Time", "Counting"),
    "ER": ("Omni-Source", "Emotion Recognition"), "SCU": ("Omni-Source", "Scene Understanding"),
    "SD": ("Omni-Source", "Source Discrimination"), "MA": ("Omni-Source", "Multimodal Alignment"),
    "MCU": ("Contextual", "Misleading Context Understanding"), "ACU": ("Contextual", "Anomaly Context Understanding"),
    "SQA": ("Contextual", "Sequential Question Answering"), "PO": ("Contextual", "Proactive Output"),
}
SB_AXES = ("Real-Time", "Omni-Source", "Contextual")
# other spellings: the paper's ("... Perception") as OASIS's copies use them, and OASIS's MCU name
_SB_ALIASES = {"object perception": "OP", "attribute perception": "ATP", "action perception": "ACP",
               "misleading context recognition": "MCU", "clips summarization": "CS"}
SB_BY_NAME = {**{full.lower(): abbr for abbr, (_, full) in SB_TASKS.items()}, **_SB_ALIASES}

# StreamBench (StreamChat's open-ended benchmark, OASIS's third): its question classes
STREAMBENCH_CLASSES = {"OS": "Object Search", "LM": "Long-term Memory Search", "SM": "Short-term Memory Search",
                       "CI": "Conversational Interaction", "KG": "Knowledge-based QA", "SF": "Simple Factual"}

SA_CAPS = ("RTP", "HR", "Tool", "Pro")


def sb_task(name: str) -> str | None:
    """A StreamingBench task name (any spelling) or abbreviation -> its abbreviation."""
    s = name.strip()
    return s.upper() if s.upper() in SB_TASKS else SB_BY_NAME.get(s.lower())


def hr_stratum(gap_s: float) -> str:
    """StreamArena HR levels by the evidence-to-query gap: <= 5, 5-15, 15-30, > 30 minutes."""
    return "L1" if gap_s <= 300 else "L2" if gap_s <= 900 else "L3" if gap_s <= 1800 else "L4"


def pro_stratum(horizon_s: float) -> str:
    """StreamArena Pro levels by the monitoring horizon: <= 30 s, 30 s - 4 min, > 4 min."""
    return "L1" if horizon_s <= 30 else "L2" if horizon_s <= 240 else "L3"
