"""The benchmarks' question forms: the text each benchmark's own evaluation sends for a record,
in our words but with the same content and the same reply format asked for (the official rule
scores that format: a bare letter, "Yes"/"No", a number, an <answer> tag).

The loaders build each question's ``prompt`` with these; the engine and the baselines send it
as it is, so both are asked exactly the same thing."""
from __future__ import annotations

# OVO-Bench (its prompts ask for the letter alone, a number alone, or Yes/No alone)
OVO_MC_REPLY = "Reply with only the letter of the option you choose (A, B, C, ...), with no other text."
OVO_COUNT_REPLY = "Reply with a single number (0, 1, 2, 3, ...), the total count, with no other text."
YES_NO_REPLY = "Reply with only \"Yes\" or \"No\", with no other text."

# StreamingBench (its prompts ask for the letter of one of the four options)
SB_MC_REPLY = "Reply with only the letter (A, B, C or D) of the best option."

# OASIS's evaluation asks for the final answer inside <answer> tags (its scorer reads them)
OASIS_MC_REPLY = ("Place your final answer inside <answer> and </answer>: only the letter of the chosen option, "
                  "e.g. <answer>B</answer>.")
OASIS_OPEN_REPLY = "Place your final answer inside <answer> and </answer>."

GENERIC_MC_REPLY = "Reply with the letter of the correct option."


def multiple_choice(question: str, options, reply: str, context: str = "") -> str:
    lines = ([context, ""] if context else []) + [f"Question: {question}", "Options:", *options, reply]
    return "\n".join(lines)


def ovo_count(activity: str) -> str:
    """REC: how many times the activity has been done so far, by anyone in the video."""
    return ("People in this video may repeat one kind of action. Count how many times it has been done in total, "
            "by all the people in the video, one complete motion counting as one.\n"
            f"Question: How many times did they {activity}?\n{OVO_COUNT_REPLY}")


def ovo_step(step: str) -> str:
    """SSR: whether the person is performing this step of the tutorial now."""
    return ("This is a tutorial video made of a sequence of steps. One step of the procedure is:\n"
            f"{step}\nIs the person in the video performing this step right now?\n{YES_NO_REPLY}")


def ovo_sufficiency(question: str) -> str:
    """CRR: not the question itself, but whether the video so far can answer it."""
    return ("The following question is about the latest frames, the end of the video so far:\n"
            f"{question}\nDo the frames seen so far, especially the latest ones, give enough information to "
            f"answer this question?\n{YES_NO_REPLY}")


def sb_context(earlier) -> str:
    """StreamingBench SQA: the earlier questions of the video with their options and their
    ground-truth answers, in record order. ``earlier``: (time stamp, question, options, letter)."""
    if not earlier:
        return ""
    turns = [f"At {ts} the question was: {q} Options: {'; '.join(opts)}. Answer: {letter}."
             for ts, q, opts, letter in earlier]
    return ("Context: earlier questions about this video and their correct answers. Use them to answer the new "
            "question, and do not confuse it with them.\n" + "\n".join(turns))


def sb_poll(question: str, output: str) -> str:
    """StreamingBench Proactive Output: the question polled once a second until the model says yes."""
    return f"{question} Is it the right time to output \"{output}\"? Answer only yes or no."


def oasis_open(question: str) -> str:
    return f"{question}\n{OASIS_OPEN_REPLY}"


def generic(question: str, options=None, context: str = "") -> str:
    """Our JSONL and StreamArena: the question as written (and the options with a request for
    the letter)."""
    parts = [context, question] if context else [question]
    if options:
        parts += list(options) + [GENERIC_MC_REPLY]
    return "\n".join(parts)


def question_text(q) -> str:
    """What is sent for question ``q``: its benchmark form, built by the loader."""
    return q.prompt or generic(q.question, q.options, q.context)
