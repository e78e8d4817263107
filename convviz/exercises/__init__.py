"""Auto-checked exercises for the course notebooks: predict, then check.

Each lesson module (``convviz.exercises.<lesson>``) registers its exercises by
name; a notebook cell calls :func:`check` with the learner's answer, which says
right or wrong and why, computed from the same geometry and kernels as the
figures.  Solutions stay in the notebooks, folded in ``<details>`` blocks.

Examples
--------
A wrong answer hears what it reveals:

>>> from convviz import exercises
>>> exercises.check("demo-output-size", 3)
Not yet: 3 is VALID's count (floor((7 - 3) / 2) + 1 = 3); SAME keeps ceil(7 / 2) = 4.
False
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Exercise", "check", "exercise", "names", "register"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: the expected answer, why it is right, and what a wrong answer means.

    Parameters
    ----------
    name : str
        The name a notebook passes to :func:`check` (``"<lesson>-<what>"``).
    expected : Any
        The answer: a number, a tuple or list, a set, or an array (compared with
        ``np.allclose`` at ``rtol``).
    why : str
        One or two sentences that explain the answer, shown when it is right.
    explain : callable, optional
        ``explain(answer)``: why this wrong answer is wrong (the usual
        misconception it reveals), as a sentence or as a list of notes (joined
        with "; "), for answers a table cannot list; else ``mistakes``.
    rtol : float
        Relative tolerance for numbers and arrays.
    mistakes : sequence of (answer, str), optional
        The usual wrong answers, each with what it reveals, compared as the
        expected answer is (sets as sets, numbers to ``rtol``).
    otherwise : str, optional
        What any other wrong answer hears; by default the expected answer and ``why``.
    form : str, optional
        What an answer that is not even of the expected kind (a number, a
        sequence, a set) hears: how to write one.
    parts : sequence of (mistakes, otherwise), optional
        For an answer in parts (a tuple): each part's usual wrong values with
        what they reveal, and what any other wrong value of that part hears;
        a wrong answer hears a note per wrong part.
    """

    name: str
    expected: Any
    why: str
    explain: Callable[[Any], str | list[str]] | None = None
    rtol: float = 1e-9
    mistakes: Sequence[tuple[Any, str]] = ()
    otherwise: str = ""
    form: str = ""
    parts: Sequence[tuple[Sequence[tuple[Any, str]], str]] = ()

    def explanation(self, answer: Any) -> str:
        """Why ``answer`` (a wrong one) is wrong."""
        if self.explain is not None:
            reason = self.explain(answer)
            return reason if isinstance(reason, str) else "; ".join(reason) + "."
        if self.form and not _same_kind(answer, self.expected):
            return self.form
        if self.parts:
            if np.shape(answer)[:1] != (len(self.parts),):
                return self.form or f"the answer is {self.expected!r}: {self.why}"
            notes = [self._meaning(given, mistakes, otherwise)
                     for given, wanted, (mistakes, otherwise) in zip(answer, self.expected, self.parts)
                     if not self._equal(given, wanted)]
            return "; ".join(notes) + "."
        return self._meaning(answer, self.mistakes, self.otherwise or f"the answer is {self.expected!r}: {self.why}")

    def _meaning(self, answer: Any, mistakes: Sequence[tuple[Any, str]], otherwise: str) -> str:
        """What ``answer`` reveals: the text of the listed mistake it equals, else ``otherwise``."""
        for mistake, meaning in mistakes:
            if self._equal(answer, mistake):
                return meaning
        return otherwise

    def is_right(self, answer: Any) -> bool:
        """Whether ``answer`` equals the expected answer (sets as sets, arrays to ``rtol``)."""
        return self._equal(answer, self.expected)

    def _equal(self, answer: Any, expected: Any) -> bool:
        if isinstance(expected, (set, frozenset)):
            try:
                return set(answer) == set(expected)
            except TypeError:
                return False
        if isinstance(expected, str):
            return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
        try:
            got, want = np.asarray(answer, dtype=float), np.asarray(expected, dtype=float)
        except (TypeError, ValueError):
            return False
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=self.rtol, atol=self.rtol))


def _same_kind(answer: Any, expected: Any) -> bool:
    """Whether ``answer`` can be read as ``expected`` is: a set of ints, numbers nested
    as deep as the expected ones (a number, a sequence, a list of pairs), or a string."""
    try:
        if isinstance(expected, (set, frozenset)):
            {int(item) for item in answer}
            return True
        if isinstance(expected, str):
            return isinstance(answer, str)
        return bool(np.asarray(answer, dtype=float).ndim == np.ndim(expected))
    except (TypeError, ValueError):
        return False


_REGISTRY: dict[str, Exercise] = {}
_lessons_loaded = False


def register(item: Exercise) -> Exercise:
    """Add an exercise to the registry (names are unique) and return it."""
    if item.name in _REGISTRY:
        raise ValueError(f"exercise name: {item.name!r} is registered twice")
    _REGISTRY[item.name] = item
    return item


def _load_lessons() -> None:
    # Once: importing one lesson module directly must not hide the others.
    global _lessons_loaded
    if not _lessons_loaded:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _lessons_loaded = True


def exercise(name: str) -> Exercise:
    """The registered exercise called ``name``.

    Raises
    ------
    KeyError
        With the names that exist, when there is no such exercise.
    """
    _load_lessons()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no exercise {name!r}; there are: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    """Every registered exercise name, sorted."""
    _load_lessons()
    return sorted(_REGISTRY)


def check(name: str, answer: Any) -> bool:
    """Say whether ``answer`` to exercise ``name`` is right, and why; return that.

    Parameters
    ----------
    name : str
        The exercise's name, as the notebook gives it.
    answer : Any
        The learner's answer.

    Returns
    -------
    bool
        True when the answer is right.

    Examples
    --------
    >>> from convviz import exercises
    >>> exercises.check("demo-output-size", 4)
    Right: SAME keeps ceil(7 / 2) = 4 output positions.
    True
    """
    item = exercise(name)
    if answer is None or answer is Ellipsis:
        print("Not yet: write your prediction in `answer` first, then run this cell again.")
        return False
    if item.is_right(answer):
        print(f"Right: {item.why}")
        return True
    print(f"Not yet: {item.explanation(answer)}")
    return False
