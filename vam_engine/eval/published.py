"""Published rows from the seed papers' tables, shown beside a run's own rows (numbers only,
quoted from the tables named in each label; a column a table does not report stays empty).
They are comparable with a run only when the whole benchmark is run under its protocol."""
from __future__ import annotations

_OVO_COLS = ["OCR", "ACR", "ATR", "STU", "FPD", "OJR", "RT avg", "EPM", "ASI", "HLD", "BT avg",
             "REC", "SSR", "CRR", "Fwd avg", "RT+BT", "overall"]

# benchmark -> [(label, {column: value})]
PUBLISHED = {
    "ovo": [
        ("paper: VAM, Gemini 3 Flash (VAM Tab. 1)", dict(zip(_OVO_COLS, (
            85.23, 76.15, 81.90, 82.19, 74.26, 73.91, 78.94, 62.29, 66.22, 45.16, 57.89,
            22.78, 58.82, 65.42, 49.01, 68.41, 61.95)))),
        ("paper: Gemini 3 Flash end to end (VAM Tab. 1)", dict(zip(_OVO_COLS, (
            86.58, 68.81, 79.31, 58.99, 70.30, 70.65, 72.44, 58.92, 76.35, 52.15, 62.47,
            35.53, 74.24, 61.67, 57.15, 67.46, 64.02)))),
        ("paper: OASIS, Qwen3-VL-8B (OASIS Tab. 1)", dict(zip(_OVO_COLS[:11], (
            91.95, 80.73, 81.03, 67.42, 67.33, 79.89, 78.14, 61.95, 60.14, 47.31, 57.21)))),
        ("paper: Qwen3-VL-8B 0.5 fps (OASIS Tab. 1)", dict(zip(_OVO_COLS[:11], (
            83.89, 58.72, 70.69, 56.18, 69.31, 64.13, 66.79, 51.18, 60.81, 43.55, 51.19)))),
    ],
    "streamingbench": [
        ("paper: OASIS, Qwen3-VL-8B (OASIS Tab. 2)", {"Real-Time": 78.22, "ACU": 42.74, "MCU": 49.60, "SQA": 48.40}),
        ("paper: Qwen3-VL-8B 0.5 fps (OASIS Tab. 2)", {"Real-Time": 72.83, "ACU": 35.63, "MCU": 35.74, "SQA": 43.90}),
    ],
    "streambench": [
        ("paper: OASIS, Qwen3-VL-8B (OASIS Tab. 9)", dict(zip(["OS", "LM", "SM", "CI", "KG", "SF", "Avg"], (
            47.0, 53.6, 54.3, 71.7, 86.1, 67.6, 62.1)))),
        ("paper: Qwen3-VL-8B 0.5 fps (OASIS Tab. 9)", dict(zip(["OS", "LM", "SM", "CI", "KG", "SF", "Avg"], (
            33.8, 50.5, 47.8, 69.4, 73.5, 62.6, 56.0)))),
    ],
    "mmlifelong": [
        ("paper: VAM (VAM Tab. 3)", {"Acc.": 17.11, "Ref@300": 3.65}),
        ("paper: ReMA with GPT-5 (VAM Tab. 3)", {"Acc.": 17.62, "Ref@300": 9.91}),
        ("paper: GPT-5 end to end (VAM Tab. 3)", {"Acc.": 10.15, "Ref@300": 1.39}),
    ],
    "streamarena": [
        ("paper: StreamMind (StreamArena Tab. 3)", {"RTP": 44.5, "HR avg": 34.9, "HR L1": 31.5, "HR L2": 46.7,
                                                    "HR L3": 34.6, "HR L4": 17.1, "Tool": 56.1, "Pro avg": 11.6,
                                                    "Pro L1": 16.6, "Pro L2": 9.5, "Pro L3": 7.5}),
    ],
}
